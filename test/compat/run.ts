// `npm run compat [-- --peer reloader=PATH]`: runs the compatibility suite (test/compat/compat.test.ts)
// against gitops-reloader, then, when a peer binary is given, the same suite against it on the same
// control plane, one after the other, and writes the table of outcomes into
// docs/migrating-from-reloader.md. Without --peer it only runs gitops-reloader (as `npm test` does).
// Exit status: that of the gitops-reloader run (a peer's failures are in the table, not the status).
// `npm run compat -- --migrate-chart PATH` instead checks migrate's fixtures of Reloader's chart
// against real `helm template` of the chart at PATH (test/compat/migrate-chart.ts).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../cluster/paths.ts';
import { type Results, splice, table } from './table.ts';

function parseArgs(argv: string[]): { peers: Array<[string, string]>; write: boolean } {
  const peers: Array<[string, string]> = [];
  let write = true;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    const v = a.startsWith('--peer=') ? a.slice(7) : a === '--peer' ? argv[++i] : undefined;
    if (a === '--no-write') write = false;
    else if (v !== undefined) {
      const [name, bin] = v.split('=', 2);
      if (!name || !bin) throw new Error(`--peer takes NAME=PATH, not ${JSON.stringify(v)}`);
      peers.push([name, path.resolve(bin)]);
    } else
      throw new Error(`unknown argument ${a}; usage: npm run compat -- [--peer reloader=PATH] [--no-write]`);
  }
  return { peers, write };
}

function runSuite(env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const p = spawn(
      path.join(repoRoot, 'scripts', 'use-node.sh'),
      ['vitest', 'run', '--project', 'integration', 'test/compat/compat.test.ts'],
      { cwd: repoRoot, env: { ...process.env, ...env }, stdio: 'inherit' },
    );
    p.on('close', (code) => resolve(code ?? 1));
  });
}

if (process.argv.slice(2).some((a) => a.startsWith('--migrate-chart'))) {
  // The optional check of migrate's chart fixtures against the real chart (test/compat/migrate-chart.ts).
  const { runMigrateChartCheck } = await import('./migrate-chart.ts');
  process.exit(runMigrateChartCheck(process.argv.slice(2)));
}
const { peers, write } = parseArgs(process.argv.slice(2));
const dir = mkdtempSync(path.join(tmpdir(), 'compat-'));
const results: Results[] = [];
const ours = path.join(dir, 'gitops-reloader.json');
const read = (file: string, subject: string): Results =>
  existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Results) : { subject, rows: [] };
const status = await runSuite({ COMPAT_RESULTS: ours });
results.push(read(ours, 'gitops-reloader'));
for (const [name, bin] of peers) {
  const file = path.join(dir, `${name}.json`);
  await runSuite({ COMPAT_RESULTS: file, COMPAT_PEER: `${name}=${bin}` });
  results.push(read(file, name));
}
const body = table(results, new Date().toISOString().slice(0, 10));
process.stdout.write(`${body}\n`);
if (write && peers.length > 0) {
  const doc = path.join(repoRoot, 'docs', 'migrating-from-reloader.md');
  writeFileSync(doc, splice(readFileSync(doc, 'utf8'), body));
  process.stdout.write(`written to ${doc}\n`);
}
process.exitCode = status;
