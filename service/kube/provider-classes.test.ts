import { describe, expect, it } from 'vitest';
import { readProviderClassStatus } from '../core/provider-class-versions.ts';
import { ProviderClasses, providerClassMeta } from './provider-classes.ts';

const KEY = Buffer.alloc(32, 3);

function status(name: string, rv: string, objects: Array<{ id: string; version: string }>, labels = {}) {
  const s = readProviderClassStatus({
    metadata: { name, namespace: 'team', resourceVersion: rv, labels } as { name: string },
    status: { secretProviderClassName: 'vault-db', mounted: true, podName: name, objects },
  });
  if ('problem' in s) throw new Error(s.problem);
  return s;
}

describe('ProviderClasses', () => {
  it('builds a SecretProviderClass record whose digest moves only with a version', () => {
    const c = new ProviderClasses(KEY);
    expect(c.record('team/vault-db')).toBeUndefined();
    c.putStatus(status('a', '10', [{ id: 'db', version: 'v1' }]));
    const first = c.record('team/vault-db');
    expect(first?.ref).toEqual({ kind: 'SecretProviderClass', namespace: 'team', name: 'vault-db' });
    // A second pod mounting the same versions, then a node-label-only rewrite: no change.
    c.putStatus(status('b', '11', [{ id: 'db', version: 'v1' }]));
    c.putStatus(
      status('a', '12', [{ id: 'db', version: 'v1' }], {
        'internal.secrets-store.csi.k8s.io/node-name': 'n2',
      }),
    );
    expect(c.record('team/vault-db')?.digest).toEqual(first?.digest);
    c.putStatus(status('a', '13', [{ id: 'db', version: 'v2' }]));
    const second = c.record('team/vault-db');
    expect(second?.digest.all).not.toBe(first?.digest.all);
    expect(second?.resourceVersion).toBe('13');
    // The digest is an HMAC of the version, never the version itself.
    expect(JSON.stringify(second)).not.toContain('v2');
  });

  it("takes ignore and match from the SecretProviderClass object, and never Argo CD's tracking keys", () => {
    const c = new ProviderClasses(KEY);
    c.putStatus(status('a', '10', [{ id: 'db', version: 'v1' }]));
    const meta = providerClassMeta({
      metadata: {
        name: 'vault-db',
        namespace: 'team',
        uid: 'u1',
        annotations: {
          'reloader.stakater.com/ignore': 'true',
          'argocd.argoproj.io/tracking-id':
            'shop:secrets-store.csi.x-k8s.io/SecretProviderClass:team/vault-db',
          'example.com/other': 'x',
        },
      },
    });
    if (!meta) throw new Error('no meta');
    expect(c.putClass(meta)).toEqual(['team/vault-db']);
    expect(c.record('team/vault-db')).toMatchObject({
      uid: 'u1',
      annotations: { 'reloader.stakater.com/ignore': 'true' },
    });
    expect(Object.keys(c.record('team/vault-db')?.annotations ?? {})).toEqual([
      'reloader.stakater.com/ignore',
    ]);
    c.deleteClass(meta);
    expect(c.record('team/vault-db')?.annotations).toEqual({});
  });
});
