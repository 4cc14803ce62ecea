// CI's benchmark check: the exact-value figures of a bench run must be exact (bench/exact.ts). Timings
// are not checked here (they are noisy on shared machines); they are recorded in bench/README.md.
//   node bench/check-exact.ts bench.json
import { readFileSync } from 'node:fs';
import { type BenchResult, checkExact } from './exact.ts';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node bench/check-exact.ts BENCH_JSON\n');
  process.exit(2);
}
const result = JSON.parse(readFileSync(file, 'utf8')) as BenchResult;
let failed = 0;
for (const c of checkExact(result)) {
  if (c.status === 'skipped') {
    process.stdout.write(`bench: ${c.key} not measured (--skip ${c.phase})\n`);
    continue;
  }
  if (c.status === 'failed') failed++;
  process.stdout.write(
    `bench: ${c.key} = ${JSON.stringify(c.got)} (expected ${c.want}) ${c.status === 'ok' ? 'ok' : 'FAILED'}\n`,
  );
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
