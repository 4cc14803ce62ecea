// The exact-value figures of a bench run and what each must be (CI's check, bench/check-exact.ts).
// Pure, so what counts as a pass, a failure or a figure not measured is tested (exact.test.ts).

export type BenchResult = Record<string, unknown> & {
  skipped?: unknown;
  details?: {
    progressive?: { bad?: { expected_old_pods_replaced?: number; first_wave?: string[] } } | null;
  };
};

interface Exact {
  /** The phase that measures it: a run that skipped that phase has no figure to check. */
  phase?: string;
  want(r: BenchResult): number | undefined;
}

export const EXACT: Record<string, Exact> = {
  reloads_per_sync: { phase: 'precision', want: () => 1 },
  double_recycles: { want: () => 0 },
  spurious_reloads: { want: () => 0 },
  // Derived from the set-up by the phase (bench/progressive.ts, unit-tested): the first wave's
  // Deployments as the API server stored them, each stopping at its floor (0 for 2 replicas under the
  // default 25%/25%: maxUnavailable rounds down to 0, so only surge pods are added).
  bad_change_pods_replaced: {
    phase: 'progressive',
    want: (r) => r.details?.progressive?.bad?.expected_old_pods_replaced,
  },
  // The gate itself: only the first wave is touched, the other Deployments keep their pods. Without
  // it every Deployment would get surge pods, even where none loses an old pod.
  bad_change_deployments_touched: {
    phase: 'progressive',
    want: (r) => r.details?.progressive?.bad?.first_wave?.length,
  },
};

export interface ExactCheck {
  key: string;
  got: unknown;
  want: number | undefined;
  status: 'ok' | 'failed' | 'skipped';
  /** The phase the run skipped, when `skipped`. */
  phase?: string;
}

/** Each exact figure of `r`: ok, failed (wrong, or no expected value to compare), or its phase skipped. */
export function checkExact(r: BenchResult, exact: Record<string, Exact> = EXACT): ExactCheck[] {
  const skipped = new Set(Array.isArray(r.skipped) ? (r.skipped as unknown[]) : []);
  return Object.entries(exact).map(([key, e]) => {
    if (e.phase && skipped.has(e.phase))
      return { key, got: r[key], want: undefined, status: 'skipped', phase: e.phase };
    const want = e.want(r);
    const ok = typeof want === 'number' && r[key] === want;
    return { key, got: r[key], want, status: ok ? 'ok' : 'failed' };
  });
}
