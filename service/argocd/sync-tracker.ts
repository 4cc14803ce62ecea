// What we keep of each Argo CD Application, and when its sync operations start and end. A sync is
// an `operationState` with a new `startedAt`; it is under way while the phase is Running or
// Terminating, or while `operation` (a requested sync the controller has not picked up) is set.
// Pure: fed by the Application watch and by notifications.
import type { AppKey } from './tracking.ts';
import { appKeyString } from './tracking.ts';

export const OPERATION_PHASES = ['Running', 'Terminating', 'Succeeded', 'Failed', 'Error'] as const;
export type OperationPhase = (typeof OPERATION_PHASES)[number];
export const TERMINAL_PHASES: readonly OperationPhase[] = ['Succeeded', 'Failed', 'Error'];

export const isTerminal = (p: OperationPhase | undefined): boolean =>
  p !== undefined && TERMINAL_PHASES.includes(p);

export interface SyncedResource {
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
  /** Synced, SyncFailed, Pruned, PruneSkipped… (informational; changes are decided from our hashes). */
  status?: string;
}

export interface SyncOperation {
  phase: OperationPhase;
  startedAt: string;
  finishedAt?: string;
  revision?: string;
  revisions?: string[];
  message?: string;
  resources: SyncedResource[];
}

export interface AppSource {
  repoURL: string;
  path?: string;
  chart?: string;
  targetRevision?: string;
}

export interface AppSync {
  app: AppKey;
  /** `operation` is set: a sync was requested and has not finished being picked up. */
  requested: boolean;
  operation?: SyncOperation;
  sources: AppSource[];
  destination: { server?: string; name?: string; namespace?: string };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function source(v: unknown): AppSource | undefined {
  const s = obj(v);
  const repoURL = str(s?.repoURL);
  if (!s || !repoURL) return undefined;
  return { repoURL, path: str(s.path), chart: str(s.chart), targetRevision: str(s.targetRevision) };
}

export function syncedResources(v: unknown): SyncedResource[] {
  const out: SyncedResource[] = [];
  for (const item of arr(v)) {
    const r = obj(item);
    const kind = str(r?.kind);
    const name = str(r?.name);
    if (!r || !kind || !name) continue;
    out.push({
      group: str(r.group) ?? '',
      version: str(r.version) ?? '',
      kind,
      namespace: str(r.namespace) ?? '',
      name,
      ...(str(r.status) !== undefined ? { status: str(r.status) } : {}),
    });
  }
  return out;
}

/** Reduces a raw Application (watch or GET JSON) to what the tracker keeps. */
export function appFromObject(raw: unknown): AppSync | undefined {
  const o = obj(raw);
  const meta = obj(o?.metadata);
  const name = str(meta?.name);
  const namespace = str(meta?.namespace);
  if (!o || !name || !namespace) return undefined;
  const spec = obj(o.spec);
  const state = obj(obj(o.status)?.operationState);
  const phase = str(state?.phase) as OperationPhase | undefined;
  const startedAt = str(state?.startedAt);
  const result = obj(state?.syncResult);
  const sources = [source(spec?.source), ...arr(spec?.sources).map(source)].filter(
    (s): s is AppSource => s !== undefined,
  );
  const dest = obj(spec?.destination);
  let operation: SyncOperation | undefined;
  if (state && phase && OPERATION_PHASES.includes(phase) && startedAt) {
    const revisions = arr(result?.revisions).filter((r): r is string => typeof r === 'string');
    operation = {
      phase,
      startedAt,
      finishedAt: str(state.finishedAt),
      revision: str(result?.revision),
      ...(revisions.length > 0 ? { revisions } : {}),
      message: str(state.message),
      resources: syncedResources(result?.resources),
    };
  }
  return {
    app: { namespace, name },
    requested: obj(o.operation) !== undefined,
    operation,
    sources,
    destination: { server: str(dest?.server), name: str(dest?.name), namespace: str(dest?.namespace) },
  };
}

export const isSyncing = (a: AppSync | undefined): boolean =>
  a !== undefined && (a.requested || (a.operation !== undefined && !isTerminal(a.operation.phase)));

export type Transition =
  | { kind: 'started'; app: AppSync }
  | { kind: 'ended'; app: AppSync; operation: SyncOperation };

/** Per app, the last state seen; `observe` says whether a sync started or ended with this update. */
export class SyncTracker {
  readonly #apps = new Map<string, AppSync>();

  get(key: string): AppSync | undefined {
    return this.#apps.get(key);
  }

  get size(): number {
    return this.#apps.size;
  }

  isSyncing(key: string): boolean {
    return isSyncing(this.#apps.get(key));
  }

  observe(next: AppSync): Transition | undefined {
    const key = appKeyString(next.app);
    const prev = this.#apps.get(key);
    this.#apps.set(key, next);
    const op = next.operation;
    const before = prev?.operation;
    if (op && isTerminal(op.phase)) {
      const already = before && before.startedAt === op.startedAt && isTerminal(before.phase);
      // A new `operation` may already be requested; the ended sync is still reported.
      if (!already) return { kind: 'ended', app: next, operation: op };
    }
    if (isSyncing(next) && !isSyncing(prev)) return { kind: 'started', app: next };
    return undefined;
  }

  remove(key: string): AppSync | undefined {
    const old = this.#apps.get(key);
    this.#apps.delete(key);
    return old;
  }
}
