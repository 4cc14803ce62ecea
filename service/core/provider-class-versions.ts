// The content of a Secrets Store CSI SecretProviderClass, as gitops-reloader sees it: the versions of
// the external objects (Vault paths, Key Vault secrets, …) that the driver last mounted for it.
//
// The driver writes one SecretProviderClassPodStatus per pod and class, with the versions it mounted,
// when the pod mounts the volume and again whenever its rotation reconciler mounts a new version. Every
// write carries versions read from the provider at that moment, so the status written last holds the
// newest versions of the class in that namespace. That status's versions are the class's content here.
// A write that changes no version (a node label, the owner reference, a remount of the same versions)
// leaves the content, and every digest derived from it, as it was. Pure: no I/O.
import { compareResourceVersions } from './records.ts';

/** One SecretProviderClassPodStatus, reduced to what a reload decision needs. */
export interface ProviderClassStatus {
  /** The status object's own namespace: the class it reports on is always in this namespace. */
  namespace: string;
  /** The status object's name (the driver writes <pod>-<namespace>-<class>). */
  name: string;
  /** status.secretProviderClassName. */
  providerClass: string;
  resourceVersion: string;
  /** status.objects: object id → version. */
  objects: Record<string, string>;
}

/** A DNS-1123 subdomain, the form of every Kubernetes object name (SecretProviderClass included). */
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/**
 * Reads a status object (plain JSON from LIST/WATCH). Returns a reason instead when it cannot name a
 * class in its own namespace: such an object can reload nothing.
 */
export function readProviderClassStatus(raw: {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  status?: unknown;
}): ProviderClassStatus | { problem: string } {
  const m = raw.metadata;
  if (!m?.name || !m.namespace) return { problem: 'no metadata.name or metadata.namespace' };
  const status = (raw.status ?? {}) as { secretProviderClassName?: unknown; objects?: unknown };
  const providerClass = status.secretProviderClassName;
  if (typeof providerClass !== 'string' || providerClass === '') {
    return { problem: 'no status.secretProviderClassName' };
  }
  if (providerClass.length > 253 || !OBJECT_NAME.test(providerClass)) {
    return {
      problem: `status.secretProviderClassName ${JSON.stringify(providerClass.slice(0, 80))} is not an object name`,
    };
  }
  const objects: Record<string, string> = {};
  for (const o of Array.isArray(status.objects) ? status.objects : []) {
    const { id, version } = (o ?? {}) as { id?: unknown; version?: unknown };
    if (typeof id !== 'string' || id === '') continue;
    objects[id] = typeof version === 'string' ? version : '';
  }
  return {
    namespace: m.namespace,
    name: m.name,
    providerClass,
    resourceVersion: m.resourceVersion ?? '',
    objects,
  };
}

interface Entry {
  status: ProviderClassStatus;
  /** Arrival order, for resourceVersions that are not integers (never with an etcd-backed server). */
  seen: number;
}

/** "ns/class", the key of one class. */
const classKey = (namespace: string, providerClass: string) => `${namespace}/${providerClass}`;

/** Every status the watch holds, grouped by the class it reports on. */
export class ProviderClassVersions {
  readonly #byClass = new Map<string, Map<string, Entry>>();
  /** status "ns/name" → its class key, to find it again on delete or when it moves class. */
  readonly #classOf = new Map<string, string>();
  #seen = 0;

  /** Stores a status. Returns the class keys whose content may have changed. */
  put(status: ProviderClassStatus): string[] {
    const id = `${status.namespace}/${status.name}`;
    const key = classKey(status.namespace, status.providerClass);
    const touched = this.#remove(id).filter((k) => k !== key);
    let entries = this.#byClass.get(key);
    if (!entries) {
      entries = new Map();
      this.#byClass.set(key, entries);
    }
    entries.set(id, { status, seen: ++this.#seen });
    this.#classOf.set(id, key);
    return [...touched, key];
  }

  /** Forgets a status. Returns the class key it reported on, if it was known. */
  delete(namespace: string, name: string): string[] {
    return this.#remove(`${namespace}/${name}`);
  }

  /** The most recently written status of a class: its objects are the class's current versions. */
  current(namespace: string, providerClass: string): ProviderClassStatus | undefined {
    const entries = this.#byClass.get(classKey(namespace, providerClass));
    let best: Entry | undefined;
    for (const e of entries?.values() ?? []) if (!best || newer(e, best)) best = e;
    return best?.status;
  }

  /** How many statuses are held (for the watched-items metric). */
  get size(): number {
    return this.#classOf.size;
  }

  #remove(id: string): string[] {
    const key = this.#classOf.get(id);
    if (key === undefined) return [];
    this.#classOf.delete(id);
    const entries = this.#byClass.get(key);
    entries?.delete(id);
    if (entries?.size === 0) this.#byClass.delete(key);
    return [key];
  }
}

function newer(a: Entry, b: Entry): boolean {
  const c = compareResourceVersions(a.status.resourceVersion, b.status.resourceVersion);
  return c === undefined ? a.seen > b.seen : c > 0;
}

/** Splits a class key back into namespace and class name. */
export function splitClassKey(key: string): { namespace: string; providerClass: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), providerClass: key.slice(i + 1) };
}
