// CI's benchmark check: the exact-value figures of a bench run must be exact. Timings are not
// checked here (they are noisy on shared machines); they are recorded in bench/README.md.
//   node bench/check-exact.ts bench.json
import { readFileSync } from 'node:fs';

type Result = Record<string, unknown> & {
  skipped?: string[];
  details?: {
    progressive?: { bad?: { expected_old_pods_replaced?: number; first_wave?: string[] } } | null;
  };
};

interface Exact {
  /** The phase that measures it: a run that skipped that phase has no figure to check. */
  phase?: string;
  want(r: Result): number | undefined;
}

const expected: Record<string, Exact> = {
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
  // The gate itself: only the first wave is touched (the other Deployments keep their pods untouched).
  // Without it every Deployment would get surge pods, even where none loses an old pod.
  bad_change_deployments_touched: {
    phase: 'progressive',
    want: (r) => r.details?.progressive?.bad?.first_wave?.length,
  },
};

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node bench/check-exact.ts BENCH_JSON\n');
  process.exit(2);
}
const result = JSON.parse(readFileSync(file, 'utf8')) as Result;
const skipped = new Set(Array.isArray(result.skipped) ? result.skipped : []);
let failed = 0;
for (const [key, e] of Object.entries(expected)) {
  if (e.phase && skipped.has(e.phase)) {
    process.stdout.write(`bench: ${key} not measured (--skip ${e.phase})\n`);
    continue;
  }
  const got = result[key];
  const want = e.want(result);
  const ok = typeof want === 'number' && got === want;
  if (!ok) failed++;
  process.stdout.write(`bench: ${key} = ${JSON.stringify(got)} (expected ${want}) ${ok ? 'ok' : 'FAILED'}\n`);
}
const errors = Array.isArray(result.errors) ? result.errors : [];
if (errors.length > 0) {
  failed++;
  process.stdout.write(`bench: errors: ${JSON.stringify(errors)}\n`);
}
process.stdout.write(
  failed === 0 ? 'bench: every exact figure as expected\n' : `bench: ${failed} exact figure(s) wrong\n`,
);
process.exit(failed === 0 ? 0 : 1);
