// Turns raw API objects (plain JSON from LIST/WATCH) into the slim records the caches keep.
// ConfigMap and Secret data is hashed here and goes no further.
import { createHash } from 'node:crypto';
import { type AnnotationAliases, withDefaultKeys } from '../core/annotation-keys.ts';
import { canonicalJson } from '../core/canonical-json.ts';
import { newestWrite } from '../core/catch-up.ts';
import { type ConfigDigest, hashConfig, namespaceKey } from '../core/config-hash.ts';
import { type ConfigRecord, relevant, type WorkloadRecord, workloadLabels } from '../core/records.ts';
import { extractReferences, type PodSpecLike } from '../core/references.ts';
import type { ConfigKind, WorkloadKind } from '../core/types.ts';

interface RawMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  managedFields?: Array<{ time?: string; manager?: string }> | null;
  annotations?: Record<string, string> | null;
  labels?: Record<string, string> | null;
  ownerReferences?: Array<{ kind?: string; controller?: boolean }> | null;
}

export interface RawObject {
  metadata?: RawMeta;
  [k: string]: unknown;
}

export function configRecord(
  kind: ConfigKind,
  raw: RawObject,
  key: Buffer,
  aliases?: AnnotationAliases,
): ConfigRecord | undefined {
  const m = raw.metadata;
  if (!m?.name || !m.namespace) return undefined;
  const digest: ConfigDigest = hashConfig(
    {
      data: (raw.data as Record<string, string> | null | undefined) ?? undefined,
      binaryData: (raw.binaryData as Record<string, string> | null | undefined) ?? undefined,
    },
    // Keyed for its namespace, so that the namespace's key alone reproduces it (ADR 0022).
    namespaceKey(key, m.namespace),
  );
  return {
    ref: { kind, namespace: m.namespace, name: m.name },
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    annotations: relevant(withDefaultKeys(m.annotations, aliases)),
    labels: relevant(m.labels),
    digest,
    ...optional('writtenAtMs', newestWrite(m)),
    ...optional('onlyCreated', onlyCreated(m, newestWrite(m))),
    ...optional('writer', newestWriter(m)),
  };
}

/** True when the newest write is in the creation's second: the object was never written after it. */
function onlyCreated(m: NonNullable<RawObject['metadata']>, written: number | undefined): true | undefined {
  const created = createdMs(m.creationTimestamp as string | undefined);
  if (written === undefined || created === undefined) return undefined;
  return Math.floor(written / 1000) === Math.floor(created / 1000) ? true : undefined;
}

/** A field manager name is the writer's own choice: kept short, one line. */
const MAX_WRITER_CHARS = 128;

/** The field manager of the newest managedFields entry. */
function newestWriter(m: NonNullable<RawObject['metadata']>): string | undefined {
  let best: { at: number; manager: string } | undefined;
  for (const f of m.managedFields ?? []) {
    const at = f.time ? new Date(f.time).getTime() : Number.NaN;
    if (!f.manager || !Number.isFinite(at) || (best && best.at > at)) continue;
    best = { at, manager: f.manager };
  }
  if (!best) return undefined;
  const line = [...best.manager].map((ch) =>
    ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f ? '?' : ch,
  );
  return line.join('').slice(0, MAX_WRITER_CHARS);
}

interface RawTemplate {
  metadata?: { annotations?: Record<string, string> | null };
  spec?: PodSpecLike;
}

function podTemplate(kind: WorkloadKind, spec: Record<string, unknown> | undefined): RawTemplate | undefined {
  if (!spec) return undefined;
  if (kind === 'CronJob') {
    const job = spec.jobTemplate as { spec?: { template?: RawTemplate } } | undefined;
    return job?.spec?.template;
  }
  return spec.template as RawTemplate | undefined;
}

// By meaning, not spelling: writers of one template differ in key order and empty fields.
function hashTemplate(template: RawTemplate | undefined): string {
  return createHash('sha256')
    .update(canonicalJson(template ?? null))
    .digest('hex')
    .slice(0, 16);
}

/** The hash of a workload object's pod template, as its record's templateHash holds it. */
export function templateHashOf(kind: WorkloadKind, raw: RawObject): string {
  return hashTemplate(podTemplate(kind, raw.spec as Record<string, unknown> | undefined));
}

/**
 * The slim record of a workload, or undefined for objects not reloaded on their own: a Job that has a
 * controller (a CronJob's Job: the CronJob is reloaded instead; another controller's Job is its own
 * business, and recreating it would fight that controller).
 */
export function workloadRecord(
  kind: WorkloadKind,
  raw: RawObject,
  aliases?: AnnotationAliases,
): WorkloadRecord | undefined {
  const m = raw.metadata;
  if (!m?.name || !m.namespace || !m.uid) return undefined;
  if (kind === 'Job' && m.ownerReferences?.some((o) => o.controller === true)) return undefined;
  const spec = raw.spec as Record<string, unknown> | undefined;
  const status = (raw.status ?? {}) as Record<string, unknown>;
  const template = podTemplate(kind, spec);
  const strategy = (kind === 'DaemonSet' || kind === 'StatefulSet' ? spec?.updateStrategy : spec?.strategy) as
    | { type?: string; rollingUpdate?: { maxUnavailable?: number | string; maxSurge?: number | string } }
    | undefined;
  const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return {
    ref: { kind, namespace: m.namespace, name: m.name, uid: m.uid },
    resourceVersion: m.resourceVersion ?? '',
    generation: m.generation ?? 0,
    annotations: relevant(withDefaultKeys(m.annotations, aliases)),
    templateAnnotations: relevant(withDefaultKeys(template?.metadata?.annotations, aliases)),
    labels: workloadLabels(m.labels),
    uses: template?.spec ? extractReferences(m.namespace, template.spec) : [],
    templateHash: hashTemplate(template),
    selector: spec?.selector as WorkloadRecord['selector'],
    replicas:
      kind === 'DaemonSet' || kind === 'CronJob' || kind === 'Job' ? undefined : (num(spec?.replicas) ?? 1),
    strategy: strategy
      ? {
          type: strategy.type,
          maxUnavailable: strategy.rollingUpdate?.maxUnavailable,
          maxSurge: strategy.rollingUpdate?.maxSurge,
        }
      : undefined,
    status: {
      observedGeneration: num(status.observedGeneration),
      replicas: num(status.replicas),
      updatedReplicas: num(status.updatedReplicas),
      readyReplicas: num(status.readyReplicas),
      availableReplicas: num(status.availableReplicas),
      currentRevision: str(status.currentRevision),
      updateRevision: str(status.updateRevision),
    },
    ...optional('createdMs', createdMs(m.creationTimestamp)),
  };
}

function createdMs(t: string | undefined): number | undefined {
  const ms = t === undefined ? Number.NaN : Date.parse(t);
  return Number.isFinite(ms) ? ms : undefined;
}

function optional<K extends string, V>(key: K, v: V | undefined): { [k in K]?: V } {
  return (v === undefined ? {} : { [key]: v }) as { [k in K]?: V };
}
