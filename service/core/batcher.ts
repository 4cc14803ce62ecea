// Groups config changes per workload into batches: each change restarts the workload's quiet
// period (debounce), and a batch fires at the latest `maxWait` after its first change, so a config
// that never stops changing cannot postpone a reload forever. One batch is one reload.
//
// The Batcher's input is the `ChangeSink` interface; the Argo CD integration adds another source
// (changes held until a sync ends) that feeds the same sink.

import type { ConfigRecord } from './records.ts';

export interface Change {
  workload: string;
  /** configId of what changed, or a pseudo-id such as "request" for a manual reload request. */
  config: string;
  /** When the change was observed (ms since epoch). */
  observedAt: number;
  /** Per-workload debounce override (gitops-reloader.io/debounce), in ms. */
  debounceMs?: number;
}

export interface ChangeSink {
  add(change: Change): void;
}

/**
 * Decides whether a config change waits before it is batched (the Argo CD integration holds
 * changes to configs of an Application that is syncing, and releases them as one batch when the
 * operation ends, through the `sink` it is given).
 */
export interface ChangeGate {
  /** Called once with the sink to release held changes into. */
  attach(sink: ChangeSink): void;
  /**
   * The sink stops acting (leadership ended): what the gate holds for it is dropped (the next leader's
   * start finds those changes by comparing hashes with the ledger), and nothing is released into it.
   */
  detach(sink: ChangeSink): void;
  /** True when the gate took the change and will release it later. */
  hold(change: Change, config: ConfigRecord): boolean;
}

export interface Batch {
  workload: string;
  configs: string[];
  firstObservedAt: number;
  /** The latest observation in the batch: the reload's cutoff T is derived from it. */
  lastObservedAt: number;
}

export interface Timers {
  now(): number;
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => Date.now(),
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

interface Open {
  configs: Set<string>;
  firstAddedAt: number;
  firstObservedAt: number;
  lastObservedAt: number;
  timer: unknown;
}

export class Batcher implements ChangeSink {
  readonly #open = new Map<string, Open>();
  readonly #debounceMs: number;
  readonly #maxWaitMs: number;
  readonly #timers: Timers;
  readonly #onBatch: (b: Batch) => void;

  constructor(opts: { debounceMs: number; maxWaitMs: number; timers?: Timers; onBatch: (b: Batch) => void }) {
    this.#debounceMs = opts.debounceMs;
    this.#maxWaitMs = opts.maxWaitMs;
    this.#timers = opts.timers ?? realTimers;
    this.#onBatch = opts.onBatch;
  }

  add(change: Change): void {
    const now = this.#timers.now();
    let open = this.#open.get(change.workload);
    if (!open) {
      open = {
        configs: new Set(),
        firstAddedAt: now,
        firstObservedAt: change.observedAt,
        lastObservedAt: change.observedAt,
        timer: undefined,
      };
      this.#open.set(change.workload, open);
    } else {
      this.#timers.clear(open.timer);
    }
    open.configs.add(change.config);
    open.firstObservedAt = Math.min(open.firstObservedAt, change.observedAt);
    open.lastObservedAt = Math.max(open.lastObservedAt, change.observedAt);
    const debounce = change.debounceMs ?? this.#debounceMs;
    const maxWait = Math.max(this.#maxWaitMs, debounce);
    const fireAt = Math.min(now + debounce, open.firstAddedAt + maxWait);
    open.timer = this.#timers.set(() => this.#fire(change.workload), Math.max(0, fireAt - now));
  }

  /** Workloads with a batch still collecting changes. */
  get pending(): number {
    return this.#open.size;
  }

  /** Fires every open batch now (used at shutdown hand-back and in tests). */
  flush(): void {
    for (const w of [...this.#open.keys()]) this.#fire(w);
  }

  /** Drops every open batch without firing (on losing leadership: the next leader recomputes). */
  clear(): void {
    for (const open of this.#open.values()) this.#timers.clear(open.timer);
    this.#open.clear();
  }

  #fire(workload: string): void {
    const open = this.#open.get(workload);
    if (!open) return;
    this.#timers.clear(open.timer);
    this.#open.delete(workload);
    this.#onBatch({
      workload,
      configs: [...open.configs].sort(),
      firstObservedAt: open.firstObservedAt,
      lastObservedAt: open.lastObservedAt,
    });
  }
}
