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
  /**
   * The config's data is unchanged (its annotations or labels were edited). It dates no change: when
   * the batch already holds a change of that config, its time stands (see datingChange).
   */
  metadataOnly?: boolean;
  /** Released by the Argo CD gate when this sync ended: the reload's cause, for the status. */
  via?: SyncCause;
}

/** The Argo CD sync a reload followed: its Application (`namespace/name`) and sync revision. */
export interface SyncCause {
  app: string;
  revision?: string;
}

/** A change the gate holds until its Application's sync ends (for the status). */
export interface HeldChange {
  workload: string;
  config: string;
  /** The Application (`namespace/name`) whose sync it waits for. */
  app: string;
  /** When the change was observed (ms since epoch). */
  since: number;
}

/**
 * Which of two observations of one config dates its change: the later one, unless the later is a
 * metadata-only edit. A metadata edit after a data change must not move the cutoff past pods that
 * already read the new data (invariant I3; found by the engine simulation, seed 5449).
 */
export function datingChange<T extends Pick<Change, 'observedAt' | 'metadataOnly'>>(
  prev: T | undefined,
  next: T,
): T {
  if (prev === undefined) return next;
  if (next.metadataOnly && !prev.metadataOnly) return prev;
  if (prev.metadataOnly && !next.metadataOnly) return next;
  return prev.observedAt > next.observedAt ? prev : next;
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
  /**
   * Like hold, for a change a new term's start found: a hold the previous term kept in memory is
   * re-derived from a durable source (the Application's status), so a leader change releases nothing.
   */
  holdAtStart?(change: Change, config: ConfigRecord): boolean;
  /** True while a change of this config for this workload is held (the release reloads it). */
  holding?(workload: string, config: string): boolean;
  /** The changes held now, read-only (the status lists them as waiting for a sync). */
  held?(): Iterable<HeldChange>;
}

export interface Batch {
  workload: string;
  configs: string[];
  firstObservedAt: number;
  /** The latest observation in the batch, of any config. */
  lastObservedAt: number;
  /**
   * The latest observation of each config in `configs`. The reload's cutoff T comes from the configs
   * whose data really changed (see batchCutoffMs), not from every config the batch names.
   */
  observedAt: Record<string, number>;
  /** The configs of `configs` whose every observation in the batch was a metadata-only edit. */
  metadataOnly?: readonly string[];
  /** The Argo CD sync whose end released changes of this batch, if one did (the newest). */
  via?: SyncCause;
}

/** What batchCutoffMs knows beyond the batch. */
export interface CutoffContext {
  /** The cutoff of the newest reload planned for the workload, if any. */
  newestCutoffMs?: number | undefined;
  /** A config's newest write (creationTimestamp, managedFields; the API server's clock), when known. */
  writtenAtMs: (configId: string) => number | undefined;
  /** The cutoff for a change made at a time (core/cutoff.ts effectiveCutoff). */
  cutoffOf: (atMs: number) => number;
}

/**
 * The cutoff T of a reload planned from batch `b` for `changed`. Each changed config is dated by the
 * earlier of its observation in the batch (changeObservedAt; else the batch's latest observation) and
 * its newest write, an upper bound of its data change (as at start, docs/catch-up.md): a batch can
 * observe a change again long after it was made (a notification that lists it, a deletion of another
 * config, a template change), and dating it then would make the pods created since, which read it,
 * look old (I3; engine simulation seeds 7270, 8616). A config the batch saw only through a metadata
 * edit is dated by the newest planned reload. And never before the newest planned reload's
 * cutoff: this one carries that one's changes too (it targets the current digests), and an older
 * cutoff would be superseded by it and never run (seeds 711, 87).
 */
export function batchCutoffMs(b: Batch, changed: readonly string[], c: CutoffContext): number {
  if (changed.length === 0) return c.cutoffOf(b.lastObservedAt);
  let latest = c.newestCutoffMs ?? Number.NEGATIVE_INFINITY;
  for (const id of changed) {
    // Seen only through a metadata edit, whose write also moved the config's newest write: neither
    // dates its data change, which the newest planned reload already carries (it was planned when the
    // data change was seen, or found at start). Without one, the edit's time is the safe fallback.
    if (c.newestCutoffMs !== undefined && b.metadataOnly?.includes(id)) continue;
    const seen = b.observedAt[id] ?? b.lastObservedAt;
    const written = c.writtenAtMs(id);
    latest = Math.max(latest, c.cutoffOf(written === undefined ? seen : Math.min(written, seen)));
  }
  return latest;
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
  /** config → the observation that dates its change (datingChange). */
  configs: Map<string, Pick<Change, 'observedAt' | 'metadataOnly'>>;
  firstAddedAt: number;
  firstObservedAt: number;
  lastObservedAt: number;
  timer: unknown;
  via?: SyncCause;
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
        configs: new Map(),
        firstAddedAt: now,
        firstObservedAt: change.observedAt,
        lastObservedAt: change.observedAt,
        timer: undefined,
      };
      this.#open.set(change.workload, open);
    } else {
      this.#timers.clear(open.timer);
    }
    open.configs.set(change.config, datingChange(open.configs.get(change.config), change));
    open.firstObservedAt = Math.min(open.firstObservedAt, change.observedAt);
    open.lastObservedAt = Math.max(open.lastObservedAt, change.observedAt);
    if (change.via) open.via = change.via;
    const debounce = change.debounceMs ?? this.#debounceMs;
    const maxWait = Math.max(this.#maxWaitMs, debounce);
    const fireAt = Math.min(now + debounce, open.firstAddedAt + maxWait);
    open.timer = this.#timers.set(() => this.#fire(change.workload), Math.max(0, fireAt - now));
  }

  /** Workloads with a batch still collecting changes. */
  get pending(): number {
    return this.#open.size;
  }

  /** The batches still collecting changes, read-only (the status lists them as waiting: debounce). */
  *open(): Iterable<{ workload: string; configs: string[]; since: number }> {
    for (const [workload, o] of this.#open)
      yield { workload, configs: [...o.configs.keys()].sort(), since: o.firstAddedAt };
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
    const metadataOnly = [...open.configs].filter(([, o]) => o.metadataOnly).map(([c]) => c);
    this.#onBatch({
      workload,
      configs: [...open.configs.keys()].sort(),
      firstObservedAt: open.firstObservedAt,
      lastObservedAt: open.lastObservedAt,
      observedAt: Object.fromEntries([...open.configs].map(([c, o]) => [c, o.observedAt])),
      ...(metadataOnly.length > 0 ? { metadataOnly } : {}),
      ...(open.via ? { via: open.via } : {}),
    });
  }
}
