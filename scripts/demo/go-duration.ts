// Go's time.Duration as Kubernetes objects write it (metav1.Duration: `1m2.5s`, `812.4ms`, `3µs`).

const UNIT_MS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 1e-3,
  µs: 1e-3,
  ns: 1e-6,
};

/** The duration in milliseconds; NaN for anything that is not one. */
export function goDurationMs(d: string): number {
  if (d === '0s') return 0;
  const parts = [...d.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== d) return Number.NaN;
  return parts.reduce((ms, p) => ms + Number(p[1]) * (UNIT_MS[p[2] as string] as number), 0);
}
