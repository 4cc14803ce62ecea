// `npm run compat -- --migrate-chart PATH [--helm BIN]`: an optional check that the hand-written
// renders of Reloader's chart in test/compat/reloader-chart/ are what the real chart renders. For
// every value set it runs the real `helm template reloader PATH --namespace tools -f SET.values.yaml`
// (PATH: deployments/kubernetes/chart/reloader of Reloader's source, chart 2.2.16) and compares the
// parts the fixtures hold (the Reloader container's args and env, replicas, pod fields, object kinds)
// with SET.rendered.yaml, and with what migrate's own reading of the chart renders
// (service/migrate/reloader-chart.ts). Needs a helm binary (default: .cluster/bin/helm, built by
// `npm run cluster -- build`); never part of `npm test`, which uses the fixtures alone.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parse, parseAllDocuments } from 'yaml';
import { renderChart } from '../../service/migrate/reloader-chart.ts';
import { repoRoot } from '../cluster/paths.ts';

type Obj = Record<string, unknown>;
export const fixturesDir = path.join(repoRoot, 'test', 'compat', 'reloader-chart');

const docs = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && typeof o.kind === 'string');

/** The parts of a render the fixtures hold. */
export function relevant(objs: Obj[], kinds?: readonly string[]) {
  const dep = objs.find((o) => o.kind === 'Deployment') as {
    spec: { replicas: number; template: { spec: Obj & { containers: Obj[] } } };
  };
  const pod = dep.spec.template.spec;
  const c = pod.containers[0] as Obj;
  const pick = (o: Obj, keys: string[]) =>
    Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]]));
  const all = [...new Set(objs.map((o) => String(o.kind)))].sort();
  return {
    kinds: kinds ? all.filter((k) => kinds.includes(k)) : all,
    replicas: dep.spec.replicas,
    args: c.args ?? [],
    env: c.env,
    container: pick(c, ['resources', 'securityContext', 'volumeMounts']),
    pod: pick(pod, [
      'nodeSelector',
      'tolerations',
      'affinity',
      'priorityClassName',
      'runtimeClassName',
      'securityContext',
      'serviceAccountName',
      'volumes',
    ]),
  };
}

export function checkChart(chart: string, helm: string): { set: string; ok: boolean; diff: string }[] {
  const sets = readdirSync(fixturesDir)
    .filter((f) => f.endsWith('.values.yaml'))
    .map((f) => f.replace(/\.values\.yaml$/, ''))
    .sort();
  return sets.map((set) => {
    const valuesFile = path.join(fixturesDir, `${set}.values.yaml`);
    const real = docs(
      execFileSync(helm, ['template', 'reloader', chart, '--namespace', 'tools', '-f', valuesFile], {
        encoding: 'utf8',
      }),
    );
    const fixture = relevant(docs(readFileSync(path.join(fixturesDir, `${set}.rendered.yaml`), 'utf8')));
    const fromHelm = relevant(real, fixture.kinds);
    const ours = relevant(
      renderChart(parse(readFileSync(valuesFile, 'utf8')), 'tools').objects as Obj[],
      fixture.kinds,
    );
    const problems: string[] = [];
    for (const [k, v] of Object.entries(fromHelm)) {
      const f = (fixture as Record<string, unknown>)[k];
      const o = (ours as Record<string, unknown>)[k];
      if (!isDeepStrictEqual(v, f))
        problems.push(
          `  ${k}: helm ${JSON.stringify(v)}\n  ${' '.repeat(k.length)}  fixture ${JSON.stringify(f)}`,
        );
      if (!isDeepStrictEqual(v, o))
        problems.push(
          `  ${k}: helm ${JSON.stringify(v)}\n  ${' '.repeat(k.length)}  migrate ${JSON.stringify(o)}`,
        );
    }
    return { set, ok: problems.length === 0, diff: problems.join('\n') };
  });
}

export function runMigrateChartCheck(argv: string[]): number {
  let chart: string | undefined;
  let helm = path.join(repoRoot, '.cluster', 'bin', 'helm');
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--migrate-chart') chart = argv[++i];
    else if (a.startsWith('--migrate-chart=')) chart = a.slice('--migrate-chart='.length);
    else if (a === '--helm') helm = argv[++i] as string;
    else if (a.startsWith('--helm=')) helm = a.slice('--helm='.length);
    else throw new Error(`unknown argument ${a}; usage: npm run compat -- --migrate-chart PATH [--helm BIN]`);
  }
  if (!chart || !existsSync(path.join(chart, 'Chart.yaml')))
    throw new Error(
      `--migrate-chart needs the path of Reloader's chart directory (with Chart.yaml), not ${chart}`,
    );
  if (!existsSync(helm)) throw new Error(`no helm at ${helm}: pass --helm BIN`);
  const meta = parse(readFileSync(path.join(chart, 'Chart.yaml'), 'utf8')) as { version?: string };
  const results = checkChart(path.resolve(chart), helm);
  process.stdout.write(
    `Reloader chart ${meta.version ?? '?'} (${chart}) against test/compat/reloader-chart/:\n`,
  );
  for (const r of results)
    process.stdout.write(`${r.ok ? 'same' : 'DIFFERENT'}  ${r.set}\n${r.ok ? '' : `${r.diff}\n`}`);
  const bad = results.filter((r) => !r.ok).length;
  process.stdout.write(
    `${results.length - bad} of ${results.length} value sets: fixtures and migrate match helm template\n`,
  );
  return bad === 0 ? 0 : 1;
}
