// A reload action, how two actions for one workload compare in recency, and the outcomes a run of one
// can have. Pure: the reconciler decides with these, the strategies' executor produces the outcomes,
// and one place in the reconciler turns them into timers (docs/adr/0020).
//
// Recency is the recency of the CHANGE an action carries, never the order in which it was submitted:
// a retry resubmits an action planned long ago, and must not win over one planned since (issue 20,
// finding 1). The later cutoff is the newer change (cutoffs come from one process's clock, when the
// change was observed); between equal cutoffs the newer config resourceVersion wins.

import type { SyncCause } from './batcher.ts';
import { compareResourceVersions } from './records.ts';

export interface ReloadAction {
  workload: string;
  changed: string[];
  cutoffMs: number;
  target: Record<string, string>;
  /**
   * The newest resourceVersion among the configs in `target` when the action was planned. A pod
   * template changed after it means the template rollout's pods already see the change.
   */
  changeRV: string;
  /**
   * The uid of the workload object it was planned for (not for a Job, which its own reload recreates).
   * A workload deleted and created again under the same name is a new object: this action is not for it.
   */
  uid?: string;
  /**
   * Per changed config: the digest of its whole content when the action was planned. One change of a
   * config has one content, while `target` holds each workload's own digest of the keys it uses
   * (progressive reloads group workloads by it, core/waves.ts).
   */
  contents?: Record<string, string>;
  /** True when resuming a pending action found in the ledger (after a crash or leader change), or a retry. */
  resumed?: boolean;
  /** The pods a resumed restart replaces: the snapshot its first run recorded. */
  targets?: readonly string[];
  /** The workload's batch window (pause-period), and when its current one ends (see WorkQueue). */
  minIntervalMs?: number;
  notBefore?: number;
  /** The Argo CD sync it followed (Application and revision), when a sync's end released it: its cause in the status. */
  via?: SyncCause;
}

/** What orders two actions (or a recorded target) of one workload in time. */
export interface Recency {
  cutoffMs: number;
  changeRV: string;
}

/** < 0 when `a` carries an older change than `b`, > 0 when newer, 0 when neither is known newer. */
export function compareRecency(a: Recency, b: Recency): number {
  if (a.cutoffMs !== b.cutoffMs) return a.cutoffMs < b.cutoffMs ? -1 : 1;
  return compareResourceVersions(a.changeRV, b.changeRV) ?? 0;
}

/** True when `a` carries a strictly older change than `b` (an absent `b` is older than anything). */
export function isOlder(a: Recency, b: Recency | undefined): boolean {
  return b !== undefined && compareRecency(a, b) < 0;
}

/**
 * One action in place of two for the same workload: the newer change's target, cutoff and pod
 * snapshot, naming every config either one changed. Submission order breaks only a tie, for the
 * later-submitted `next`.
 */
export function mergeActions(queued: ReloadAction, next: ReloadAction): ReloadAction {
  const [newer, older] = compareRecency(queued, next) > 0 ? [queued, next] : [next, queued];
  const via = newer.via ?? older.via;
  return {
    ...newer,
    changed: [...new Set([...queued.changed, ...next.changed])].sort(),
    ...(via ? { via } : {}),
  };
}

/** Back-off before the n-th consecutive retry of a workload's reload (n ≥ 1). */
export const RETRY_MS: readonly number[] = [2_000, 5_000, 15_000, 30_000, 60_000];

export function retryDelayMs(attempt: number): number {
  return RETRY_MS[Math.min(Math.max(attempt, 1) - 1, RETRY_MS.length - 1)] as number;
}

/**
 * How one run of an action ended. The run itself sets no timer and re-enters nothing: the reconciler
 * turns `retry` and `hold` into timers, in one place.
 *  - done: nothing more to do for this action (completed, not needed, skipped as unsupported, dry run).
 *  - retry: run `action` (the one that ran) again after `afterMs`, replacing the pods in `targets` when
 *    the run snapshotted them.
 *  - hold: run it again once `until` (epoch ms) is reached: its restart window opens then.
 *  - config-missing: not run, because configs the pods need (`missing`) do not exist. No timer: the
 *    config's return is a change, judged against the ledger like any other (docs/adr/0024).
 *  - dropped: the workload is gone, opted out or invalid, or a newer action covers this one.
 *  - interrupted: the term ended; the pending action stays in the ledger for the next leader.
 */
/**
 * Why the engine stopped a running reload before its end (progressive reloads): the change it carries
 * was halted, or a newer change of a config it carries supersedes it (its content is no longer current).
 */
export type CutReason = { kind: 'halted'; why: string } | { kind: 'superseded'; config: string };

export type Outcome =
  | { kind: 'done' }
  | {
      kind: 'retry';
      action: ReloadAction;
      afterMs: number;
      targets?: readonly string[];
      failed: boolean;
      /** Cut by --reload-deadline: it made no progress (a replacement that never gets Ready, a PDB). */
      stalled?: boolean;
      /** Nothing was written: it waits for something that passes by itself (a CronJob's Job under Forbid). */
      waiting?: boolean;
    }
  | { kind: 'hold'; until: number; action: ReloadAction; windowText: string }
  | { kind: 'config-missing'; action: ReloadAction; missing: string[] }
  | { kind: 'dropped'; reason: string }
  | { kind: 'interrupted' };
