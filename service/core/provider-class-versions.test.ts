import { describe, expect, it } from 'vitest';
import {
  type ProviderClassStatus,
  ProviderClassVersions,
  readProviderClassStatus,
} from './provider-class-versions.ts';

// As the driver writes it (secrets-store-csi-driver v1.5.4, pkg/secrets-store/utils.go).
function raw(name: string, providerClass: unknown, rv: string, objects: unknown) {
  return {
    metadata: { name, namespace: 'team', resourceVersion: rv },
    status: { podName: 'web-1', secretProviderClassName: providerClass, mounted: true, objects },
  };
}

function status(
  name: string,
  rv: string,
  objects: Record<string, string>,
  cls = 'vault-db',
): ProviderClassStatus {
  return { namespace: 'team', name, providerClass: cls, resourceVersion: rv, objects };
}

describe('readProviderClassStatus', () => {
  it('reads the class, the objects and the status object identity', () => {
    expect(
      readProviderClassStatus(
        raw('web-1-team-vault-db', 'vault-db', '42', [
          { id: 'secret/db:password', version: 'v2' },
          { id: 'secret/db:user', version: 'v1' },
        ]),
      ),
    ).toEqual({
      namespace: 'team',
      name: 'web-1-team-vault-db',
      providerClass: 'vault-db',
      resourceVersion: '42',
      objects: { 'secret/db:password': 'v2', 'secret/db:user': 'v1' },
    });
  });

  it('reads a status without objects as a class with no objects', () => {
    const s = readProviderClassStatus(raw('s', 'vault-db', '1', undefined));
    expect(s).toMatchObject({ providerClass: 'vault-db', objects: {} });
  });

  it.each([
    ['no class', undefined, /no status.secretProviderClassName/],
    ['an empty class', '', /no status.secretProviderClassName/],
    ['a path that reaches another namespace', '../other/vault-db', /is not an object name/],
    ['a namespaced name', 'other/vault-db', /is not an object name/],
    ['upper case', 'Vault', /is not an object name/],
    ['a number', 7, /no status.secretProviderClassName/],
  ])('refuses %s', (_why, cls, message) => {
    const s = readProviderClassStatus(raw('s', cls, '1', []));
    expect(s).toHaveProperty('problem');
    expect((s as { problem: string }).problem).toMatch(message);
  });

  it('refuses an object without name or namespace', () => {
    expect(readProviderClassStatus({ status: {} })).toEqual({
      problem: 'no metadata.name or metadata.namespace',
    });
  });
});

describe('ProviderClassVersions', () => {
  it('takes the versions of the most recently written status of a class', () => {
    const v = new ProviderClassVersions();
    expect(v.put(status('a', '10', { db: 'v1' }))).toEqual(['team/vault-db']);
    v.put(status('b', '12', { db: 'v1' }));
    // Pod a's rotation mounted v2: written last, it is the class's content.
    v.put(status('a', '15', { db: 'v2' }));
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v2' });
    v.put(status('b', '16', { db: 'v2' }));
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v2' });
  });

  it('orders by resourceVersion as integers, not as strings', () => {
    const v = new ProviderClassVersions();
    v.put(status('a', '100', { db: 'v2' }));
    v.put(status('b', '99', { db: 'v1' }));
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v2' });
  });

  it('falls back to arrival order for resourceVersions that are not integers', () => {
    const v = new ProviderClassVersions();
    v.put(status('a', 'x', { db: 'v1' }));
    v.put(status('b', 'y', { db: 'v2' }));
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v2' });
  });

  it('forgets deleted statuses and the class with its last one', () => {
    const v = new ProviderClassVersions();
    v.put(status('a', '10', { db: 'v1' }));
    v.put(status('b', '11', { db: 'v2' }));
    expect(v.delete('team', 'b')).toEqual(['team/vault-db']);
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v1' });
    v.delete('team', 'a');
    expect(v.current('team', 'vault-db')).toBeUndefined();
    expect(v.size).toBe(0);
    expect(v.delete('team', 'a')).toEqual([]);
  });

  it('moves a status that names another class, and reports both classes', () => {
    const v = new ProviderClassVersions();
    v.put(status('a', '10', { db: 'v1' }));
    expect(v.put(status('a', '11', { kv: 'v1' }, 'azure-kv'))).toEqual(['team/vault-db', 'team/azure-kv']);
    expect(v.current('team', 'vault-db')).toBeUndefined();
    expect(v.current('team', 'azure-kv')?.objects).toEqual({ kv: 'v1' });
  });

  it('keeps classes of the same name in different namespaces apart', () => {
    const v = new ProviderClassVersions();
    v.put(status('a', '10', { db: 'v1' }));
    v.put({ ...status('a', '11', { db: 'v9' }), namespace: 'other' });
    expect(v.current('team', 'vault-db')?.objects).toEqual({ db: 'v1' });
    expect(v.current('other', 'vault-db')?.objects).toEqual({ db: 'v9' });
  });
});
