// readClusterSecret: what an Argo CD cluster Secret opts in, how its server and scope are read, the
// credentials it may carry, and every refusal, whose reason never holds the Secret's data.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CLUSTER_SECRET_TYPE_LABEL,
  type ClusterSecretReading,
  clusterId,
  HUB_SERVE_LABEL,
  readClusterSecret,
  registration,
  type ServedCluster,
} from './cluster-secret.ts';

const TOKEN = 'tok-3f9a1c0e-never-logged';
const PASSWORD = 'pw-b71d5e42-never-logged';
const KEY_PEM = '-----BEGIN PRIVATE KEY-----\nkey-5c2e8d19-never-logged\n-----END PRIVATE KEY-----\n';
const CERT_PEM = '-----BEGIN CERTIFICATE-----\ncert-0a4b\n-----END CERTIFICATE-----\n';
const CA_PEM = '-----BEGIN CERTIFICATE-----\nca-77e1\n-----END CERTIFICATE-----\n';

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

interface SecretFields {
  server?: string;
  name?: string;
  namespaces?: string;
  /** JSON-encoded unless a string (then as written, to test text that is not JSON). */
  config?: unknown;
  labels?: Record<string, string>;
}

/** A cluster Secret as the API server returns it: labelled for Argo CD and opted in, data base64. */
function clusterSecret(f: SecretFields) {
  const data: Record<string, string> = {};
  if (f.server !== undefined) data.server = b64(f.server);
  if (f.name !== undefined) data.name = b64(f.name);
  if (f.namespaces !== undefined) data.namespaces = b64(f.namespaces);
  if (f.config !== undefined)
    data.config = b64(typeof f.config === 'string' ? f.config : JSON.stringify(f.config));
  return {
    metadata: {
      namespace: 'argocd',
      name: 'cluster-spoke',
      labels: f.labels ?? { [CLUSTER_SECRET_TYPE_LABEL]: 'cluster', [HUB_SERVE_LABEL]: 'true' },
    },
    data,
  };
}

const tokenConfig = { bearerToken: TOKEN, tlsClientConfig: { caData: b64(CA_PEM) } };

function served(r: ClusterSecretReading): ServedCluster {
  if (!('served' in r)) throw new Error(`expected a served cluster, got ${JSON.stringify(r)}`);
  return r.served;
}

/** Why the Secret, or its credentials (the cluster then served only through ours), are refused. */
function refusalOf(r: ClusterSecretReading): string | undefined {
  if ('refused' in r) return r.refused;
  if ('served' in r && 'refused' in r.served.credentials) return r.served.credentials.refused;
  return undefined;
}

function refusal(r: ClusterSecretReading): string {
  const why = refusalOf(r);
  if (why === undefined) throw new Error(`expected a refusal, got ${JSON.stringify(r)}`);
  return why;
}

function usable(c: ServedCluster) {
  if ('refused' in c.credentials) throw new Error(`credentials refused: ${c.credentials.refused}`);
  return c.credentials;
}

