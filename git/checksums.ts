// Computes, for a set of manifests, the config hash of every workload whose ConfigMaps or Secrets
// are in the same set, and writes it into the workload's pod template. Pure: text in, text out.
//
// The value is the one the service computes for the same objects: setDigest, under the workload
// namespace's key (namespaceKey, ADR 0010), over the usage digests (extractReferences + hashConfig,
// under the same key, ADR 0022) of the configs the pod template references. So a Secret's checksum is an HMAC under a
// key derived from the service's, never a bare hash of its data.
//
// With `confine` (the Argo CD plugin), a ConfigMap, Secret or workload that names a namespace other
// than the Application's is refused: otherwise a tenant could have the plugin compute values for
// another namespace's objects and compare them with that namespace's annotations.
import {
  fromServiceKey,
  hashConfig,
  type NamespaceKeys,
  setDigest,
  usageDigest,
} from '../service/core/config-hash.ts';
import { extractReferences, type PodSpecLike } from '../service/core/references.ts';
import { type ConfigKind, configId, type WorkloadKind } from '../service/core/types.ts';
import {
  type PathSet,
  parseStream,
  podTemplateAnnotationPath,
  podTemplatePath,
  setPaths,
} from './manifest-edit.ts';

export interface ManifestSource {
  /** A file path (relative), or `-` for a stream. */
  name: string;
  text: string;
}

export interface ChecksumOptions {
  /** The annotation key. */
  annotation: string;
  /** The namespace of objects that name none (Argo CD's destination namespace). Default ''. */
  namespace?: string;
  /** Refuse a ConfigMap, Secret or workload that names a namespace other than `namespace`. */
  confine?: boolean;
}

/** A manifest names a namespace other than the one the render is confined to. */
export class NamespaceConfinementError extends Error {
  override name = 'NamespaceConfinementError';
}

export interface WorkloadChecksum {
  source: string;
  kind: WorkloadKind;
  namespace: string;
  name: string;
  hash: string;
  /** The value the manifest had, if any. */
  previous?: string;
  /** Configs in the set that the hash covers, as configIds. */
  configs: string[];
}

export interface ChecksumResult {
  /** Every source, with its new text (the same string when unchanged). */
  sources: Array<ManifestSource & { changed: boolean }>;
  workloads: WorkloadChecksum[];
}

const WORKLOAD_KINDS: ReadonlySet<string> = new Set<WorkloadKind>([
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'CronJob',
  'Rollout',
]);

interface Manifest {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: { name?: unknown; namespace?: unknown } | null;
  data?: unknown;
  binaryData?: unknown;
  stringData?: unknown;
  spec?: unknown;
}

/**
 * Throws a ManifestEditError (naming the source) when a source is not valid YAML. `key` is the service
 * key (every namespace's key is derived from it) or a function giving each namespace's key (a
 * tenant's CI holds only its namespace's, and throws for any other).
 */
