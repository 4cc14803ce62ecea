// Flapping configs (issue 24): a config changed `changes` times within `windowMs` is flapping; it is
// reported once per episode, naming the field managers whose writes made the changes (two controllers
// fighting over one Secret made Reloader's users 80,000 ReplicaSets, stakater/Reloader#1183). The
// restarts themselves are bounded by --min-reload-interval (core/work-queue.ts). Pure.

export interface FlapPolicy {
  /** Changes within the window that make a config flapping (≥ 2). */
  changes: number;
  windowMs: number;
}

export interface Flapping {
  config: string;
  changes: number;
  /** The field managers that wrote the changes of this episode, sorted. */
  writers: string[];
}

interface Episode {
  times: number[];
  writers: Set<string>;
  warned: boolean;
}

/** Sweep quiet configs out every this many observations: memory follows the configs that change. */
const SWEEP_EVERY = 256;

export class Flaps {
  readonly #p: FlapPolicy;
  readonly #seen = new Map<string, Episode>();
  #observed = 0;

  constructor(p: FlapPolicy) {
    if (!(p.changes >= 2)) throw new Error('a flap needs at least 2 changes');
    this.#p = p;
  }

  /** A data change of `config` at `at`, written by `writer`: the flap, the first time it is one. */
  observe(config: string, at: number, writer: string | undefined): Flapping | undefined {
    if (++this.#observed % SWEEP_EVERY === 0) this.#sweep(at);
    const since = at - this.#p.windowMs;
    let e = this.#seen.get(config);
    if (e) e.times = e.times.filter((t) => t > since);
    if (!e || e.times.length === 0) {
      e = { times: [], writers: new Set(), warned: false };
      this.#seen.set(config, e);
    }
    e.times.push(at);
    if (writer) e.writers.add(writer);
    // Only the last `changes` times matter.
    if (e.times.length > this.#p.changes) e.times.shift();
    if (e.warned || e.times.length < this.#p.changes) return undefined;
    e.warned = true;
    return { config, changes: e.times.length, writers: [...e.writers].sort() };
  }

  #sweep(at: number): void {
    const since = at - this.#p.windowMs;
    for (const [config, e] of this.#seen) if ((e.times.at(-1) ?? 0) <= since) this.#seen.delete(config);
  }

  get tracked(): number {
    return this.#seen.size;
  }
}
