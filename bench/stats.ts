// Summaries of repeated measurements: {median, min, max} and nearest-rank percentiles.

export interface Spread {
  median: number;
  min: number;
  max: number;
  /** How many measurements the spread summarises. */
  n: number;
}

/** Nearest-rank percentile (p in 0..100) of the values; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

/** The median (mean of the middle two for an even count), min and max, rounded to `digits`. */
export function spread(values: readonly number[], digits = 3): Spread | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  const median = Number.isInteger(mid)
    ? ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
    : (sorted[Math.floor(mid)] as number);
  return {
    median: round(median, digits),
    min: round(sorted[0] as number, digits),
    max: round(sorted[sorted.length - 1] as number, digits),
    n: values.length,
  };
}

export function round(v: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}