describe('readClusterSecret: served clusters', () => {
  it('serves a bearer token with a CA, keyed by its canonical server', () => {
    const c = served(
      readClusterSecret(
        clusterSecret({ server: 'https://spoke.example:6443', name: 'spoke', config: tokenConfig }),
      ),
    );
    expect(c).toMatchObject({
      secret: 'argocd/cluster-spoke',
      server: 'https://spoke.example:6443',
      name: 'spoke',
      namespaces: [],
    });
    expect(usable(c).credentials).toEqual({ bearerToken: TOKEN, ca: Buffer.from(CA_PEM), insecure: false });
  });

  it('serves a TLS client certificate and key, with serverName and insecure', () => {
    const c = served(
      readClusterSecret(
        clusterSecret({
          server: 'https://10.0.0.7',
          name: 'certs',
          config: {
            tlsClientConfig: {
              certData: b64(CERT_PEM),
              keyData: b64(KEY_PEM),
              serverName: 'api.spoke.internal',
              insecure: true,
            },
          },
        }),
      ),
    );
    expect(usable(c).credentials).toEqual({
      cert: Buffer.from(CERT_PEM),
      key: Buffer.from(KEY_PEM),
      serverName: 'api.spoke.internal',
      insecure: true,
    });
  });

  it('serves basic auth', () => {
    const c = served(
      readClusterSecret(
        clusterSecret({
          server: 'https://spoke.example',
          name: 'basic',
          config: { username: 'admin', password: PASSWORD },
        }),
      ),
    );
    expect(usable(c).credentials).toEqual({ username: 'admin', password: PASSWORD, insecure: false });
  });

  it.each([
    ['https://spoke.example:6443/', 'https://spoke.example:6443'],
    ['https://SPOKE.Example:6443', 'https://spoke.example:6443'],
    ['HTTPS://Spoke.EXAMPLE:443//', 'https://spoke.example'],
    ['  https://spoke.example/k8s/clusters/c-1/  ', 'https://spoke.example/k8s/clusters/c-1'],
  ])('reads the server %j as %j', (raw, canonical) => {
    expect(served(readClusterSecret(clusterSecret({ server: raw, config: tokenConfig }))).server).toBe(
      canonical,
    );
  });

  it('reads `namespaces` as a comma list, spaces and empty entries dropped', () => {
    const c = served(
      readClusterSecret(
        clusterSecret({
          server: 'https://spoke.example',
          namespaces: ' team-a , team-b,,',
          config: tokenConfig,
        }),
      ),
    );
    expect(c.namespaces).toEqual(['team-a', 'team-b']);
  });
});

describe('readClusterSecret: not served', () => {
  it('does not serve a cluster Secret without the opt-in label', () => {
    const r = readClusterSecret(
      clusterSecret({
        server: 'https://spoke.example',
        config: tokenConfig,
        labels: { [CLUSTER_SECRET_TYPE_LABEL]: 'cluster' },
      }),
    );
    expect(r).toEqual({ notServed: `no ${HUB_SERVE_LABEL}=true label` });
  });

  it.each([
    ['false', { [CLUSTER_SECRET_TYPE_LABEL]: 'cluster', [HUB_SERVE_LABEL]: 'false' }],
    ['"True"', { [CLUSTER_SECRET_TYPE_LABEL]: 'cluster', [HUB_SERVE_LABEL]: 'True' }],
  ])('does not serve a cluster Secret with the opt-in label set to %s', (_, labels) => {
    const r = readClusterSecret(
      clusterSecret({ server: 'https://spoke.example', config: tokenConfig, labels }),
    );
    expect(r).toHaveProperty('notServed');
  });

  it.each([
    ['repository', { [CLUSTER_SECRET_TYPE_LABEL]: 'repository', [HUB_SERVE_LABEL]: 'true' }],
    ['no secret-type', { [HUB_SERVE_LABEL]: 'true' }],
  ])('does not serve an opted-in Secret that is not a cluster Secret (%s)', (_, labels) => {
    const r = readClusterSecret(
      clusterSecret({ server: 'https://spoke.example', config: tokenConfig, labels }),
    );
    expect(r).toEqual({ notServed: 'not an Argo CD cluster Secret' });
  });

  it('does not serve a Secret without metadata or data', () => {
    expect(readClusterSecret({})).toHaveProperty('notServed');
  });
});

