// What the Flux gate knows of one Flux applier (a Kustomization or a HelmRelease), read once from
// the API object into one canonical, frozen form. Facts from the released sources (kustomize-
// controller v1.9.0 internal/controller/kustomization_controller.go, helm-controller v1.6.0,
// fluxcd/pkg/runtime v0.110.0 conditions, fluxcd/cli-utils v1.2.1 ObjMetadata.String):
//  - a reconciliation persists Ready=Unknown and Reconciling=True (reason Progressing) and
//    status.lastAttemptedRevision before it applies anything;
//  - it ends with Ready=True (Reconciling removed, observedGeneration set), or Ready=False with
//    Reconciling's reason ProgressingWithRetry (failed, retried later) or Stalled=True (given up);
//  - a Kustomization whose dependsOn is not ready has Ready=False, reason DependencyNotReady: it waits;
//  - status.inventory.entries[].id is `<namespace>_<name>_<group>_<kind>` of every object it applied.
import { parseDuration } from '../core/duration.ts';
import { type ConfigKind, configId } from '../core/types.ts';

export type ApplierKind = 'Kustomization' | 'HelmRelease';

/** `Kustomization/namespace/name`: how the gate, logs and the status name an applier. */
export type ApplierKey = string;

export interface ApplierRef {
  kind: ApplierKind;
  namespace: string;
  name: string;
}

/** Where an applier is in its reconciliation. */
export type ApplierPhase =
  /** Reconciling now (Reconciling=True, reason Progressing), or not yet read since its spec changed. */
  | 'progressing'
  /** Waiting for its dependsOn to be ready. */
  | 'waiting'
  /** The last reconciliation failed (Ready=False, not waiting); Flux retries it, or it stalled. */
  | 'failed'
  /** Ready=True: the last reconciliation applied lastAppliedRevision. */
  | 'ready';

export interface Applier {
  readonly ref: ApplierRef;
  readonly key: ApplierKey;
  readonly phase: ApplierPhase;
  readonly suspended: boolean;
  /** metadata.resourceVersion: tells a watch event older than a fresh read apart. */
  readonly resourceVersion?: string;
  readonly lastAppliedRevision?: string;
  readonly lastAttemptedRevision?: string;
  /** The source it reads (`GitRepository/namespace/name`); Kustomizations only. */
  readonly source?: string;
  /** The appliers it depends on (same kind), as keys. */
  readonly dependsOn: readonly ApplierKey[];
  /**
   * How long one reconciliation may run: spec.timeout, else (a Kustomization) spec.interval, as
   * kustomize-controller defaults it. Undefined when neither is a duration.
   */
  readonly timeoutMs?: number;
  /** The ConfigMaps and Secrets its inventory lists, as config ids (`ConfigMap/ns/name`). */
  readonly configs: ReadonlySet<string>;
}

export const applierKey = (r: ApplierRef): ApplierKey => `${r.kind}/${r.namespace}/${r.name}`;

interface RawCondition {
  type?: unknown;
  status?: unknown;
  reason?: unknown;
}

