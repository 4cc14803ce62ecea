// A ceiling of `limit` actions in any `windowMs` (the restart budget: pods replaced per minute).
// Unlike a token bucket, which lets a full burst and a full window's refill through together, no
// window of `windowMs` ever holds more than `limit` actions. A caller reserves its slot and is told
// how long to wait for it; reservations are served in the order they came. Pure (the clock is given).

export class WindowLimit {
  readonly limit: number;
  readonly windowMs: number;
  /** The times of the last `limit` reservations, in order (some may be in the future). */
  readonly #times: number[] = [];

  constructor(limit: number, windowMs: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be at least 1, got ${limit}`);
    if (!(windowMs > 0)) throw new RangeError(`window must be above 0, got ${windowMs}`);
    this.limit = limit;
    this.windowMs = windowMs;
  }

  /** Reserves a slot: 0 when it is now, else the ms until it. */
  reserve(now: number): number {
    const at = this.#next(now);
    this.#times.push(at);
    if (this.#times.length > this.limit) this.#times.shift();
    return at - now;
  }

  /**
   * Moves the reservation served at `at` to `used`, when the action it was for really happened (a
   * write answered later than its slot, on a busy API server): the window then counts from the
   * action, so no window of `windowMs` holds more than `limit` of them as the server dates them.
   */
  used(at: number, used: number): void {
    const i = this.#times.indexOf(at);
    if (i < 0 || used <= at) return;
    this.#times[i] = used;
    this.#times.sort((a, b) => a - b);
  }

  /** When a reservation made now would be served (without making it). */
  #next(now: number): number {
    if (this.#times.length < this.limit) return Math.max(now, this.#times.at(-1) ?? now);
    return Math.max(now, (this.#times[0] as number) + this.windowMs, this.#times.at(-1) ?? now);
  }

  /** True when no reservation is pending or inside the window: the limiter holds nothing. */
  idle(now: number): boolean {
    return (this.#times.at(-1) ?? Number.NEGATIVE_INFINITY) + this.windowMs <= now;
  }
}
