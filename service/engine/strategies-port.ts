// What the reconciler needs from the code that changes the cluster: run one reload's strategy, and
// clean up surge pods. The reconciler is given an implementation (service/strategies/execute.ts in
// the service, a model in a simulation) and never imports the strategies itself (docs/adr/0020).
//
// A run returns how it went instead of throwing for expected endings: waiting (retry later), not
// supported (skip), or failed. Only the reconciler's one outcome step turns those into timers.

import type { PodHealthFacts, Unhealthy } from '../core/pod-health.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { ReloadStrategy } from '../core/types.ts';
import type { Logger } from '../log.ts';
import type { TrackedWorkload } from '../state.ts';

export interface ExecRequest {
  workload: TrackedWorkload;
  action: ReloadAction;
  strategy: ReloadStrategy;
  /** The changed configs, as Events name them ("ConfigMap/app"). */
  changed: string[];
  /** A digest of every config the workload now sees, keyed for its namespace (ADR 0010). */
  configHash: string;
  /** Called once before the first write: records the pending reload, with the pods it replaces. */
  begin(snapshot?: readonly string[]): Promise<void>;
  /** Aborts when the term ends or the reload's deadline passes (no progress for --reload-deadline). */
  signal: AbortSignal;
  /** Aborts only when the term ends (a webhook delivery is not cut by the reload's deadline). */
  term: AbortSignal;
  stallAfterMs: number;
  /** Progressive reloads: a restart replaces one pod alone until a replacement is Ready (core/rolling.ts). */
  canary?: boolean;
  onStall(why: string): void;
  /**
   * The reload waits for a restart-budget slot ('budget') or a PodDisruptionBudget refused an eviction
   * ('pdb') (`waiting` true), or no longer does (false): the status shows it as waiting, and why.
   */
  onWait?(why: RunWait, waiting: boolean): void;
  /** The reload moved on (a pod evicted, a surge pod created): its deadline starts again. */
  onProgress(): void;
  log: Logger;
}

/** What a running reload can wait for (strategies/types.ts StrategyContext.onWait). */
export type RunWait = 'budget' | 'pdb';

export type ExecResult =
  | { kind: 'done'; replaced: number; summary: string; notNeeded?: boolean; uid?: string }
  /** Nothing was written; it will pass by itself (a CronJob's Job still running under Forbid). */
  | { kind: 'waiting'; why: string; retryMs: number }
  /** This strategy cannot reload this workload; nothing was written. */
  | { kind: 'unsupported'; why: string }
  | { kind: 'failed'; error: Error; errorKind: 'webhook_send' | 'update_workload' };

/** What the sweep asks of the reconciler about the reloads it knows. */
export interface SweepView {
  /** Uids of in-scope workloads with a reload pending or running, read after the sweep's LIST (their surge pods stay). */
  pendingOwners(): Set<string>;
  /**
   * The ledger's workload ids (`Kind/namespace/name`): the workloads this release reloads or reloaded.
   * Out of scope, only their surge pods are ours (another release may reload the rest).
   */
  reloaded(): Iterable<string>;
  /** True while a reload of this workload id runs here (it finishes its own Job record). */
  running(id: string): boolean;
  /** True when the ledger holds a pending reload for this workload id. */
  pending(id: string): boolean;
}

export interface StrategiesPort {
  /** True when reloads go to --webhook-url instead of the cluster. */
  readonly notifies: boolean;
  run(req: ExecRequest): Promise<ExecResult>;
  /**
   * The configs ("ConfigMap/name") the workload's pods need (not optional) that do not exist now: a
   * reload must not replace pods into them (docs/adr/0024). Throws when it cannot tell.
   */
  missingNeeded(t: TrackedWorkload, signal: AbortSignal): Promise<string[]>;
  /**
   * The periodic clean-up, also run when a term starts: deletes (in a dry run: reports) the surge pods of
   * Deployments without a pending or running reload, including those in namespaces that left the scope
   * (docs/adr/0026), and finishes Job reloads cut between the delete and the create (docs/adr/0025).
   */
  sweep(view: SweepView, signal: AbortSignal): Promise<void>;
  /** A Job with a reload pending is gone: create its recorded Job now, not at the next sweep. Never throws. */
  resumeJobs(view: SweepView, signal: AbortSignal): Promise<void>;
  /**
   * Progressive reloads: why the workload's pods are not healthy after its reload (not Ready, or a
   * replacement created since `sinceMs` restarted), and which, or undefined when they are. Throws when
   * it cannot tell.
   */
  health(t: TrackedWorkload, sinceMs: number, signal: AbortSignal): Promise<Unhealthy | undefined>;
  /**
   * Progressive reloads: the workload's pods now, to judge a running reload's new pods by
   * (core/pod-health.ts replacementsFailed). Undefined when it has no pods that stay (a CronJob, a
   * Job). Throws when it cannot tell.
   */
  pods(t: TrackedWorkload, signal: AbortSignal): Promise<PodHealthFacts[] | undefined>;
  /** Deletes the surge pods of one Deployment whose reload was dropped. */
  dropSurgePods(t: TrackedWorkload, signal: AbortSignal): Promise<void>;
}