interface RawApplier {
  kind?: unknown;
  metadata?: { name?: unknown; namespace?: unknown; generation?: unknown; resourceVersion?: unknown };
  spec?: {
    suspend?: unknown;
    sourceRef?: { kind?: unknown; name?: unknown; namespace?: unknown };
    dependsOn?: unknown;
    timeout?: unknown;
    interval?: unknown;
  };
  status?: {
    observedGeneration?: unknown;
    conditions?: unknown;
    lastAppliedRevision?: unknown;
    lastAttemptedRevision?: unknown;
    inventory?: { entries?: unknown };
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

function condition(conditions: unknown, type: string): RawCondition | undefined {
  if (!Array.isArray(conditions)) return undefined;
  return (conditions as RawCondition[]).find((c) => c && typeof c === 'object' && c.type === type);
}

/** Reads the phase from the conditions, the way kustomize-controller and helm-controller write them. */
export function phaseOf(raw: RawApplier): ApplierPhase {
  const s = raw.status ?? {};
  const generation = typeof raw.metadata?.generation === 'number' ? raw.metadata.generation : undefined;
  const observed = typeof s.observedGeneration === 'number' ? s.observedGeneration : undefined;
  const ready = condition(s.conditions, 'Ready');
  const reconciling = condition(s.conditions, 'Reconciling');
  const stalled = condition(s.conditions, 'Stalled');
  if (reconciling?.status === 'True' && reconciling.reason !== 'ProgressingWithRetry') return 'progressing';
  if (ready?.status === 'True') {
    // A spec change not yet reconciled: the controller has not looked at it yet.
    if (generation !== undefined && observed !== undefined && observed < generation) return 'progressing';
    // The end of a reconciliation reaches the API server in two writes, the conditions first
    // (fluxcd/pkg/runtime patch.SerialPatcher): Ready=True with Reconciling gone, then
    // lastAppliedRevision. Between them the object says Ready at the revision it applied before.
    // Seen on the real controllers (test/flux/real/sync.test.ts): a change held for the reconciliation
    // was released before it ended.
    const attempted = str(s.lastAttemptedRevision);
    const applied = str(s.lastAppliedRevision);
    if (attempted && applied && attempted !== applied) return 'progressing';
    return 'ready';
  }
  if (ready?.status === 'False') return ready.reason === 'DependencyNotReady' ? 'waiting' : 'failed';
  if (stalled?.status === 'True') return 'failed';
  // No Ready condition yet (just created), or Unknown: in progress.
  return 'progressing';
}

/** `<namespace>_<name>_<group>_<kind>` of a core ConfigMap or Secret → its config id; else undefined. */
export function configOfInventoryId(id: string): string | undefined {
  const parts = id.split('_');
  if (parts.length !== 4) return undefined;
  const [namespace, name, group, kind] = parts as [string, string, string, string];
  if (group !== '' || namespace === '' || name === '') return undefined;
  if (kind !== 'ConfigMap' && kind !== 'Secret') return undefined;
  return configId({ kind: kind as ConfigKind, namespace, name });
}

/**
 * The canonical form of a Kustomization or HelmRelease from a LIST/WATCH, or undefined when the
 * object lacks a name or namespace (nothing can be keyed by it).
 */
export function applierFromObject(kind: ApplierKind, raw: unknown): Applier | undefined {
  const o = (raw ?? {}) as RawApplier;
  const name = str(o.metadata?.name);
  const namespace = str(o.metadata?.namespace);
  if (!name || !namespace) return undefined;
  const ref: ApplierRef = { kind, namespace, name };
  const configs = new Set<string>();
  const entries = o.status?.inventory?.entries;
  if (Array.isArray(entries)) {
    for (const e of entries as Array<{ id?: unknown }>) {
      const id = str(e?.id);
      const config = id ? configOfInventoryId(id) : undefined;
      if (config) configs.add(config);
    }
  }
  const dependsOn: ApplierKey[] = [];
  if (Array.isArray(o.spec?.dependsOn)) {
    for (const d of o.spec.dependsOn as Array<{ name?: unknown; namespace?: unknown }>) {
      const depName = str(d?.name);
      // A dependency without a namespace is in the dependent's own namespace.
      if (depName)
        dependsOn.push(applierKey({ kind, namespace: str(d.namespace) ?? namespace, name: depName }));
    }
  }
  const src = o.spec?.sourceRef;
  const srcKind = str(src?.kind);
  const srcName = str(src?.name);
  const source =
    kind === 'Kustomization' && srcKind && srcName
      ? `${srcKind}/${str(src?.namespace) ?? namespace}/${srcName}`
      : undefined;
  const timeoutText = str(o.spec?.timeout) ?? (kind === 'Kustomization' ? str(o.spec?.interval) : undefined);
  const timeoutMs = timeoutText === undefined ? undefined : parseDuration(timeoutText);
  const resourceVersion = str(o.metadata?.resourceVersion);
  const lastApplied = str(o.status?.lastAppliedRevision);
  const lastAttempted = str(o.status?.lastAttemptedRevision);
  return Object.freeze({
    ref: Object.freeze(ref),
    key: applierKey(ref),
    phase: phaseOf(o),
    suspended: o.spec?.suspend === true,
    ...(resourceVersion ? { resourceVersion } : {}),
    ...(lastApplied ? { lastAppliedRevision: lastApplied } : {}),
    ...(lastAttempted ? { lastAttemptedRevision: lastAttempted } : {}),
    ...(source ? { source } : {}),
    dependsOn: Object.freeze(dependsOn),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    configs,
  });
}

/** A source's key (`GitRepository/namespace/name`) and the revision of its current artifact. */
export function sourceFromObject(
  kind: string,
  raw: unknown,
): { key: string; revision: string | undefined } | undefined {
  const o = (raw ?? {}) as {
    metadata?: { name?: unknown; namespace?: unknown };
    status?: { artifact?: { revision?: unknown } };
  };
  const name = str(o.metadata?.name);
  const namespace = str(o.metadata?.namespace);
  if (!name || !namespace) return undefined;
  return { key: `${kind}/${namespace}/${name}`, revision: str(o.status?.artifact?.revision) };
}

/**
 * The dependencies an applier may be grouped with (--flux-depends-on-as-one): those in its own
 * namespace. The dependent writes its dependsOn; naming another team's Kustomization must not join its
 * group and hold that team's reloads (issue 35, finding 5). Flux still waits for every dependency.
 */
export function groupableDependsOn(a: Applier): { trusted: ApplierKey[]; foreign: ApplierKey[] } {
  const own = `${a.ref.kind}/${a.ref.namespace}/`;
  const trusted: ApplierKey[] = [];
  const foreign: ApplierKey[] = [];
  for (const d of a.dependsOn) (d.startsWith(own) ? trusted : foreign).push(d);
  return { trusted, foreign };
}
