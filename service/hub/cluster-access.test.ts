// ClusterSecretAccess: each request carries the cluster Secret's credentials and TLS settings, and the
// ones rotate() was given from the next request on.
import type https from 'node:https';
import { describe, expect, it } from 'vitest';
import { ClusterSecretAccess } from './cluster-access.ts';
import type { ClusterCredentials } from './cluster-secret.ts';

const SERVER = 'https://spoke.example:6443';

async function optionsFor(access: ClusterSecretAccess, start: https.RequestOptions = {}) {
  const opts: https.RequestOptions = { method: 'GET', path: '/version', ...start };
  await access.applyToHTTPSOptions(opts);
  return opts;
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('ClusterSecretAccess', () => {
  it('names its server', () => {
    expect(new ClusterSecretAccess(SERVER, { insecure: false }).getCurrentCluster()).toEqual({
      server: SERVER,
    });
  });

  it('sends a bearer token, keeping the request headers', async () => {
    const opts = await optionsFor(new ClusterSecretAccess(SERVER, { bearerToken: 't0k', insecure: false }), {
      headers: { Accept: 'application/json' },
    });
    expect(opts.headers).toEqual({ Accept: 'application/json', Authorization: 'Bearer t0k' });
  });

  it('sends basic auth, with an empty password when the Secret has none', async () => {
    const withPw = await optionsFor(
      new ClusterSecretAccess(SERVER, { username: 'admin', password: 'pw', insecure: false }),
    );
    expect(withPw.headers).toEqual({ Authorization: basic('admin', 'pw') });
    const noPw = await optionsFor(new ClusterSecretAccess(SERVER, { username: 'admin', insecure: false }));
    expect(noPw.headers).toEqual({ Authorization: basic('admin', '') });
  });

  it('prefers the bearer token when the Secret also holds a username', async () => {
    const opts = await optionsFor(
      new ClusterSecretAccess(SERVER, { bearerToken: 't', username: 'u', password: 'p', insecure: false }),
    );
    expect(opts.headers).toEqual({ Authorization: 'Bearer t' });
  });

  it('sets the CA, client certificate and key, servername; verifies the server unless insecure', async () => {
    const creds: ClusterCredentials = {
      ca: Buffer.from('ca'),
      cert: Buffer.from('cert'),
      key: Buffer.from('key'),
      serverName: 'api.internal',
      insecure: false,
    };
    const opts = await optionsFor(new ClusterSecretAccess(SERVER, creds));
    expect(opts).toMatchObject({
      ca: creds.ca,
      cert: creds.cert,
      key: creds.key,
      servername: 'api.internal',
    });
    expect(opts.rejectUnauthorized).toBeUndefined();
    // A client certificate alone: no Authorization header.
    expect(opts.headers).toBeUndefined();

    const insecure = await optionsFor(new ClusterSecretAccess(SERVER, { bearerToken: 't', insecure: true }));
    expect(insecure.rejectUnauthorized).toBe(false);
    expect(insecure.ca).toBeUndefined();
  });

  it('uses rotated credentials from the next request on', async () => {
    const access = new ClusterSecretAccess(SERVER, {
      bearerToken: 'old',
      ca: Buffer.from('ca-1'),
      insecure: false,
    });
    expect((await optionsFor(access)).headers).toEqual({ Authorization: 'Bearer old' });
    access.rotate({ bearerToken: 'new', ca: Buffer.from('ca-2'), insecure: false });
    const next = await optionsFor(access);
    expect(next.headers).toEqual({ Authorization: 'Bearer new' });
    expect(next.ca).toEqual(Buffer.from('ca-2'));
    // From a token to a client certificate: the old token is not sent.
    access.rotate({ cert: Buffer.from('cert'), key: Buffer.from('key'), insecure: false });
    const certOnly = await optionsFor(access);
    expect(certOnly.headers).toBeUndefined();
    expect(certOnly).toMatchObject({ cert: Buffer.from('cert'), key: Buffer.from('key') });
    expect(certOnly.ca).toBeUndefined();
  });

  it('held: sends nothing, every request fails with the reason, until credentials are given', async () => {
    const access = new ClusterSecretAccess(SERVER, { held: 'gr/c0: config is not a JSON object' });
    expect(access.held).toContain('config is not a JSON object');
    await expect(optionsFor(access)).rejects.toThrow(/cluster held.*config is not a JSON object/);
    let usable = false;
    void access.usable().then(() => (usable = true));
    await Promise.resolve();
    expect(usable).toBe(false);
    access.rotate({ bearerToken: 'ours', insecure: false });
    await access.usable();
    expect((await optionsFor(access)).headers).toEqual({ Authorization: 'Bearer ours' });
    // Held again from credentials: the old token is not sent.
    access.hold('refused');
    const opts: https.RequestOptions = {};
    await expect(access.applyToHTTPSOptions(opts)).rejects.toThrow('refused');
    expect(opts.headers).toBeUndefined();
  });
});