export function injectChecksums(
  sources: readonly ManifestSource[],
  key: Buffer | NamespaceKeys,
  opts: ChecksumOptions,
): ChecksumResult {
  const keyOf = Buffer.isBuffer(key) ? fromServiceKey(key) : key;
  const parsed = sources.map((s) => {
    try {
      return parseStream(s.text).map((d) => d.toJS() as Manifest | null);
    } catch (err) {
      (err as Error).message = `${s.name}: ${(err as Error).message}`;
      throw err;
    }
  });
  const defaultNs = opts.namespace ?? '';
  const nsOf = (m: Manifest) => {
    const ns = m.metadata?.namespace;
    return typeof ns === 'string' && ns !== '' ? ns : defaultNs;
  };

  if (opts.confine) {
    if (!opts.namespace) throw new NamespaceConfinementError('confining a render needs its namespace');
    parsed.forEach((docs, si) => {
      for (const m of docs) {
        if (!m || typeof m.kind !== 'string') continue;
        if (m.kind !== 'ConfigMap' && m.kind !== 'Secret' && !WORKLOAD_KINDS.has(m.kind)) continue;
        const ns = nsOf(m);
        if (ns !== opts.namespace) {
          throw new NamespaceConfinementError(
            `${sources[si]?.name}: ${m.kind} ${String(m.metadata?.name)} names namespace ${ns}; this render is confined to ${opts.namespace} (the Application's destination), so its checksums cannot be computed for another namespace`,
          );
        }
      }
    });
  }

  const digests = new Map<string, ReturnType<typeof hashConfig>>();
  for (const docs of parsed) {
    for (const m of docs) {
      if (!m || (m.kind !== 'ConfigMap' && m.kind !== 'Secret') || m.apiVersion !== 'v1') continue;
      const name = m.metadata?.name;
      if (typeof name !== 'string' || name === '') continue;
      const kind = m.kind as ConfigKind;
      digests.set(configId({ kind, namespace: nsOf(m), name }), hashConfig(content(m), keyOf(nsOf(m))));
    }
  }

  const workloads: WorkloadChecksum[] = [];
  const out = sources.map((source, si) => {
    const sets: PathSet[] = [];
    (parsed[si] ?? []).forEach((m, doc) => {
      if (!m || typeof m.kind !== 'string' || !WORKLOAD_KINDS.has(m.kind)) return;
      const name = m.metadata?.name;
      if (typeof name !== 'string' || name === '') return;
      const kind = m.kind as WorkloadKind;
      const template = at(m, podTemplatePath(kind)) as
        | { spec?: PodSpecLike; metadata?: { annotations?: Record<string, unknown> | null } | null }
        | undefined;
      if (!template?.spec || typeof template.spec !== 'object') return;
      const namespace = nsOf(m);
      const seen: Record<string, string> = {};
      for (const use of extractReferences(namespace, template.spec)) {
        const id = configId(use.config);
        const digest = digests.get(id);
        if (digest) seen[id] = usageDigest(use, digest);
      }
      const configs = Object.keys(seen).sort();
      if (configs.length === 0) return;
      const hash = setDigest(seen, keyOf(namespace));
      const prev = template.metadata?.annotations?.[opts.annotation];
      workloads.push({
        source: source.name,
        kind,
        namespace,
        name,
        hash,
        ...(prev === undefined || prev === null ? {} : { previous: String(prev) }),
        configs,
      });
      if (prev !== hash)
        sets.push({ doc, path: podTemplateAnnotationPath(kind, opts.annotation), value: hash });
    });
    if (sets.length === 0) return { ...source, changed: false };
    try {
      const r = setPaths(source.text, sets);
      return { name: source.name, text: r.text, changed: r.changed };
    } catch (err) {
      (err as Error).message = `${source.name}: ${(err as Error).message}`;
      throw err;
    }
  });
  return { sources: out, workloads };
}

/**
 * What the API server would store. A Secret's stringData is merged into data (it wins, as on the
 * server) and base64 is normalised, so a manifest hashes like the live object it becomes.
 */
function content(m: Manifest): { data: Record<string, string>; binaryData: Record<string, string> } {
  const data = strings(m.data);
  const binaryData = strings(m.binaryData);
  if (m.kind !== 'Secret') return { data, binaryData };
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries(data)) merged[k] = Buffer.from(v, 'base64').toString('base64');
  for (const [k, v] of Object.entries(strings(m.stringData)))
    merged[k] = Buffer.from(v, 'utf8').toString('base64');
  return { data: merged, binaryData: {} };
}

function strings(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof v !== 'object' || v === null) return out;
  for (const [k, val] of Object.entries(v)) {
    // YAML reads `port: 8080` as a number; the API server would reject it, kubectl users quote it.
    if (val !== null && val !== undefined) out[k] = typeof val === 'string' ? val : String(val);
  }
  return out;
}

function at(obj: unknown, path: readonly string[]): unknown {
  let cur = obj;
  for (const seg of path) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[seg];
  }
  return cur;
}

/** Whether a parsed document is a Kubernetes object (not a kustomization, chart or values file). */
export function isKubernetesObject(doc: unknown): boolean {
  if (typeof doc !== 'object' || doc === null) return false;
  const { apiVersion, kind } = doc as Manifest;
  return (
    typeof apiVersion === 'string' &&
    typeof kind === 'string' &&
    !apiVersion.startsWith('kustomize.config.k8s.io/') &&
    kind !== 'Kustomization'
  );
}
