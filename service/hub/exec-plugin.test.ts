import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ClusterSecretAccess } from './cluster-access.ts';
import { readClusterSecret, readCredentialsSecret } from './cluster-secret.ts';
import { ExecCredentialSource, ExecPluginError, parseExecCredential } from './exec-plugin.ts';

const V1 = 'client.authentication.k8s.io/v1';

/** A real plugin: a script that counts its runs and prints an ExecCredential. */
async function plugin(body: string): Promise<{ command: string; runs: () => Promise<number> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-exec-'));
  const command = path.join(dir, 'plugin.sh');
  const counter = path.join(dir, 'runs');
  await writeFile(counter, '');
  await writeFile(command, `#!/bin/sh\necho x >> ${counter}\n${body}\n`);
  await chmod(command, 0o755);
  return { command, runs: async () => (await readFile(counter, 'utf8')).split('\n').filter(Boolean).length };
}

const credential = (status: object) => JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status });

describe('exec credential plugins', () => {
  it('runs an allowed plugin with its args and env and the exec info, and sends its token', async () => {
    const p = await plugin(
      `test "$1" = get-token && test "$REGION" = eu && echo "$KUBERNETES_EXEC_INFO" | grep -q '"interactive":false' || exit 3\ncat <<'X'\n${credential({ token: 'tok-1' })}\nX`,
    );
    const access = new ClusterSecretAccess('https://spoke.example', {
      insecure: false,
      exec: { command: p.command, args: ['get-token'], env: { REGION: 'eu' }, apiVersion: V1 },
    });
    const opts: { headers?: Record<string, string> } = {};
    await access.applyToHTTPSOptions(opts);
    expect(opts.headers?.Authorization).toBe('Bearer tok-1');
    // Cached: no expiry, so the second request does not run it again.
    await access.applyToHTTPSOptions({});
    expect(await p.runs()).toBe(1);
  });

  it('runs it again when the credential is about to expire', async () => {
    const p = await plugin(
      `cat <<'X'\n${credential({ token: 't', expirationTimestamp: '2030-01-01T00:00:00Z' })}\nX`,
    );
    let now = Date.parse('2029-12-31T23:00:00Z');
    const src = new ExecCredentialSource(
      { command: p.command, args: [], env: {}, apiVersion: V1 },
      () => now,
    );
    await src.get();
    await src.get();
    expect(await p.runs()).toBe(1);
    now = Date.parse('2029-12-31T23:59:55Z');
    await src.get();
    expect(await p.runs()).toBe(2);
  });

  it('names the plugin and its exit, never its output', async () => {
    const p = await plugin('echo secret-output; exit 7');
    const src = new ExecCredentialSource({ command: p.command, args: [], env: {}, apiVersion: V1 });
    const err = await src.get().catch((e: Error) => e);
    expect(err).toBeInstanceOf(ExecPluginError);
    expect((err as Error).message).toBe(`exec plugin ${p.command} exited with 7`);
  });

  it('reads a token or a client certificate, and refuses what is not an ExecCredential of its version', () => {
    expect(
      parseExecCredential(credential({ clientCertificateData: 'C', clientKeyData: 'K' }), V1, 'p'),
    ).toEqual({
      cert: 'C',
      key: 'K',
    });
    expect(() => parseExecCredential('not json', V1, 'p')).toThrow('did not print JSON');
    expect(() =>
      parseExecCredential(credential({ token: 't' }), 'client.authentication.k8s.io/v1beta1', 'p'),
    ).toThrow('did not print an ExecCredential');
    expect(() => parseExecCredential(credential({}), V1, 'p')).toThrow('neither a token');
    expect(() =>
      parseExecCredential(credential({ token: 't', expirationTimestamp: 'soon' }), V1, 'p'),
    ).toThrow('expirationTimestamp');
  });

  it('an execProviderConfig is read only from a credentials Secret of ours, and only for a listed command; never from a cluster Secret', () => {
    const config = (exec: object) =>
      Buffer.from(JSON.stringify({ execProviderConfig: exec })).toString('base64');
    const clusterSecret = (exec: object) => ({
      metadata: {
        namespace: 'argocd',
        name: 'c',
        labels: { 'argocd.argoproj.io/secret-type': 'cluster', 'gitops-reloader.io/serve': 'true' },
      },
      data: {
        name: Buffer.from('c').toString('base64'),
        server: Buffer.from('https://c.example').toString('base64'),
        config: config(exec),
      },
    });
    const ours = (exec: object) => ({
      metadata: { namespace: 'gitops-reloader', name: 'c-credentials' },
      data: { server: Buffer.from('https://c.example').toString('base64'), config: config(exec) },
    });
    const exec = { command: '/usr/local/bin/login', args: ['--x'], env: { A: 'secret-env' }, apiVersion: V1 };
    // A cluster Secret: served, its credentials refused (the cluster is served only through ours).
    const fromCluster = readClusterSecret(clusterSecret(exec));
    expect(fromCluster).toMatchObject({
      served: {
        server: 'https://c.example',
        credentials: { refused: expect.stringContaining('never in a cluster Secret') },
      },
    });
    expect(JSON.stringify(fromCluster)).not.toContain('secret-env');
    // Ours: refused when the command is not listed, read when it is.
    const notListed = readCredentialsSecret(ours(exec));
    expect(notListed).toEqual({
      refused: expect.stringContaining('--hub-exec-commands does not list'),
      secret: 'gitops-reloader/c-credentials',
      server: 'https://c.example',
    });
    expect(JSON.stringify(notListed)).not.toContain('secret-env');
    const listed = readCredentialsSecret(ours(exec), { execCommands: ['/usr/local/bin/login'] });
    expect('credentials' in listed && listed.credentials.exec).toEqual(exec);
    // The default API version, and malformed fields.
    const noVersion = readCredentialsSecret(ours({ command: '/usr/local/bin/login' }), {
      execCommands: ['/usr/local/bin/login'],
    });
    expect('credentials' in noVersion && noVersion.credentials.exec?.apiVersion).toBe(V1);
    for (const bad of [
      { command: '/usr/local/bin/login', args: 'x' },
      { command: '/usr/local/bin/login', env: { A: 1 } },
      { command: '/usr/local/bin/login', apiVersion: 'v9' },
      { command: '' },
    ]) {
      expect(readCredentialsSecret(ours(bad), { execCommands: ['/usr/local/bin/login'] })).toHaveProperty(
        'refused',
      );
    }
  });
});
