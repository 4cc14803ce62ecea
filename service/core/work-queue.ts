// Runs reload actions: one at a time per workload, at most `maxConcurrent` overall, and no sooner
// than `minIntervalMs` (or the action's own, longer, interval) after the same workload's previous
// reload finished, nor before the action's `notBefore`. An action submitted
// while its workload is busy or waiting replaces the queued one (the newer action has the later
// cutoff and covers the older one), so a workload never has more than one action queued.

import { realTimers, type Timers } from './batcher.ts';

export interface QueuedAction {
  workload: string;
  /** This workload's own least interval after its previous reload; the longer of it and minIntervalMs holds. */
  minIntervalMs?: number;
  /** Not started before this instant (epoch ms): an interval that began before this process did. */
  notBefore?: number;
}

interface Slot<A> {
  running: boolean;
  queued?: A;
  lastFinishedAt?: number;
  timer?: unknown;
}

export interface WorkQueueOptions<A> {
  maxConcurrent: number;
  minIntervalMs: number;
  run: (action: A) => Promise<void>;
  /** Merges a newly submitted action into one already queued for the same workload. */
  merge?: (queued: A, next: A) => A;
  timers?: Timers;
}

export class WorkQueue<A extends QueuedAction> {
  readonly #slots = new Map<string, Slot<A>>();
  readonly #ready: string[] = [];
  #active = 0;
  #stopped = false;
  readonly #idle: Array<() => void> = [];
  private readonly opts: WorkQueueOptions<A>;

  constructor(opts: WorkQueueOptions<A>) {
    this.opts = opts;
  }

  submit(action: A): void {
    if (this.#stopped) return;
    const slot = this.#slot(action.workload);
    slot.queued = slot.queued && this.opts.merge ? this.opts.merge(slot.queued, action) : action;
    this.#schedule(action.workload);
  }

  get active(): number {
    return this.#active;
  }

  /** Actions queued and not yet running (waiting for a slot, their workload, or its interval). */
  get waiting(): number {
    let n = 0;
    for (const s of this.#slots.values()) if (s.queued !== undefined) n++;
    return n;
  }

  /** Stops taking work; resolves when running actions have returned. Queued actions are dropped. */
  async stop(): Promise<void> {
    this.#stopped = true;
    for (const slot of this.#slots.values()) {
      (this.opts.timers ?? realTimers).clear(slot.timer);
      slot.queued = undefined;
    }
    this.#ready.length = 0;
    if (this.#active > 0) await new Promise<void>((r) => this.#idle.push(r));
  }

  /** Resolves when nothing is running, queued or waiting. */
  async drained(): Promise<void> {
    if (this.#busy()) await new Promise<void>((r) => this.#idle.push(r));
  }

  #busy(): boolean {
    return this.#active > 0 || [...this.#slots.values()].some((s) => s.queued !== undefined || s.running);
  }

  #slot(w: string): Slot<A> {
    let s = this.#slots.get(w);
    if (!s) {
      s = { running: false };
      this.#slots.set(w, s);
    }
    return s;
  }

  #schedule(w: string): void {
    const slot = this.#slot(w);
    if (slot.running || slot.queued === undefined || slot.timer !== undefined || this.#ready.includes(w))
      return;
    const timers = this.opts.timers ?? realTimers;
    const now = timers.now();
    const interval = Math.max(this.opts.minIntervalMs, slot.queued.minIntervalMs ?? 0);
    const wait = Math.max(
      slot.lastFinishedAt === undefined ? 0 : slot.lastFinishedAt + interval - now,
      (slot.queued.notBefore ?? 0) - now,
    );
    if (wait > 0) {
      slot.timer = timers.set(() => {
        slot.timer = undefined;
        this.#schedule(w);
      }, wait);
      return;
    }
    this.#ready.push(w);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped && this.#active < this.opts.maxConcurrent && this.#ready.length > 0) {
      const w = this.#ready.shift() as string;
      const slot = this.#slot(w);
      const action = slot.queued;
      if (action === undefined) continue;
      slot.queued = undefined;
      slot.running = true;
      this.#active++;
      void this.opts
        .run(action)
        .catch(() => {
          // run() reports its own failures (Events, logs); the queue only keeps going.
        })
        .finally(() => {
          slot.running = false;
          slot.lastFinishedAt = (this.opts.timers ?? realTimers).now();
          this.#active--;
          if (!this.#stopped) this.#schedule(w);
          this.#pump();
          if (!this.#busy()) for (const r of this.#idle.splice(0)) r();
        });
    }
  }
}
