// Runs reload actions: one at a time per workload, at most `maxConcurrent` overall, and no sooner
// than `minIntervalMs` (or the action's own, longer, interval) after the same workload's previous
// reload finished, nor before the action's `notBefore`. An action submitted
// while its workload is busy or waiting is merged with the queued one by `merge`, so a workload never
// has more than one action queued. Submission order says nothing about which change is newer (a
// retry resubmits an old action): the reconciler's merge keeps the newer change's action
// (core/reload-action.ts, mergeActions); without `merge` the later submission replaces the queued one.
// Fair across groups (namespaces): no group runs more than its share of the slots at once (groupShare:
// any two groups together leave a slot free, so two tenants' stuck reloads never keep a third waiting;
// docs/adr/0028), and the next action comes from the group running the fewest.
// A workload's slot is dropped once it is idle and its minimum interval has passed.

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
  /** Drops the idle slot once its minimum interval is over. */
  pruneTimer?: unknown;
  /** The interval the last action asked to keep after it (its own, or minIntervalMs). */
  keepMs?: number;
}

export interface WorkQueueOptions<A> {
  maxConcurrent: number;
  minIntervalMs: number;
  run: (action: A) => Promise<void>;
  /** Merges a newly submitted action into one already queued for the same workload (default: the new one). */
  merge?: (queued: A, next: A) => A;
  timers?: Timers;
  /** The group (namespace) of a workload, for fairness. Default: one group. */
  groupOf?: (workload: string) => string;
  /** At most this many running per group. Default with groupOf: groupShare(maxConcurrent). */
  maxPerGroup?: number;
}

/**
 * The most slots one group (namespace) may hold at once: ⌊(cap − 1) / 2⌋, at least 1. Any two groups
 * together then hold at most cap − 1 slots, so while two namespaces' reloads are stuck (a PDB that
 * allows no eviction) a third namespace still finds a free slot at once, not after their deadlines.
 * The bound is fixed, not relative to the namespaces active now: slots are never taken back from a
 * running reload, so a share computed while one namespace was alone would still hold when others
 * arrive. With a cap of 1 or 2 no share can leave room for a third namespace; the share is then 1.
 */
export function groupShare(maxConcurrent: number): number {
  return Math.max(1, Math.floor((maxConcurrent - 1) / 2));
}

export class WorkQueue<A extends QueuedAction> {
  readonly #slots = new Map<string, Slot<A>>();
  readonly #ready: string[] = [];
  #active = 0;
  #stopped = false;
  readonly #idle: Array<() => void> = [];
  /** Running actions per group. */
  readonly #perGroup = new Map<string, number>();
  readonly #maxPerGroup: number;
  private readonly opts: WorkQueueOptions<A>;

  constructor(opts: WorkQueueOptions<A>) {
    this.opts = opts;
    this.#maxPerGroup =
      opts.maxPerGroup ?? (opts.groupOf ? groupShare(opts.maxConcurrent) : opts.maxConcurrent);
  }

  /** Workloads with state kept (running, queued, or within their minimum interval). */
  get size(): number {
    return this.#slots.size;
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

  /** The actions queued and not yet running. */
  *queued(): Iterable<A> {
    for (const s of this.#slots.values()) if (s.queued !== undefined) yield s.queued;
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
      (this.opts.timers ?? realTimers).clear(slot.pruneTimer);
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
    if (s.pruneTimer !== undefined) {
      (this.opts.timers ?? realTimers).clear(s.pruneTimer);
      s.pruneTimer = undefined;
    }
    return s;
  }

  /** Forgets an idle slot now, or once its minimum interval is over. */
  #prune(w: string, slot: Slot<A>): void {
    if (slot.running || slot.queued !== undefined || slot.timer !== undefined) return;
    const timers = this.opts.timers ?? realTimers;
    const keep = Math.max(this.opts.minIntervalMs, slot.keepMs ?? 0);
    const left = (slot.lastFinishedAt ?? 0) + keep - timers.now();
    if (left <= 0) {
      if (this.#slots.get(w) === slot) this.#slots.delete(w);
      return;
    }
    slot.pruneTimer = timers.set(() => {
      slot.pruneTimer = undefined;
      this.#prune(w, slot);
    }, left);
  }

  #group(w: string): string {
    return this.opts.groupOf?.(w) ?? '';
  }

  /** The index in #ready of the next action to run: from the least busy group below its cap. */
  #pick(): number {
    let best = -1;
    let bestLoad = Number.POSITIVE_INFINITY;
    for (let i = 0; i < this.#ready.length; i++) {
      const load = this.#perGroup.get(this.#group(this.#ready[i] as string)) ?? 0;
      if (load >= this.#maxPerGroup) continue;
      if (load < bestLoad) {
        best = i;
        bestLoad = load;
        if (load === 0) break;
      }
    }
    return best;
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
      const i = this.#pick();
      if (i < 0) return; // every ready action's group is at its cap
      const w = this.#ready.splice(i, 1)[0] as string;
      const slot = this.#slot(w);
      const action = slot.queued;
      if (action === undefined) continue;
      const group = this.#group(w);
      slot.queued = undefined;
      slot.running = true;
      slot.keepMs = action.minIntervalMs;
      this.#active++;
      this.#perGroup.set(group, (this.#perGroup.get(group) ?? 0) + 1);
      void this.opts
        .run(action)
        .catch(() => {
          // run() reports its own failures (Events, logs); the queue only keeps going.
        })
        .finally(() => {
          slot.running = false;
          slot.lastFinishedAt = (this.opts.timers ?? realTimers).now();
          this.#active--;
          const left = (this.#perGroup.get(group) ?? 1) - 1;
          if (left > 0) this.#perGroup.set(group, left);
          else this.#perGroup.delete(group);
          if (!this.#stopped) this.#schedule(w);
          if (!this.#stopped) this.#prune(w, slot);
          this.#pump();
          if (!this.#busy()) for (const r of this.#idle.splice(0)) r();
        });
    }
  }
}
