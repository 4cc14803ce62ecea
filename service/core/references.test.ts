import type { V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { extractReferences, type PodSpecLike } from './references.ts';
import type { ConfigUse } from './types.ts';

const NS = 'team-a';
const cm = (name: string, keys: ConfigUse['keys'], optional = false): ConfigUse => ({
  config: { kind: 'ConfigMap', namespace: NS, name },
  keys,
  optional,
});
const secret = (name: string, keys: ConfigUse['keys'], optional = false): ConfigUse => ({
  config: { kind: 'Secret', namespace: NS, name },
  keys,
  optional,
});
const refs = (spec: PodSpecLike) => extractReferences(NS, spec);

describe('extractReferences: volumes', () => {
  it('sees every key of a configMap volume without items', () => {
    expect(refs({ volumes: [{ configMap: { name: 'app' } }] })).toEqual([cm('app', 'all')]);
  });

  it('sees only the listed keys of a configMap volume with items', () => {
    const spec = {
      volumes: [
        {
          configMap: {
            name: 'app',
            items: [
              { key: 'b.yaml', path: 'b' },
              { key: 'a.yaml', path: 'a' },
            ],
          },
        },
      ],
    };
    expect(refs(spec)).toEqual([cm('app', ['a.yaml', 'b.yaml'])]);
  });

  it('treats an empty items list as every key, as the kubelet does', () => {
    expect(refs({ volumes: [{ configMap: { name: 'app', items: [] } }] })).toEqual([cm('app', 'all')]);
  });

  it('reads a secret volume by secretName', () => {
    expect(refs({ volumes: [{ secret: { secretName: 'tls', items: [{ key: 'tls.key' }] } }] })).toEqual([
      secret('tls', ['tls.key']),
    ]);
  });

  it('ignores a name field on a secret volume, which Kubernetes does not have', () => {
    const wrong = { volumes: [{ secret: { name: 'tls' } }] } as unknown as PodSpecLike;
    expect(refs(wrong)).toEqual([]);
  });

  it('reads configMap and secret sources of a projected volume, each with its own items and optional', () => {
    const spec: PodSpecLike = {
      volumes: [
        {
          projected: {
            sources: [
              { configMap: { name: 'app', items: [{ key: 'x' }] } },
              { secret: { name: 'creds', optional: true } },
              {}, // a downwardAPI or serviceAccountToken source: nothing to report
            ],
          },
        },
      ],
    };
    expect(refs(spec)).toEqual([cm('app', ['x']), secret('creds', 'all', true)]);
  });

  it('ignores volumes that are not configs', () => {
    const spec = {
      volumes: [
        { name: 'scratch', emptyDir: {} },
        { name: 'data', projected: {} },
      ],
    };
    expect(refs(spec)).toEqual([]);
  });
});

describe('extractReferences: containers', () => {
  it('sees every key of an envFrom configMapRef or secretRef', () => {
    const spec = {
      containers: [{ envFrom: [{ configMapRef: { name: 'app' } }, { secretRef: { name: 'db' } }] }],
    };
    expect(refs(spec)).toEqual([cm('app', 'all'), secret('db', 'all')]);
  });

  it('still sees every key when envFrom adds a prefix', () => {
    const spec = { containers: [{ envFrom: [{ prefix: 'APP_', configMapRef: { name: 'app' } }] }] };
    expect(refs(spec)).toEqual([cm('app', 'all')]);
  });

  it('sees only the referenced key of a configMapKeyRef or secretKeyRef', () => {
    const spec = {
      containers: [
        {
          env: [
            { name: 'LEVEL', valueFrom: { configMapKeyRef: { name: 'app', key: 'log-level' } } },
            { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } },
            { name: 'PLAIN', value: 'x' },
            { name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
        },
      ],
    };
    expect(refs(spec)).toEqual([cm('app', ['log-level']), secret('db', ['password'])]);
  });

  it('reads init containers and ephemeral containers as well as containers', () => {
    const spec: PodSpecLike = {
      initContainers: [{ envFrom: [{ configMapRef: { name: 'migrate' } }] }],
      ephemeralContainers: [{ envFrom: [{ secretRef: { name: 'debug' } }] }],
    };
    expect(refs(spec)).toEqual([cm('migrate', 'all'), secret('debug', 'all')]);
  });
});

describe('extractReferences: merging uses of one config', () => {
  it('unions the keys of several key references to one config, sorted and without duplicates', () => {
    const spec = {
      containers: [
        { env: [{ valueFrom: { configMapKeyRef: { name: 'app', key: 'z' } } }] },
        { env: [{ valueFrom: { configMapKeyRef: { name: 'app', key: 'a' } } }] },
      ],
      volumes: [{ configMap: { name: 'app', items: [{ key: 'z' }, { key: 'm' }] } }],
    };
    expect(refs(spec)).toEqual([cm('app', ['a', 'm', 'z'])]);
  });

  it('lets one use of every key win over key references, whichever comes first', () => {
    const keyRef = { env: [{ valueFrom: { configMapKeyRef: { name: 'app', key: 'k' } } }] };
    const allRef = { envFrom: [{ configMapRef: { name: 'app' } }] };
    expect(refs({ containers: [keyRef, allRef] })).toEqual([cm('app', 'all')]);
    expect(refs({ containers: [allRef, keyRef] })).toEqual([cm('app', 'all')]);
  });

  it('marks a config optional only if every use of it is optional', () => {
    const optionalUse = { envFrom: [{ secretRef: { name: 'db', optional: true } }] };
    const requiredUse = {
      env: [{ valueFrom: { secretKeyRef: { name: 'db', key: 'user', optional: false } } }],
    };
    expect(refs({ containers: [optionalUse] })).toEqual([secret('db', 'all', true)]);
    expect(refs({ containers: [optionalUse, requiredUse] })).toEqual([secret('db', 'all', false)]);
  });

  it('treats an unset optional as required, the Kubernetes default', () => {
    expect(refs({ volumes: [{ secret: { secretName: 'db' } }] })).toEqual([secret('db', 'all', false)]);
  });

  it('keeps a ConfigMap and a Secret of the same name apart', () => {
    const spec = {
      containers: [{ envFrom: [{ configMapRef: { name: 'app' } }, { secretRef: { name: 'app' } }] }],
    };
    expect(refs(spec)).toEqual([cm('app', 'all'), secret('app', 'all')]);
  });
});

describe('extractReferences: edge cases', () => {
  it('returns nothing for an empty spec', () => {
    expect(refs({})).toEqual([]);
    expect(refs({ containers: [{}], volumes: [] })).toEqual([]);
  });

  it('ignores references without a name', () => {
    const spec = {
      containers: [
        { envFrom: [{ configMapRef: {} }, { secretRef: { name: '' } }] },
        { env: [{ valueFrom: { configMapKeyRef: { key: 'k' } } }] },
      ],
      volumes: [{ configMap: {} }, { secret: {} }, { projected: { sources: [{ secret: { name: '' } }] } }],
    };
    expect(refs(spec)).toEqual([]);
  });

  it('tolerates null lists, as raw API JSON may carry them', () => {
    const spec = JSON.parse(
      '{"containers":[{"env":null,"envFrom":null}],"volumes":[{"configMap":{"name":"app","items":null}}]}',
    ) as PodSpecLike;
    expect(refs(spec)).toEqual([cm('app', 'all')]);
  });

  it('puts every config in the given namespace', () => {
    expect(
      extractReferences('other', { volumes: [{ configMap: { name: 'app' } }] })[0]?.config.namespace,
    ).toBe('other');
  });

  it('returns the same order whatever order the spec lists references in', () => {
    const volumes = [
      { secret: { secretName: 'b' } },
      { configMap: { name: 'b' } },
      { configMap: { name: 'a' } },
      { configMap: { name: 'B' } },
    ];
    const expected = [cm('B', 'all'), cm('a', 'all'), cm('b', 'all'), secret('b', 'all')];
    expect(refs({ volumes })).toEqual(expected);
    expect(refs({ volumes: [...volumes].reverse() })).toEqual(expected);
  });

  it('does not modify the spec it reads', () => {
    const spec = Object.freeze({
      volumes: Object.freeze([Object.freeze({ configMap: Object.freeze({ name: 'app' }) })]),
    });
    expect(refs(spec)).toEqual([cm('app', 'all')]);
  });
});

describe('Secrets Store CSI volumes', () => {
  it('references the SecretProviderClass named in the volume attribute, whole', () => {
    const uses = extractReferences('ns', {
      volumes: [
        {
          csi: {
            driver: 'secrets-store.csi.k8s.io',
            volumeAttributes: { secretProviderClass: 'vault-db' },
          },
        },
        { csi: { driver: 'other.csi.example.com', volumeAttributes: { size: '1Gi' } } },
        { csi: { driver: 'secrets-store.csi.k8s.io' } },
      ],
    });
    expect(uses).toEqual([
      {
        config: { kind: 'SecretProviderClass', namespace: 'ns', name: 'vault-db' },
        keys: 'all',
        optional: false,
      },
    ]);
  });
});

// Every path in Ours must exist in Theirs, so a misspelt field (`secret.name` for `secret.secretName`)
// fails type-checking instead of silently reading nothing. Assignability alone cannot catch that,
// because all of PodSpecLike's fields are optional.
type Elem<T> = T extends readonly (infer E)[] ? E : T;
type Inner<T> = NonNullable<Elem<NonNullable<T>>>;
type UnknownPaths<Ours, Theirs, Prefix extends string = ''> = Ours extends string | number | boolean
  ? never
  : {
      [K in keyof Ours & string]-?: K extends keyof Theirs
        ? UnknownPaths<Inner<Ours[K]>, Inner<Theirs[K]>, `${Prefix}${K}.`>
        : `${Prefix}${K}`;
    }[keyof Ours & string];

describe('PodSpecLike and client-node V1PodSpec (checked by tsc)', () => {
  it('uses only field names that V1PodSpec has', () => {
    expectTypeOf<UnknownPaths<PodSpecLike, V1PodSpec>>().toEqualTypeOf<never>();
    // The check itself works: a secret volume read by `name` is reported.
    type Misspelt = { volumes?: { secret?: { name?: string } }[] };
    expectTypeOf<UnknownPaths<Misspelt, V1PodSpec>>().toEqualTypeOf<'volumes.secret.name'>();
  });

  it('accepts a V1PodSpec as is', () => {
    expectTypeOf<V1PodSpec>().toExtend<PodSpecLike>();
    const spec: V1PodSpec = {
      containers: [
        {
          name: 'app',
          envFrom: [{ configMapRef: { name: 'app' } }],
          env: [{ name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'password', optional: true } } }],
        },
      ],
      volumes: [
        { name: 'tls', secret: { secretName: 'tls', items: [{ key: 'tls.crt', path: 'cert' }] } },
        {
          name: 'bundle',
          projected: { sources: [{ configMap: { name: 'ca', items: [{ key: 'ca.crt', path: 'ca' }] } }] },
        },
      ],
    };
    expect(extractReferences(NS, spec)).toEqual([
      cm('app', 'all'),
      cm('ca', ['ca.crt']),
      secret('db', ['password'], true),
      secret('tls', ['tls.crt']),
    ]);
  });
});