/** Each refusal, with its Secret carrying every kind of credential material the reason must not hold. */
const refusals: Array<[string, SecretFields, RegExp]> = [
  ['no server', { config: tokenConfig }, /has no server/],
  ['a blank server', { server: '   ', config: tokenConfig }, /has no server/],
  [
    'a server with a password in its userinfo',
    { server: `https://bot:${PASSWORD}@spoke.example`, config: tokenConfig },
    /server is not an http\(s\) URL/,
  ],
  [
    'a server with a user in its userinfo',
    { server: 'https://bot@spoke.example', config: tokenConfig },
    /server is not an http\(s\) URL/,
  ],
  [
    'a server with a .. segment',
    { server: 'https://spoke.example/k8s/../other', config: tokenConfig },
    /server is not an http\(s\) URL/,
  ],
  [
    'a server with a query',
    { server: `https://spoke.example/?token=${TOKEN}`, config: tokenConfig },
    /server is not an http\(s\) URL/,
  ],
  [
    'a server that is not http(s)',
    { server: 'ftp://spoke.example', config: tokenConfig },
    /server is not an http\(s\) URL/,
  ],
  ['a server that is no URL', { server: 'spoke.example:6443', config: tokenConfig }, /server is not/],
  [
    'execProviderConfig credentials',
    {
      server: 'https://spoke.example',
      config: { bearerToken: TOKEN, execProviderConfig: { command: 'argocd-k8s-auth', args: [TOKEN] } },
    },
    /execProviderConfig is accepted only in a credentials Secret of ours/,
  ],
  [
    'awsAuthConfig credentials',
    {
      server: 'https://spoke.example',
      config: {
        awsAuthConfig: { clusterName: 'prod', roleARN: 'arn:aws:iam::1:role/x' },
        password: PASSWORD,
      },
    },
    /awsAuthConfig credentials are not supported/,
  ],
  [
    'a config that is not JSON',
    { server: 'https://spoke.example', config: `{"bearerToken": "${TOKEN}", "password": "${PASSWORD}` },
    /config is not a JSON object/,
  ],
  [
    'a config whose token is not quoted (a JSON parser quotes the text around the error)',
    { server: 'https://spoke.example', config: `{"bearerToken": ${TOKEN}}` },
    /config is not a JSON object/,
  ],
  [
    'a config that is a JSON array',
    { server: 'https://spoke.example', config: [TOKEN, PASSWORD] },
    /config is not a JSON object/,
  ],
  [
    'a config that is JSON null',
    { server: 'https://spoke.example', config: 'null' },
    /config is not a JSON object/,
  ],
  [
    'a config that is a JSON string',
    { server: 'https://spoke.example', config: JSON.stringify(TOKEN) },
    /config is not a JSON object/,
  ],
  [
    'certData without keyData',
    { server: 'https://spoke.example', config: { tlsClientConfig: { certData: b64(KEY_PEM) } } },
    /certData and keyData come together/,
  ],
  [
    'keyData without certData',
    {
      server: 'https://spoke.example',
      config: { bearerToken: TOKEN, tlsClientConfig: { keyData: b64(KEY_PEM) } },
    },
    /certData and keyData come together/,
  ],
  [
    'no credentials at all (a CA alone)',
    { server: 'https://spoke.example', config: { tlsClientConfig: { caData: b64(CA_PEM) } } },
    /no bearerToken, client certificate, username or exec plugin/,
  ],
  [
    'no config',
    { server: 'https://spoke.example' },
    /no bearerToken, client certificate, username or exec plugin/,
  ],
  [
    'a namespace that is not a DNS label',
    { server: 'https://spoke.example', namespaces: 'team-a,Team_B', config: tokenConfig },
    /namespaces lists a name that is not a namespace/,
  ],
  [
    'a namespace with a path in it',
    { server: 'https://spoke.example', namespaces: '../kube-system', config: tokenConfig },
    /namespaces lists a name that is not a namespace/,
  ],
  [
    'a bearerToken that is not a string',
    { server: 'https://spoke.example', config: { bearerToken: { value: TOKEN }, password: PASSWORD } },
    /config\.bearerToken is not a string/,
  ],
  [
    'a password that is not a string',
    { server: 'https://spoke.example', config: { username: 'admin', password: [PASSWORD] } },
    /config\.password is not a string/,
  ],
  [
    'keyData that is not a string',
    {
      server: 'https://spoke.example',
      config: { tlsClientConfig: { certData: b64(CERT_PEM), keyData: { pem: KEY_PEM } } },
    },
    /keyData is not a base64 string/,
  ],
];

/** The Secret's credential material in every form it could leak in: as written, and base64. */
const MATERIAL = [TOKEN, PASSWORD, KEY_PEM, CERT_PEM].flatMap((s) => [s, b64(s)]);
/** Fragments: a parser's message quotes about ten characters around where it stopped. */
const FRAGMENTS = [TOKEN.slice(0, 10), PASSWORD.slice(0, 10), 'key-5c2e8d19', 'never-logged'];

