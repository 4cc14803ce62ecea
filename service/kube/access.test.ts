import { mkdtempSync, writeFileSync } from 'node:fs';
import type https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { inClusterAccess, KubeconfigError, kubeconfigAccess, loadClusterAccess } from './access.ts';

const dir = () => mkdtempSync(path.join(tmpdir(), 'access-'));

function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = {}) {
  return `apiVersion: v1
kind: Config
current-context: c
contexts:
  - name: c
    context: { cluster: k, user: u }
clusters:
  - name: k
    cluster: ${JSON.stringify({ server: 'https://10.0.0.1:6443', ...cluster })}
users:
  - name: u
    user: ${JSON.stringify(user)}
`;
}

async function optionsOf(access: { applyToHTTPSOptions(o: https.RequestOptions): Promise<void> }) {
  const o: https.RequestOptions = { headers: { Accept: 'application/json' } };
  await access.applyToHTTPSOptions(o);
  return o;
}

describe('kubeconfigAccess', () => {
  it('reads a bearer token, the CA from data, and keeps the caller headers', async () => {
    const d = dir();
    const f = path.join(d, 'config');
    const ca = Buffer.from('CA-PEM').toString('base64');
    writeFileSync(f, kubeconfig({ token: 'abc' }, { 'certificate-authority-data': ca }));
    const access = await kubeconfigAccess(f);
    expect(access.getCurrentCluster()).toEqual({ server: 'https://10.0.0.1:6443' });
    const o = await optionsOf(access);
    expect(o.headers).toEqual({ Accept: 'application/json', Authorization: 'Bearer abc' });
    expect(String(o.ca)).toBe('CA-PEM');
    expect(o.rejectUnauthorized).toBeUndefined();
  });

  it('reads client certificate files relative to the kubeconfig, and insecure-skip-tls-verify', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'client.crt'), 'CERT');
    writeFileSync(path.join(d, 'client.key'), 'KEY');
    const f = path.join(d, 'config');
    writeFileSync(
      f,
      kubeconfig(
        { 'client-certificate': 'client.crt', 'client-key': 'client.key' },
        { 'insecure-skip-tls-verify': true, 'tls-server-name': 'api.internal' },
      ),
    );
    const o = await optionsOf(await kubeconfigAccess(f));
    expect(String(o.cert)).toBe('CERT');
    expect(String(o.key)).toBe('KEY');
    expect(o.rejectUnauthorized).toBe(false);
    expect(o.servername).toBe('api.internal');
    expect((o.headers as Record<string, string>).Authorization).toBeUndefined();
  });

  it('reads a tokenFile', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'token'), 'from-file\n');
    const f = path.join(d, 'config');
    writeFileSync(f, kubeconfig({ tokenFile: 'token' }));
    const o = await optionsOf(await kubeconfigAccess(f));
    expect((o.headers as Record<string, string>).Authorization).toBe('Bearer from-file');
  });

  it('hands exec credentials to the client library instead of ignoring them', async () => {
    const d = dir();
    const f = path.join(d, 'config');
    writeFileSync(
      f,
      kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: 'true' } }),
    );
    const access = await kubeconfigAccess(f);
    expect(access.constructor.name).toBe('KubeConfig');
    expect(access.getCurrentCluster()?.server).toBe('https://10.0.0.1:6443');
  });

  it('names the file and the problem when the kubeconfig is unusable', async () => {
    const d = dir();
    const f = path.join(d, 'config');
    writeFileSync(f, 'apiVersion: v1\nkind: Config\n');
    await expect(kubeconfigAccess(f)).rejects.toThrow(
      new KubeconfigError(`kubeconfig ${f}: no current-context`),
    );
    writeFileSync(f, kubeconfig({ token: 'x' }).replace('current-context: c', 'current-context: other'));
    await expect(kubeconfigAccess(f)).rejects.toThrow(/no context "other"/);
    writeFileSync(f, ': not yaml : [');
    await expect(kubeconfigAccess(f)).rejects.toThrow(KubeconfigError);
  });
});

describe('inClusterAccess', () => {
  it('uses the service account token and CA, with an IPv6 host in brackets', async () => {
    const d = dir();
    writeFileSync(path.join(d, 'token'), 'sa-token');
    writeFileSync(path.join(d, 'ca.crt'), 'SA-CA');
    const access = inClusterAccess({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, d);
    expect(access?.getCurrentCluster()).toEqual({ server: 'https://[fd00::1]:443' });
    const o = await optionsOf(access as NonNullable<typeof access>);
    expect((o.headers as Record<string, string>).Authorization).toBe('Bearer sa-token');
    expect(String(o.ca)).toBe('SA-CA');
  });

  it('is not in a cluster without the env vars or the token file', () => {
    expect(inClusterAccess({}, dir())).toBeUndefined();
    expect(
      inClusterAccess({ KUBERNETES_SERVICE_HOST: 'h', KUBERNETES_SERVICE_PORT: '1' }, dir()),
    ).toBeUndefined();
  });
});

describe('loadClusterAccess', () => {
  it('falls back to $KUBECONFIG, and says what it tried when nothing is there', async () => {
    const d = dir();
    const f = path.join(d, 'config');
    writeFileSync(f, kubeconfig({ token: 't' }));
    const access = await loadClusterAccess(undefined, {
      KUBECONFIG: `${path.join(d, 'missing')}${path.delimiter}${f}`,
    });
    expect(access.getCurrentCluster()?.server).toBe('https://10.0.0.1:6443');
    await expect(
      loadClusterAccess(undefined, { KUBECONFIG: path.join(d, 'missing'), HOME: d }),
    ).rejects.toThrow(/no cluster access/);
  });
});
