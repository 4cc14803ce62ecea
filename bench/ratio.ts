// Ours against the native controller: ratios of durations measured in the same run.
import { round } from './stats.ts';

/** The median of the values (mean of the middle two for an even count); NaN when there are none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  return Number.isInteger(mid)
    ? ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
    : (sorted[Math.floor(mid)] as number);
}

/** median(ours) / median(native), rounded; null when either side has no measurement. */
export function ratioOfMedians(
  ours: readonly number[],
  native: readonly number[],
  digits = 3,
): number | null {
  if (ours.length === 0 || native.length === 0) return null;
  const m = median(native);
  if (!(m > 0)) return null;
  return round(median(ours) / m, digits);
}

/** The median of the per-pair ratios ours/native (pairs measured back to back); null without pairs. */
export function medianPairRatio(
  pairs: ReadonlyArray<{ ours_s: number; native_s: number }>,
  digits = 3,
): number | null {
  const ratios = pairs.filter((p) => p.native_s > 0).map((p) => p.ours_s / p.native_s);
  return ratios.length === 0 ? null : round(median(ratios), digits);
}

/** Which side goes first in run `k` (0-based) of an alternating comparison: ours on even runs. */
export function oursFirst(k: number): boolean {
  return k % 2 === 0;
}
