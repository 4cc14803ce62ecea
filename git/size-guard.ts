// Stops a git write whose working directory outgrows a limit, so a large repository fails with a
// clear error instead of filling the service's /tmp volume (and every other write with it). git has
// no client-side size limit for a clone, so the directory is measured while git runs.
import { lstat, readdir } from 'node:fs/promises';
import path from 'node:path';

/** Bytes under `dir`, files and symlinks themselves; entries that vanish mid-walk count as 0. */
export async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) total += await directoryBytes(p);
    else
      total += await lstat(p).then(
        (s) => s.size,
        () => 0,
      );
  }
  return total;
}

export interface SizeGuard {
  /** Aborted once the directory has been seen larger than the limit. */
  signal: AbortSignal;
  /** Set when the limit was exceeded: the size seen. */
  exceeded(): number | undefined;
  /** Measures now and aborts if over: git may finish before the next timed walk. */
  measure(): Promise<void>;
  stop(): void;
}

/** Measures `dir` every `everyMs` (one walk at a time) and aborts when it holds more than `maxBytes`. */
export function guardSize(dir: string, maxBytes: number, everyMs = 250): SizeGuard {
  const ac = new AbortController();
  let seen: number | undefined;
  let walking = false;
  const judge = (n: number) => {
    if (n > maxBytes && !ac.signal.aborted) {
      seen = n;
      ac.abort(new Error('size limit'));
    }
  };
  const timer = setInterval(() => {
    if (walking || ac.signal.aborted) return;
    walking = true;
    void directoryBytes(dir)
      .then(judge)
      .finally(() => {
        walking = false;
      });
  }, everyMs);
  timer.unref();
  return {
    signal: ac.signal,
    exceeded: () => seen,
    measure: async () => judge(await directoryBytes(dir)),
    stop: () => clearInterval(timer),
  };
}
