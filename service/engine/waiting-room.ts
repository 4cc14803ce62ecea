// The waiting room (issue 34, docs/adr/0044, docs/design.md "The waiting room"): per workload, the
// planned reload that waits after the batch and its phase, and the one scheduler of every timer after
// the batch. The admission checks (the brake, the waves and halts, restart windows, retry back-off)
// keep their knowledge and say run or wait; what waits, and the timer that ends the wait, live here.
// The status reads this one table (plus the batcher and the sync gates, which hold changes, not
// reloads).
//
// Phases: `queued` (the work queue holds the workload's key only, and keeps fairness and the minimum
// interval; the action is here), `waiting
// {reason, since, until?}` (the brake, a wave or a halt, a restart window), `retry{at, attempt}`.
// A running reload is the status book's (engine/status.ts); a workload may have one running and its
// next one planned here.
//
// Timers after the batch are armed here only (the grep in docs/design.md, "The waiting room", lists
// every timer). Armed elsewhere, on purpose: before the batch, the batcher (core/batcher.ts) and the
// Argo CD and Flux sync gates (argocd/gate.ts, flux/gate.ts: they hold changes, not reloads); the
// work queue's minimum interval and slot pruning (core/work-queue.ts) and the API write rate
// (core/token-bucket.ts); waits inside one running strategy call: the restart budget's slot for a
// pod (strategies/restart-budget.ts; still a wait, not an admission check), a rollout's progress
// deadline (core/progress-deadline.ts), the polls of strategies/restart-session.ts and
// strategies/types.ts; and the adapters (kube/, hub/, http.ts), which wait for the API, not reloads.

import { realTimers, type Timers } from '../core/batcher.ts';
import { mergeActions, type ReloadAction } from '../core/reload-action.ts';
import type { Excused, Halt } from '../core/waves.ts';
import type { QueuedAction } from '../core/work-queue.ts';

/** Longest a reload held for its window sleeps before looking at its window again (clock jumps, edits). */
export const HOLD_RECHECK_MS = 3_600_000;

/** Why an admission check keeps a planned reload waiting. */
export type WaitReason = 'brake' | 'wave' | 'window';

/**
 * What an admission check says of a planned reload (the brake: engine/brake.ts brakeCheck; the waves
 * and halts: core/waves.ts offer; a restart window: engine/decide.ts; retry back-off:
 * core/reload-action.ts retryDelayMs). The check keeps its knowledge; the room keeps what waits.
 */
export type Admission =
  | { kind: 'run' }
  | { kind: 'wait'; reason: WaitReason | 'halt'; until?: number }
  | { kind: 'drop'; reason: string };

/** What a workload's planned reload waits for. */
export type Phase =
  | { kind: 'queued'; action: ReloadAction }
  | { kind: 'waiting'; reason: WaitReason | 'halt'; since: number; until?: number; action: ReloadAction }
  | { kind: 'retry'; at: number; attempt: number };

/** What the admission checks know that the status shows (the brake's flag, the waves' halts). */
export interface RoomKnowledge {
  brake: boolean;
  /** Whether a halted change holds this reload (it waits for `wave` otherwise). */
  halted(a: ReloadAction): boolean;
  halts(): Iterable<Halt>;
  excused(): Iterable<Excused>;
}

/** The one table the status reads. */
export interface RoomTable {
  brake: boolean;
  /** In order: queued, window, wave or halt, retry, brake (the status's order for one workload). */
  phases: Array<{ workload: string; phase: Phase }>;
  halts: Iterable<Halt>;
  excused: Iterable<Excused>;
}

interface Waiting {
  reason: WaitReason;
  since: number;
  until?: number;
  action: ReloadAction;
  /** The timer that ends the wait (a window opens), if the room keeps one for it. */
  timer?: unknown;
}

const NOTHING: RoomKnowledge = { brake: false, halted: () => false, halts: () => [], excused: () => [] };