describe('readClusterSecret: refusals', () => {
  it.each(refusals)('refuses %s, naming the Secret and why', (_, fields, reason) => {
    const r = readClusterSecret(clusterSecret({ name: 'spoke', ...fields }));
    expect(refusal(r)).toMatch(reason);
    expect(refusal(r)).toContain('argocd/cluster-spoke');
  });

  it.each(refusals)('refuses %s without the Secret data in what it returns', (_, fields) => {
    const returned = JSON.stringify(readClusterSecret(clusterSecret({ name: 'spoke', ...fields })));
    for (const m of [...MATERIAL, ...FRAGMENTS]) expect(returned).not.toContain(m);
  });

  it('serves a cluster whose credentials it refuses, with its scope, and without credentials (ours may serve it)', () => {
    const c = served(
      readClusterSecret(
        clusterSecret({
          server: 'https://Spoke.example/',
          name: 'spoke',
          namespaces: 'team-a',
          config: { bearerToken: TOKEN, execProviderConfig: { command: '/bin/cp', args: ['/a', '/b'] } },
        }),
      ),
    );
    expect(c).toMatchObject({ server: 'https://spoke.example', name: 'spoke', namespaces: ['team-a'] });
    expect(c.credentials).toEqual({ refused: expect.stringContaining('never in a cluster Secret') });
  });

  it('never takes an exec plugin from a cluster Secret, whatever its fields (property)', () => {
    const str = fc.string({ maxLength: 12 });
    const exec = fc.record(
      {
        command: fc.oneof(fc.constantFrom('/bin/cp', '/usr/bin/aws', 'cp', ''), str),
        args: fc.oneof(fc.array(str), str),
        env: fc.oneof(fc.dictionary(str, str), str),
        apiVersion: fc.constantFrom('client.authentication.k8s.io/v1', 'x', undefined),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(exec, fc.boolean(), (execProviderConfig, withToken) => {
        const r = readClusterSecret(
          clusterSecret({
            server: 'https://spoke.example',
            name: 'spoke',
            config: { ...(withToken ? { bearerToken: TOKEN } : {}), execProviderConfig },
          }),
        );
        expect(refusalOf(r)).toBeDefined();
        expect(JSON.stringify(r)).not.toContain('"exec"');
      }),
      { numRuns: 500 },
    );
  });

  it('returns the name, and the server once read, with a refusal (for destination.name to count it)', () => {
    const r = readClusterSecret(
      clusterSecret({
        server: 'https://Spoke.example/',
        name: 'spoke',
        namespaces: 'Team_B',
        config: tokenConfig,
      }),
    );
    expect(r).toMatchObject({ refused: expect.any(String), name: 'spoke', server: 'https://spoke.example' });
  });

  it('never returns a credential value it refuses (property: generated configs)', () => {
    const secretAndConfig = fc
      .string({ minLength: 8 })
      .map((s) => `zz-secret-${s}`)
      .chain((v) => {
        const value = fc.constantFrom<unknown>(v, b64(v), [v], { v }, 0, null, true);
        return fc.record({
          v: fc.constant(v),
          config: fc.record(
            {
              bearerToken: value,
              username: value,
              password: value,
              tlsClientConfig: fc.record(
                { caData: value, certData: value, keyData: value, serverName: value, insecure: value },
                { requiredKeys: [] },
              ),
              execProviderConfig: fc.constant({ command: 'login', args: [v] }),
              awsAuthConfig: fc.constant({ clusterName: v }),
            },
            { requiredKeys: [] },
          ),
        });
      });
    fc.assert(
      fc.property(secretAndConfig, ({ v, config }) => {
        const r = readClusterSecret(
          clusterSecret({ server: 'https://spoke.example', name: 'spoke', config }),
        );
        if (refusalOf(r) !== undefined) expect(JSON.stringify(r)).not.toContain(v);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('readClusterSecret: credentialsDigest', () => {
  const digest = (f: SecretFields) =>
    usable(served(readClusterSecret(clusterSecret({ server: 'https://spoke.example', name: 'spoke', ...f }))))
      .credentialsDigest;

  it('changes when the token is rotated', () => {
    expect(digest({ config: { bearerToken: 'a' } })).not.toBe(digest({ config: { bearerToken: 'b' } }));
  });

  it('changes when the CA, the client key or insecure changes', () => {
    const base = { tlsClientConfig: { certData: b64(CERT_PEM), keyData: b64(KEY_PEM), caData: b64(CA_PEM) } };
    const d = digest({ config: base });
    expect(
      digest({ config: { tlsClientConfig: { ...base.tlsClientConfig, keyData: b64('other') } } }),
    ).not.toBe(d);
    expect(
      digest({ config: { tlsClientConfig: { ...base.tlsClientConfig, caData: b64('other') } } }),
    ).not.toBe(d);
    expect(digest({ config: { tlsClientConfig: { ...base.tlsClientConfig, insecure: true } } })).not.toBe(d);
  });

  it('does not change when only the name or the namespaces change', () => {
    const d = digest({ config: { bearerToken: 'a' } });
    expect(digest({ name: 'renamed', config: { bearerToken: 'a' } })).toBe(d);
    expect(digest({ namespaces: 'team-a', config: { bearerToken: 'a' } })).toBe(d);
  });

  it('holds none of the credentials', () => {
    expect(digest({ config: { bearerToken: TOKEN } })).toMatch(/^[0-9a-f]{64}$/);
  });
});

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

describe('clusterId', () => {
  const idOf = (name: string, server: string) =>
    served(readClusterSecret(clusterSecret({ server, name, config: tokenConfig }))).id;

  it('is a DNS label of at most 53 characters, readable from the server, with 128 bits of digest', () => {
    const id = idOf('Prod EU-West (primary)', 'https://API.Prod.example:6443/k8s/clusters/c-1');
    expect(id).toMatch(DNS_LABEL);
    expect(id.length).toBeLessThanOrEqual(53);
    expect(id).toMatch(/^api-prod-example-644-[0-9a-f]{32}$/);
    expect(idOf('spoke', 'https://[::1]:6443')).toMatch(/^1-6443-[0-9a-f]{32}$/);
  });

  it('is stable: the same cluster gives the same id, read after read', () => {
    expect(idOf('spoke', 'https://spoke.example')).toBe(idOf('spoke', 'https://spoke.example'));
    // The server is canonical before it keys the id: spellings of one server are one cluster.
    expect(idOf('spoke', 'https://SPOKE.example:443/')).toBe(idOf('spoke', 'https://spoke.example'));
  });

  it('stays the same when the cluster Secret renames the cluster (its Lease and ledger are keyed by it)', () => {
    // A replica started after the rename must contend for the same Lease as one started before it,
    // or both lead the cluster and recycle its pods twice; and the ledger must still be found.
    expect(idOf('renamed', 'https://spoke.example')).toBe(idOf('spoke', 'https://spoke.example'));
  });

  it('differs for two servers with the same name', () => {
    expect(idOf('spoke', 'https://a.example')).not.toBe(idOf('spoke', 'https://b.example'));
  });

  it('is sane for a name of only symbols, an empty name and a long name, and a long server', () => {
    for (const name of ['!!!', '---', '', '🚀🚀', 'a'.repeat(200)]) {
      expect(idOf(name, 'https://spoke.example'), name).toBe(idOf('spoke', 'https://spoke.example'));
    }
    const long = idOf('spoke', `https://${'x'.repeat(19)}-${'y'.repeat(20)}.example`);
    expect(long).toMatch(DNS_LABEL);
    expect(long).toMatch(/^x{19}-[0-9a-f]{32}$/);
  });

  it('is a DNS label of at most 53 characters for any server (property)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.webUrl()), (server) => {
        const id = clusterId(server);
        expect(id).toMatch(DNS_LABEL);
        expect(id.length).toBeLessThanOrEqual(53);
        expect(id).toMatch(/-[0-9a-f]{32}$/);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('registration', () => {
  it("keeps a cluster's name as Argo CD reads it, untrimmed, and its server canonical", () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    expect(registration({ data: { name: b64(' prod '), server: b64('https://Prod.example:443/') } })).toEqual(
      {
        name: ' prod ',
        server: 'https://prod.example',
        rawServer: 'https://Prod.example:443/',
      },
    );
    // A server the parser refuses is kept as written: it names no served cluster, its name still counts.
    expect(registration({ data: { name: b64('x'), server: b64('https://u:p@x') } }).server).toBe(
      'https://u:p@x',
    );
  });
});
