// What every reload strategy gets and returns.

import type { WorkloadRecord } from '../core/records.ts';
import type { ClusterAccess } from '../kube/access.ts';
import type { AppsApi, BatchApi, CoreApi, CustomApi } from '../kube/api.ts';
import type { JobSpecStore } from '../kube/job-spec-store.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import type { Logger } from '../log.ts';
import type { RestartBudget } from './restart-budget.ts';

export interface StrategyContext {
  core: CoreApi;
  apps: AppsApi;
  batch: BatchApi;
  custom: CustomApi;
  /** For the raw watches and requests of a restart (service/kube/live-view.ts). */
  kc: ClusterAccess;
  log: Logger;
  /** Aborted when the service stops or loses leadership: stop acting at once. */
  signal: AbortSignal;
  stallAfterMs: number;
  /** Called once when a reload has been blocked for stallAfterMs (e.g. by a PodDisruptionBudget). */
  onStall(reason: string): void;
  /**
   * The reload waits for a restart-budget slot ('budget') or a PodDisruptionBudget refused an eviction
   * ('pdb') (`waiting` true), or no longer does (false). Only for the status, which shows the reload
   * as waiting, and why, instead of running.
   */
  onWait?(why: 'budget' | 'pdb', waiting: boolean): void;
  /**
   * Called at each step that moves the reload on (a pod evicted, a surge pod created or handed over):
   * --reload-deadline counts from the last one, so a slow restart that keeps moving is never cut.
   */
  progress(): void;
  /**
   * Records the reload as pending in the ledger, with the uids of the pods it will replace when it
   * snapshotted them. A strategy calls it once, before its first write to the cluster; a crash after
   * it resumes the same reload, and one before it re-detects the change instead.
   */
  begin(targets?: readonly string[]): Promise<void>;
  /** Where a Job reload records the Job to create before deleting the old one (docs/adr/0025). */
  jobSpecs?: JobSpecStore;
  /** --restart-budget: every old pod's eviction waits for its slot (restart-budget.ts). */
  budget?: RestartBudget;
  /** --run-suspended-cronjobs: a suspended CronJob gets its Job too, as in Reloader. */
  runSuspendedCronJobs?: boolean;
}

export interface ReloadRequest {
  workload: WorkloadRecord;
  /** Every pod created before this (ms since epoch) must be replaced. */
  cutoffMs: number;
  /** The pods to replace, when resuming a reload that snapshotted them (see StrategyContext.begin). */
  targets?: readonly string[];
  /** A digest of everything the workload now sees, for strategies that write it (annotate, git). */
  /** Progressive reloads: replace one pod alone until a replacement is Ready (core/rolling.ts). */
  canary?: boolean;
  configHash: string;
  /**
   * True when the pod template changed after the config change (by resourceVersion order): the
   * template rollout's pods were created after the change, so they see it and need no restart,
   * even when creationTimestamp's whole seconds cannot tell them from older pods. `live` is the
   * restart's current view of the workload (template-change.ts).
   */
  templateChangedSince(live: RawObject): Promise<boolean>;
}

export interface StrategyResult {
  /** Pods replaced (restart), or 0. */
  replaced: number;
  /** One line for the Reloaded Event, after "configs changed;". */
  summary: string;
  /**
   * Nothing had to be restarted: every pod was already newer than the change (a template rollout
   * in the same sync replaced them, or is replacing them). Not a reload: its own Event reason, and
   * not in the reload counters.
   */
  notNeeded?: boolean;
  /** The uid the Event goes on when the reload replaced the workload object itself (a recreated Job). */
  uid?: string;
}

export class StrategyUnsupported extends Error {
  override name = 'StrategyUnsupported';
}

/**
 * The reload cannot start yet for a reason that will pass by itself (a CronJob's Job still running
 * under concurrencyPolicy Forbid). Nothing was changed; the pending reload stays in the ledger and is
 * tried again after `retryMs`.
 */
export class ReloadWaiting extends Error {
  override name = 'ReloadWaiting';
  readonly retryMs: number;
  constructor(message: string, retryMs: number) {
    super(message);
    this.retryMs = retryMs;
  }
}

/** Waits `ms`, or less if the signal aborts (then throws the abort reason). */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
