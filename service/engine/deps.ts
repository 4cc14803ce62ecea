// What the reconciler and its run step are given. Every dependency that touches time, the API or the
// outside world is here, so a test (or a simulation) can hand in fakes: a clock and timers it drives,
// a ledger in memory, an Event recorder that records, and a StrategiesPort that models the cluster.

import type { Config } from '../config/config.ts';
import type { ReloadAlert } from '../core/alert-message.ts';
import type { AnnotationGlobals } from '../core/annotations.ts';
import type { ChangeGate, Timers } from '../core/batcher.ts';
import type { CatchUp, KeyState } from '../core/catch-up.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import type { VerdictOptions } from '../core/plan.ts';
import type { EventReason, EventTarget } from '../kube/events.ts';
import type { Ledger } from '../kube/ledger.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { ClusterState, TrackedWorkload } from '../state.ts';
import type { StrategiesPort } from './strategies-port.ts';

/** The ledger as the reconciler uses it (service/kube/ledger.ts; a map in memory in unit tests). */
export type LedgerStore = Pick<
  Ledger,
  | 'fence'
  | 'load'
  | 'keyState'
  | 'writtenAtMs'
  | 'identifyWith'
  | 'stampKey'
  | 'get'
  | 'entries'
  | 'put'
  | 'remove'
  | 'putMany'
  | 'removeMany'
  | 'halts'
  | 'putHalt'
  | 'removeHalt'
> &
  Partial<Pick<Ledger, 'labelOwn'>>;

export interface EventSink {
  emit(target: EventTarget, reason: EventReason, message: string, type?: 'Normal' | 'Warning'): Promise<void>;
}

export interface ReconcilerDeps {
  cfg: Config;
  state: ClusterState;
  ledger: LedgerStore;
  events: EventSink;
  log: Logger;
  globals: AnnotationGlobals;
  hashKey: Buffer;
  strategies: StrategiesPort;
  inScope(namespace: string): boolean;
  /** The clock and timers of every wait the reconciler itself sets. Default: the real ones. */
  timers?: Timers;
  gate?: ChangeGate;
  metrics?: Metrics;
  /**
   * The start-up judgement of one workload with no reload pending (service/catch-up.ts: it lists the
   * pods a reload would replace). Default: the digests alone, with no pods to judge by.
   */
  catchUp?(
    t: TrackedWorkload,
    set: Record<string, string>,
    entry: LedgerEntry | undefined,
    key: KeyState,
    opts: VerdictOptions,
    /** The ledger's newest write (Ledger#writtenAtMs): tells a workload created while down. */
    ledgerWrittenMs?: number,
  ): Promise<CatchUp>;
  /**
   * Chat alerts (--alert-on-reload, service/alerts/sender.ts): told of each completed reload and of the
   * first failed attempt of a run; it queues and returns at once, so a reload never waits for one.
   */
  alerts?: { notify(a: ReloadAlert): void };
  /** The leadership term this reconciler acts for: nothing it started writes or evicts once it aborts. */
  term?: AbortSignal;
}
