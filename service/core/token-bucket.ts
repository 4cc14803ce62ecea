// A token bucket: at most `burst` actions at once, then `qps` per second, first come first served.
// Like client-go's rate limiter and Go's rate.Limiter, a caller reserves a token and is told how long
// to wait for it; the bucket may go below zero, so each reservation's turn comes after every earlier
// one's and the long-run rate never exceeds qps. RateGate makes callers wait their turn (abortably).

import { realTimers, type Timers } from './batcher.ts';

export interface TokenBucketOptions {
  /** Tokens added per second. */
  qps: number;
  /** Most tokens held: how many actions may go out at once after a quiet period. */
  burst: number;
  now?: () => number;
}

export class TokenBucket {
  readonly qps: number;
  readonly burst: number;
  readonly #now: () => number;
  #tokens: number;
  #at: number;

  constructor(o: TokenBucketOptions) {
    if (!(o.qps > 0) || !Number.isFinite(o.qps)) throw new RangeError(`qps must be above 0, got ${o.qps}`);
    if (!Number.isInteger(o.burst) || o.burst < 1)
      throw new RangeError(`burst must be at least 1, got ${o.burst}`);
    this.qps = o.qps;
    this.burst = o.burst;
    this.#now = o.now ?? Date.now;
    this.#tokens = o.burst;
    this.#at = this.#now();
  }

  /** Takes one token: 0 when one is there now, else the ms until this caller's turn. */
  reserve(): number {
    const now = this.#now();
    this.#refill(now);
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens / this.qps) * 1000);
  }

  /** Tokens available now (negative: that many callers are already waiting for theirs). */
  available(): number {
    this.#refill(this.#now());
    return this.#tokens;
  }

  #refill(now: number): void {
    if (now > this.#at) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((now - this.#at) / 1000) * this.qps);
      this.#at = now;
    }
  }
}

export interface RateGateOptions extends TokenBucketOptions {
  timers?: Timers;
  /** Told of every pass: how long the caller waited, in ms (0 when a token was there). */
  onPass?: (waitedMs: number) => void;
}

/**
 * Callers `await gate.pass(signal)` before an action; at most `burst` pass at once, then `qps` per
 * second, in the order they came. One whose signal aborts while it waits is rejected with the
 * signal's reason and never passes (its token is not given back: the rate errs on the low side).
 */
export class RateGate {
  readonly bucket: TokenBucket;
  readonly #timers: Timers;
  readonly #onPass: ((waitedMs: number) => void) | undefined;
  #waiting = 0;

  constructor(o: RateGateOptions) {
    this.#timers = o.timers ?? realTimers;
    this.bucket = new TokenBucket({ ...o, now: o.now ?? (() => this.#timers.now()) });
    this.#onPass = o.onPass;
  }

  /** Callers waiting for their turn now. */
  get waiting(): number {
    return this.#waiting;
  }

  async pass(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const wait = this.bucket.reserve();
    if (wait <= 0) {
      this.#onPass?.(0);
      return;
    }
    this.#waiting++;
    try {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          this.#timers.clear(handle);
          reject(signal?.reason);
        };
        const handle = this.#timers.set(() => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }, wait);
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      this.#waiting--;
    }
    this.#onPass?.(wait);
  }
}
