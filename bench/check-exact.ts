// CI's benchmark check: the exact-value figures of a bench run must be exact. Timings are not
// checked here (they are noisy on shared machines); they are recorded in bench/README.md.
//   node bench/check-exact.ts bench.json
import { readFileSync } from 'node:fs';

const expected: Record<string, number> = { reloads_per_sync: 1, double_recycles: 0, spurious_reloads: 0 };

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node bench/check-exact.ts BENCH_JSON\n');
  process.exit(2);
}
const result = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
let failed = 0;
for (const [key, want] of Object.entries(expected)) {
  const got = result[key];
  const ok = got === want;
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
