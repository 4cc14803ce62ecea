// Polls a condition until it holds or a deadline passes. On timeout the error says what was
// awaited and the last thing seen, so a failing test explains itself. Tests never sleep.

export interface WaitOptions {
  /** What is being awaited, in words: "3 Ready pods in deployment web". */
  describe: string;
  timeout?: number;
  interval?: number;
}

/** The condition returns a value when satisfied, or `{ pending: <what it saw> }` to keep waiting. */
export interface Pending {
  pending: unknown;
}

export const pending = (seen: unknown): Pending => ({ pending: seen });

function isPending(v: unknown): v is Pending {
  return typeof v === 'object' && v !== null && 'pending' in v && Object.keys(v).length === 1;
}

function show(v: unknown): string {
  if (v instanceof Error) return v.message;
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

export async function waitFor<T>(
  condition: () => Promise<T | Pending> | T | Pending,
  opts: WaitOptions,
): Promise<T> {
  const timeout = opts.timeout ?? 30_000;
  const interval = opts.interval ?? 100;
  const deadline = Date.now() + timeout;
  let last: unknown = 'the condition was never evaluated';
  for (;;) {
    try {
      const r = await condition();
      if (!isPending(r)) return r;
      last = r.pending;
    } catch (err) {
      last = err;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeout} ms waiting for ${opts.describe}; last seen: ${show(last)}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}

/**
 * Waits until an object created now is stamped (whole seconds, as the API server stamps) in a later
 * second than `stampMs`: how a test makes pods certainly newer than a config's last write.
 */
export async function pastTheSecondOf(stampMs: number): Promise<void> {
  const next = Math.floor(stampMs / 1000) * 1000 + 1000;
  await waitFor(() => (Date.now() > next + 50 ? true : pending(new Date().toISOString())), {
    describe: `the clock past ${new Date(next).toISOString()}`,
    timeout: 5_000,
    interval: 20,
  });
}

/**
 * Waits until the clock is early in a second (its first 100 ms): objects created right after, back to
 * back (a config, then its workload, whose pods follow), are then most likely stamped in that second,
 * as one apply or sync stamps them. Callers check the stamps they rely on.
 */
export async function earlyInASecond(): Promise<void> {
  await waitFor(() => (Date.now() % 1000 < 100 ? true : pending(new Date().toISOString())), {
    describe: 'the clock early in a second',
    timeout: 5_000,
    interval: 5,
  });
}
