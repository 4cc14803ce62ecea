// Turns the two Secrets Store CSI resources into config records of kind SecretProviderClass, so the
// rest of the service treats a class like a Secret: SecretProviderClassPodStatus objects give its
// content (the mounted object versions, see core/provider-class-versions.ts), the SecretProviderClass
// object gives its annotations (reloader.stakater.com/ignore and /match, read as on a Secret).
import { hashConfig, namespaceKey } from '../core/config-hash.ts';
import {
  type ProviderClassStatus,
  ProviderClassVersions,
  splitClassKey,
} from '../core/provider-class-versions.ts';
import { type ConfigRecord, relevant } from '../core/records.ts';
import type { ConfigRef } from '../core/types.ts';
import type { Resource } from './resources.ts';
import type { RawObject } from './to-record.ts';

export const SECRETS_STORE_GROUP = 'secrets-store.csi.x-k8s.io';

export const PROVIDER_CLASS_RESOURCE: Resource<'SecretProviderClass'> = {
  kind: 'SecretProviderClass',
  group: SECRETS_STORE_GROUP,
  version: 'v1',
  plural: 'secretproviderclasses',
};

export const PROVIDER_CLASS_STATUS_RESOURCE: Resource<'SecretProviderClassPodStatus'> = {
  kind: 'SecretProviderClassPodStatus',
  group: SECRETS_STORE_GROUP,
  version: 'v1',
  plural: 'secretproviderclasspodstatuses',
};

/** What the cache keeps of a SecretProviderClass object: who it is and the annotations we read. */
export interface ProviderClassMeta {
  namespace: string;
  name: string;
  uid: string;
  annotations: Record<string, string>;
}

export function providerClassMeta(raw: RawObject): ProviderClassMeta | undefined {
  const m = raw.metadata;
  if (!m?.name || !m.namespace) return undefined;
  // Reloader's and our keys only: Argo CD's tracking keys are left out, so a class change is never held
  // for a sync (a rotation is not one, and the tracking-id of a custom resource names another group).
  const annotations = Object.fromEntries(
    Object.entries(relevant(m.annotations)).filter(([k]) => !k.startsWith('argocd.argoproj.io/')),
  );
  return { namespace: m.namespace, name: m.name, uid: m.uid ?? '', annotations };
}

/** The record for one class, rebuilt whenever one of its statuses or its object changes. */
export class ProviderClasses {
  readonly #versions = new ProviderClassVersions();
  readonly #meta = new Map<string, ProviderClassMeta>();
  readonly #key: Buffer;

  constructor(hashKey: Buffer) {
    this.#key = hashKey;
  }

  /** A status was added or updated: the keys of the classes to rebuild. */
  putStatus(s: ProviderClassStatus): string[] {
    return this.#versions.put(s);
  }

  deleteStatus(namespace: string, name: string): string[] {
    return this.#versions.delete(namespace, name);
  }

  putClass(m: ProviderClassMeta): string[] {
    const key = `${m.namespace}/${m.name}`;
    this.#meta.set(key, m);
    return [key];
  }

  deleteClass(m: ProviderClassMeta): string[] {
    const key = `${m.namespace}/${m.name}`;
    this.#meta.delete(key);
    return [key];
  }

  get statuses(): number {
    return this.#versions.size;
  }

  ref(key: string): ConfigRef {
    const { namespace, providerClass } = splitClassKey(key);
    return { kind: 'SecretProviderClass', namespace, name: providerClass };
  }

  /**
   * The class as a config record, or undefined while no pod reported a mount of it. The data hashed
   * is object id → version: a version is not secret, but an HMAC keeps every digest of one kind.
   */
  record(key: string): ConfigRecord | undefined {
    const ref = this.ref(key);
    const latest = this.#versions.current(ref.namespace, ref.name);
    if (latest === undefined) return undefined;
    const meta = this.#meta.get(key);
    return {
      ref,
      uid: meta?.uid ?? '',
      // The status's: it orders the change against template rollouts, like a ConfigMap's does.
      resourceVersion: latest.resourceVersion,
      annotations: meta?.annotations ?? {},
      labels: {},
      digest: hashConfig({ data: latest.objects }, namespaceKey(this.#key, ref.namespace)),
    };
  }
}