export class WaitingRoom {
  readonly #timers: Timers;
  /** Per workload: its action in the work queue, which keeps only the workload's key (and its timing). */
  readonly #queued = new Map<string, ReloadAction>();
  #knows: RoomKnowledge = NOTHING;
  /** Every timer armed and not fired nor cleared. */
  readonly #armed = new Set<unknown>();
  /** Per workload: failed runs in a row (the retry back-off counts them). */
  readonly #failures = new Map<string, number>();
  /** Per workload: a retry is due (the newest one armed; any that fires ends the phase). */
  readonly #retry = new Map<string, { at: number; attempt: number }>();
  /** Per reason, per workload: its planned reload kept by an admission check (later changes join it). */
  readonly #waiting: Record<WaitReason, Map<string, Waiting>> = {
    brake: new Map(),
    wave: new Map(),
    window: new Map(),
  };

  constructor(timers: Timers = realTimers) {
    this.#timers = timers;
  }

  /** The admission checks' knowledge the table shows. */
  know(k: RoomKnowledge): void {
    this.#knows = k;
  }

  now(): number {
    return this.#timers.now();
  }

  /**
   * The action goes to the work queue: it joins the one queued for its workload (the newest change's
   * action wins, and names every config changed). Returns the key the queue takes: the workload, and
   * the timing of the merged action (its own minimum interval, not before its batch window's end).
   */
  enqueue(a: ReloadAction): QueuedAction {
    const before = this.#queued.get(a.workload);
    const merged = before ? mergeActions(before, a) : a;
    this.#queued.set(a.workload, merged);
    return {
      workload: a.workload,
      ...(merged.minIntervalMs !== undefined ? { minIntervalMs: merged.minIntervalMs } : {}),
      ...(merged.notBefore !== undefined ? { notBefore: merged.notBefore } : {}),
    };
  }

  /** The queue runs the workload now: its queued action leaves the room. */
  take(workload: string): ReloadAction | undefined {
    const a = this.#queued.get(workload);
    this.#queued.delete(workload);
    return a;
  }

  /** Runs `fn` in `ms`, unless disarmed or the room is cleared first; returns the handle. */
  arm(fn: () => void, ms: number): unknown {
    const handle = this.#timers.set(() => {
      this.#armed.delete(handle);
      fn();
    }, ms);
    this.#armed.add(handle);
    return handle;
  }

  disarm(handle: unknown): void {
    if (!this.#armed.delete(handle)) return;
    this.#timers.clear(handle);
  }

  /** Failed runs in a row of the workload's reload. */
  failures(workload: string): number {
    return this.#failures.get(workload) ?? 0;
  }

  /** Its reload completed (or it is gone): the back-off starts again from the first attempt. */
  succeeded(workload: string): void {
    this.#failures.delete(workload);
  }

  /** Its run ended in a retry: `fire` runs after `afterMs`; a failed run counts towards the back-off. */
  retry(workload: string, afterMs: number, failed: boolean, fire: () => void): void {
    if (failed) this.#failures.set(workload, this.failures(workload) + 1);
    this.#retry.set(workload, { at: this.#timers.now() + afterMs, attempt: this.failures(workload) });
    this.arm(() => {
      this.#retry.delete(workload);
      fire();
    }, afterMs);
  }

  /** Whether a retry of the workload's reload is due. */
  retrying(workload: string): boolean {
    return this.#retry.has(workload);
  }

  /**
   * Holds the action until its window opens at `until` (looked at again at least hourly); `fire` then
   * submits it. Returns the hold it replaced.
   */
  holdForWindow(
    action: ReloadAction,
    until: number,
    fire: (a: ReloadAction) => void,
  ): { until: number; action: ReloadAction } | undefined {
    const w = action.workload;
    const before = this.releaseWindow(w);
    const delay = Math.min(Math.max(0, until - this.#timers.now()), HOLD_RECHECK_MS);
    const timer = this.arm(() => {
      if (this.#waiting.window.get(w)?.timer !== timer) return;
      this.#waiting.window.delete(w);
      fire(action);
    }, delay);
    this.#waiting.window.set(w, { reason: 'window', since: this.#timers.now(), until, action, timer });
    return before;
  }

  /** The action held for the workload's window, if one is. */
  windowAction(workload: string): ReloadAction | undefined {
    return this.#waiting.window.get(workload)?.action;
  }

  /** Ends the workload's window hold (a run covers it, or its window is looked at again); returns it. */
  releaseWindow(workload: string): { until: number; action: ReloadAction } | undefined {
    const h = this.#waiting.window.get(workload);
    if (!h) return undefined;
    this.disarm(h.timer);
    this.#waiting.window.delete(workload);
    return { until: h.until ?? 0, action: h.action };
  }

  /**
   * An admission check keeps the workload's planned reload (a later change joins it: one reload).
   * Returns whether it was already waiting for that reason.
   */
  wait(action: ReloadAction, reason: 'brake' | 'wave'): boolean {
    const before = this.#waiting[reason].get(action.workload);
    this.#waiting[reason].set(action.workload, {
      reason,
      since: before?.since ?? this.#timers.now(),
      action: before ? mergeActions(before.action, action) : action,
    });
    return before !== undefined;
  }

  /** The workload's planned reload no longer waits for `reason` (admitted, dropped, or gone). */
  leave(workload: string, reason: 'brake' | 'wave'): void {
    this.#waiting[reason].delete(workload);
  }

  /** The planned reload of the workload waiting for `reason`, if one is. */
  waitingOf(workload: string, reason: 'brake' | 'wave'): ReloadAction | undefined {
    return this.#waiting[reason].get(workload)?.action;
  }

  /** The planned reloads waiting for `reason` (a copy: a caller may admit them as it goes). */
  waiting(reason: 'brake' | 'wave'): ReloadAction[] {
    return [...this.#waiting[reason].values()].map((w) => w.action);
  }

  /** How many planned reloads wait for `reason`. */
  count(reason: WaitReason): number {
    return this.#waiting[reason].size;
  }

  /** The one table the status reads: every planned reload and its phase, and the checks' knowledge. */
  table(): RoomTable {
    const phases: RoomTable['phases'] = [];
    for (const action of this.#queued.values())
      phases.push({ workload: action.workload, phase: { kind: 'queued', action } });
    for (const [workload, w] of this.#waiting.window) phases.push({ workload, phase: phase(w) });
    for (const [workload, w] of this.#waiting.wave)
      phases.push({
        workload,
        phase: { ...phase(w), ...(this.#knows.halted(w.action) ? { reason: 'halt' } : {}) },
      });
    for (const [workload, r] of this.#retry) phases.push({ workload, phase: { kind: 'retry', ...r } });
    for (const [workload, w] of this.#waiting.brake) phases.push({ workload, phase: phase(w) });
    return { brake: this.#knows.brake, phases, halts: this.#knows.halts(), excused: this.#knows.excused() };
  }

  /** Clears every timer and what waits (the term ended). */
  clear(): void {
    for (const h of this.#armed) this.#timers.clear(h);
    this.#armed.clear();
    this.#retry.clear();
    this.#queued.clear();
    for (const m of Object.values(this.#waiting)) m.clear();
  }
}

function phase(w: Waiting): Phase & { kind: 'waiting' } {
  return {
    kind: 'waiting',
    reason: w.reason,
    since: w.since,
    ...(w.until !== undefined ? { until: w.until } : {}),
    action: w.action,
  };
}
