// The reload deadline (--reload-deadline) measures progress, not total time: it passes only when the
// reload made no progress (no pod evicted, no surge pod created) for the whole period. A healthy slow
// restart (30 pods with a 20 s shutdown each) keeps making progress and is never cut; a reload that
// a PodDisruptionBudget blocks makes none and gives its slot back after one period (docs/adr/0028).

import type { Timers } from './batcher.ts';

export class ProgressDeadline {
  readonly #timers: Timers;
  readonly #periodMs: number;
  readonly #onExpire: () => void;
  #lastProgressAt: number;
  #timer: unknown;
  #done = false;
  #expired = false;

  /** Starts the period now; `onExpire` runs once, when a whole period passes without progress. */
  constructor(timers: Timers, periodMs: number, onExpire: () => void) {
    this.#timers = timers;
    this.#periodMs = periodMs;
    this.#onExpire = onExpire;
    this.#lastProgressAt = timers.now();
    this.#arm(periodMs);
  }

  /** The reload moved on: the period starts again from now. */
  progress(): void {
    if (this.#done) return;
    this.#lastProgressAt = this.#timers.now();
  }

  /** The reload ended (however): the deadline can no longer pass. */
  stop(): void {
    this.#done = true;
    this.#timers.clear(this.#timer);
    this.#timer = undefined;
  }

  /** True once the deadline passed (a reload that ended first never sees it pass). */
  get expired(): boolean {
    return this.#expired;
  }

  // One timer at a time: progress only moves the mark, and the timer re-arms itself for what is left
  // when it fires early, so a reload that replaces a pod a second costs no timer churn.
  #arm(ms: number): void {
    this.#timer = this.#timers.set(() => {
      const left = this.#lastProgressAt + this.#periodMs - this.#timers.now();
      if (left > 0) {
        this.#arm(left);
        return;
      }
      this.#done = true;
      this.#expired = true;
      this.#timer = undefined;
      this.#onExpire();
    }, ms);
  }
}
