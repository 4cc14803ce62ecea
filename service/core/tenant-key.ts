// A namespace's key (config-hash.ts namespaceKey) in a form a platform team can hand to the
// namespace's team: one line naming the namespace, for the team's CI to run `gitops-reloader checksum`
// and `checksum --check` with, without the service key. The line is the key: treat it as a Secret.
// Pure: no I/O.
import { type NamespaceKeys, namespaceKey } from './config-hash.ts';

const PREFIX = 'gitops-reloader-namespace-key:v1';
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const KEY_BYTES = 32;

export interface TenantKey {
  namespace: string;
  key: Buffer;
}

/** A namespace name as Kubernetes allows it (a DNS label), or an error naming the problem. */
export function checkNamespaceName(namespace: string): string | undefined {
  return NAMESPACE.test(namespace) && namespace.length <= 63
    ? undefined
    : `${JSON.stringify(namespace)} is not a namespace name (a DNS label: a-z, 0-9 and -, at most 63)`;
}

/** The line for `namespace`, derived from the service key. */
export function formatTenantKey(serviceKey: Buffer, namespace: string): string {
  const bad = checkNamespaceName(namespace);
  if (bad) throw new Error(bad);
  return `${PREFIX}:${namespace}:${namespaceKey(serviceKey, namespace).toString('base64')}`;
}

/** Reads a line made by formatTenantKey. Errors never repeat the line. */
export function parseTenantKey(text: string): TenantKey {
  const parts = text.trim().split(':');
  const [tag, version, namespace = '', b64 = ''] = parts;
  if (parts.length !== 4 || `${tag}:${version}` !== PREFIX) {
    throw new Error(
      `it is not a namespace key (one line starting ${PREFIX}:, made by gitops-reloader tenant-key)`,
    );
  }
  const bad = checkNamespaceName(namespace);
  if (bad) throw new Error(`its namespace ${bad}`);
  const key = Buffer.from(b64, 'base64');
  if (key.length !== KEY_BYTES || key.toString('base64') !== b64) {
    throw new Error(`its key is not ${KEY_BYTES} bytes of base64`);
  }
  return { namespace, key };
}

/** A key that refuses to compute for another namespace than its own. */
export class ForeignNamespaceError extends Error {
  override name = 'ForeignNamespaceError';
}

/** The keys a tenant holds: its namespace's, and no other. */
export function tenantKeys(t: TenantKey): NamespaceKeys {
  return (namespace) => {
    if (namespace !== t.namespace) {
      throw new ForeignNamespaceError(
        `this namespace key is for namespace ${t.namespace}; it cannot compute values for namespace ${namespace || '(none)'}`,
      );
    }
    return t.key;
  };
}
