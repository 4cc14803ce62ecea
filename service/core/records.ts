// The slim records the caches keep. A ConfigMap or Secret is reduced to its digests the moment it
// arrives; a workload to what reload decisions need. Nothing else of the API objects is retained.
import type { ConfigDigest } from './config-hash.ts';
import type { ConfigRef, ConfigUse, WorkloadRef } from './types.ts';

export interface ConfigRecord {
  ref: ConfigRef;
  uid: string;
  resourceVersion: string;
  /** Only the annotations we read (ours, Reloader's, Argo CD tracking). */
  annotations: Record<string, string>;
  labels: Record<string, string>;
  digest: ConfigDigest;
  /**
   * The object's newest write (ms): its latest managedFields time, or its creation. An upper bound of
   * when its data last changed, read only by the start-up catch-up (core/catch-up.ts). Undefined when
   * the object carries no managedFields.
   */
  writtenAtMs?: number;
  /** True when that newest write is in its creation's second (never written since): the catch-up reads it. */
  onlyCreated?: true;
  /** The field manager of that newest write (what a flapping config's Warning names). */
  writer?: string;
}

export interface LabelSelectorLike {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
}

export interface RolloutStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  currentRevision?: string;
  updateRevision?: string;
}

export interface WorkloadRecord {
  ref: WorkloadRef & { uid: string };
  resourceVersion: string;
  generation: number;
  /** Relevant annotations on the workload's metadata and on its pod template. */
  annotations: Record<string, string>;
  templateAnnotations: Record<string, string>;
  labels: Record<string, string>;
  uses: ConfigUse[];
  /** Fingerprint of the pod template: tells a template change from any other spec change. */
  templateHash: string;
  selector?: LabelSelectorLike;
  replicas?: number;
  strategy?: { type?: string; maxUnavailable?: number | string; maxSurge?: number | string };
  status: RolloutStatus;
  /** Its creationTimestamp (ms): the start-up catch-up tells a workload created while down by it. */
  createdMs?: number;
}

const RELEVANT =
  /(^|\.)reloader\.stakater\.com\/|(^|\.)gitops-reloader\.io\/|^argocd\.argoproj\.io\/|^app\.kubernetes\.io\/instance$/;

/** One shared, frozen empty map: most cached objects carry no relevant annotation or label. */
const NONE: Record<string, string> = Object.freeze({}) as Record<string, string>;

/**
 * A workload's labels also keep the Kustomization kustomize-controller names on what it applies: git
 * mode reads them as a claim, which the Kustomization's inventory must confirm (service/flux/git-source.ts).
 */
const WORKLOAD_LABELS = new RegExp(
  `${RELEVANT.source}|^kustomize\\.toolkit\\.fluxcd\\.io\\/(name|namespace)$`,
);

/**
 * Keeps only the annotation (or label) keys a reload decision can read. Read-only: an object with none
 * gets a shared frozen empty map (two per cached config otherwise, about 1 MiB at 20,000 configs).
 */
export function relevant(
  map: Record<string, string> | undefined | null,
  keys: RegExp = RELEVANT,
): Readonly<Record<string, string>> {
  if (!map) return NONE;
  let out: Record<string, string> | undefined;
  for (const [k, v] of Object.entries(map)) {
    if (keys.test(k)) {
      out ??= {};
      out[k] = v;
    }
  }
  return out ?? NONE;
}

/** The labels a workload record keeps: relevant ones, and the Flux Kustomization's name and namespace. */
export const workloadLabels = (map: Record<string, string> | undefined | null) =>
  relevant(map, WORKLOAD_LABELS);

/** A Kubernetes label selector as the `labelSelector` query string. */
export function selectorString(sel: LabelSelectorLike | undefined): string {
  if (!sel) return '';
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel.matchExpressions ?? []) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') parts.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.join(',');
}

/**
 * Orders two resourceVersions. They are opaque strings by contract, but every API server backed
 * by etcd uses its global revision, so they compare as integers across resources. Undefined when
 * either is not an integer (then callers must not rely on the order).
 */
export function compareResourceVersions(a: string, b: string): number | undefined {
  if (!/^\d+$/.test(a) || !/^\d+$/.test(b)) return undefined;
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}
