// Where the service's memory goes (issue 15): a fixture of N ConfigMaps + N Secrets (~2 KiB, 4 keys) and
// D Deployments that use them, as the bench builds them, then the compiled service started with the image's
// node flags, watching cluster-wide. It reports, at /readyz = 200 and after a period of idle churn of
// unreferenced configs: VmRSS, VmHWM, RssAnon/RssFile, resident memory by mapping kind (/proc/<pid>/smaps),
// process.memoryUsage() and V8's heap spaces (read inside the service by a tiny preload module on SIGUSR2),
// and optionally a heap snapshot summarised by constructor.
//   node bench/memory-probe.ts fixture --run A --configs 2000 --deployments 200 --namespaces 5
//   node bench/memory-probe.ts measure --run A [--steady-s 120] [--snapshot ready,steady] [--node-flag=--x ...]
//   node bench/memory-probe.ts clean --run A
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { connect, ensureApplicationCrd, type Kube, statusOf } from './cluster.ts';
import { type ConfigKind, configObject, workloadDeployment } from './fixture.ts';
import { freePort, ServiceProcess } from './service.ts';

const LABEL = 'gitops-reloader.io/mem-probe';
const say = (m: string) => process.stderr.write(`${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    run: { type: 'string', default: 'a' },
    /** fixture: the namespace label's value (several fixtures can share one service's scope). */
    scope: { type: 'string' },
    'service-arg': { type: 'string', multiple: true, default: [] },
    configs: { type: 'string', default: '2000' },
    deployments: { type: 'string', default: '200' },
    namespaces: { type: 'string', default: '5' },
    replicas: { type: 'string', default: '0' },
    'steady-s': { type: 'string', default: '0' },
    'churn-per-s': { type: 'string', default: '2' },
    snapshot: { type: 'string', default: '' },
    'node-flag': { type: 'string', multiple: true, default: [] },
    'replace-flags': { type: 'boolean', default: false },
    out: { type: 'string' },
    'trace-gc': { type: 'boolean', default: false },
    /** Another build's dist/service/cli.js (a before/after comparison). */
    cli: { type: 'string' },
  },
});
const run = values.run;
const nsName = (k: number) => `mp-${run}-w${String(k).padStart(2, '0')}`;
const sysNs = `mp-${run}-sys`;
const argoNs = `mp-${run}-argocd`;

async function pool<T>(items: T[], n: number, fn: (t: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) {
        const t = items[i++] as T;
        for (let attempt = 0; ; attempt++) {
          try {
            await fn(t);
            break;
          } catch (err) {
            if (statusOf(err) === 409) break;
            if (attempt > 5) throw err;
            await sleep(500 * (attempt + 1));
          }
        }
      }
    }),
  );
}

const slotName = (kind: ConfigKind, slot: number) =>
  `${kind === 'ConfigMap' ? 'cm' : 'sec'}-${String(slot).padStart(4, '0')}`;

async function fixture(kube: Kube) {
  const configs = Number(values.configs);
  const deployments = Number(values.deployments);
  const nss = Number(values.namespaces);
  const perNs = Math.ceil(configs / nss);
  const dPerNs = Math.ceil(deployments / nss);
  await ensureApplicationCrd(kube);
  for (const name of [...Array.from({ length: nss }, (_, k) => nsName(k)), sysNs, argoNs]) {
    await kube.core
      .createNamespace({ body: { metadata: { name, labels: { [LABEL]: values.scope ?? run } } } })
      .catch((e: unknown) => {
        if (statusOf(e) !== 409) throw e;
      });
  }
  const cfgs: Array<{ kind: ConfigKind; namespace: string; name: string }> = [];
  for (let k = 0; k < nss; k++)
    for (let s = 0; s < perNs; s++)
      for (const kind of ['ConfigMap', 'Secret'] as const)
        cfgs.push({ kind, namespace: nsName(k), name: slotName(kind, s) });
  const t0 = Date.now();
  say(`creating ${cfgs.length} configs`);
  await pool(cfgs, 20, (c) => {
    const body = configObject(c, 2048);
    return c.kind === 'ConfigMap'
      ? kube.core.createNamespacedConfigMap({ namespace: c.namespace, body })
      : kube.core.createNamespacedSecret({ namespace: c.namespace, body });
  });
  say(`configs in ${((Date.now() - t0) / 1000).toFixed(0)} s; creating ${deployments} Deployments`);
  const ds = [];
  for (let k = 0; k < nss; k++)
    for (let i = 0; i < dPerNs; i++) {
      const namespace = nsName(k);
      const c = (kind: ConfigKind, slot: number) => ({ kind, namespace, name: slotName(kind, slot) });
      ds.push(
        workloadDeployment(
          `mp-${run}`,
          {
            index: i,
            namespace,
            name: `d-${String(i).padStart(4, '0')}`,
            envFrom: c(i % 2 === 0 ? 'ConfigMap' : 'Secret', i),
            keyRef: c(i % 2 === 0 ? 'Secret' : 'ConfigMap', dPerNs + i),
            volume: c(i % 4 < 2 ? 'ConfigMap' : 'Secret', 2 * dPerNs + i),
          },
          Number(values.replicas),
        ),
      );
    }
  await pool(ds, 20, (d) =>
    kube.apps.createNamespacedDeployment({ namespace: d.metadata?.namespace as string, body: d }),
  );
  say(`fixture done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
}

const PRELOAD = `
import { writeFileSync, readFileSync } from 'node:fs';
import v8 from 'node:v8';
const dir = process.env.MEM_PROBE_DIR;
process.on('SIGUSR2', () => {
  let cmd = '';
  try { cmd = readFileSync(dir + '/cmd', 'utf8').trim(); } catch {}
  const [what, tag] = cmd.split(' ');
  if (what === 'snapshot') v8.writeHeapSnapshot(dir + '/' + tag + '.heapsnapshot');
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size, physical: s.physical_space_size }]));
  writeFileSync(dir + '/' + tag + '.stats.json', JSON.stringify({ memoryUsage: process.memoryUsage(), heap: v8.getHeapStatistics(), spaces }));
});
`;

const mib = (b: number) => Math.round((b / 1048576) * 10) / 10;

function procStatus(pid: number) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? 0) / 1024;
  return { VmRSS: kb('VmRSS'), VmHWM: kb('VmHWM'), RssAnon: kb('RssAnon'), RssFile: kb('RssFile') };
}

/** CPU seconds (user + system) the process has used so far (/proc/<pid>/stat, clock ticks of 10 ms). */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Resident MiB by mapping: [heap] (malloc), [stack], anon (V8 heap, mmap'd malloc arenas...), and files. */
function smaps(pid: number) {
  const text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  const out: Record<string, number> = {};
  let name = '';
  for (const line of text.split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const n = head[1] ?? '';
      name =
        n === ''
          ? 'anon'
          : n.startsWith('/')
            ? n.includes('node_modules') || n.endsWith('.js')
              ? 'file:js'
              : n.includes('/node')
                ? 'file:node binary'
                : 'file:other'
            : n;
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[name] = (out[name] ?? 0) + Number(rss[1]) / 1024;
  }
  for (const k of Object.keys(out)) out[k] = Math.round((out[k] as number) * 10) / 10;
  return out;
}

async function ask(svc: ServiceProcess, dir: string, tag: string, snapshot: boolean) {
  writeFileSync(path.join(dir, 'cmd'), `${snapshot ? 'snapshot' : 'stats'} ${tag}`);
  const file = path.join(dir, `${tag}.stats.json`);
  process.kill(svc.pid, 'SIGUSR2');
  for (let i = 0; i < 1200 && !existsSync(file); i++) await sleep(100);
  await sleep(100);
  const s = JSON.parse(readFileSync(file, 'utf8'));
  const mu = s.memoryUsage;
  const out: Record<string, unknown> = {
    memoryUsage_mib: Object.fromEntries(Object.entries(mu).map(([k, v]) => [k, mib(v as number)])),
    spaces_mib: Object.fromEntries(
      Object.entries(s.spaces as Record<string, { size: number; used: number; physical: number }>).map(
        ([k, v]) => [k, { size: mib(v.size), used: mib(v.used), physical: mib(v.physical) }],
      ),
    ),
    malloced_mib: mib(s.heap.malloced_memory),
    peak_malloced_mib: mib(s.heap.peak_malloced_memory),
  };
  if (snapshot) out.snapshot = summariseSnapshot(path.join(dir, `${tag}.heapsnapshot`));
  return out;
}

/** Self size by node type and constructor name, largest first. */
function summariseSnapshot(file: string) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const f: string[] = snap.snapshot.meta.node_fields;
  const types: string[] = snap.snapshot.meta.node_types[0];
  const nf = f.length;
  const iType = f.indexOf('type');
  const iName = f.indexOf('name');
  const iSize = f.indexOf('self_size');
  const nodes: number[] = snap.nodes;
  const strings: string[] = snap.strings;
  const by = new Map<string, { count: number; size: number }>();
  let total = 0;
  for (let i = 0; i < nodes.length; i += nf) {
    const type = types[nodes[i + iType] as number] as string;
    const size = nodes[i + iSize] as number;
    total += size;
    const key =
      type === 'object' || type === 'closure' || type === 'native' || type === 'hidden'
        ? `${type}:${(strings[nodes[i + iName] as number] ?? '').slice(0, 60)}`
        : type;
    const e = by.get(key) ?? { count: 0, size: 0 };
    e.count++;
    e.size += size;
    by.set(key, e);
  }
  const top = [...by.entries()]
    .sort((a, b) => b[1].size - a[1].size)
    .slice(0, 30)
    .map(([k, v]) => [k, v.count, mib(v.size)]);
  return { total_mib: mib(total), top };
}

async function measure(kube: Kube) {
  const dir = path.join(tmpdir(), `mem-probe-${run}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const preload = path.join(dir, 'preload.mjs');
  writeFileSync(preload, PRELOAD);
  const keyFile = path.join(dir, 'key');
  writeFileSync(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  process.env.MEM_PROBE_DIR = dir;
  const snaps = new Set(values.snapshot.split(',').filter(Boolean));
  const port = await freePort();
  const nodeFlags = [
    `--import=${preload}`,
    ...(values['node-flag'] ?? []),
    ...(values['trace-gc'] ? ['--trace-gc'] : []),
  ];
  const svc = new ServiceProcess(
    [
      `--kubeconfig=${kube.kubeconfigPath}`,
      `--namespace-selector=${LABEL}=${run}`,
      `--release-namespace=${sysNs}`,
      `--hash-key-file=${keyFile}`,
      `--argocd-namespaces=${argoNs}`,
      ...(values['service-arg'] ?? []),
    ],
    path.join(dir, 'service.log'),
    port,
    {
      extraNodeFlags: nodeFlags,
      replaceFlags: values['replace-flags'],
      ...(values.cli ? { cli: values.cli } : {}),
    },
  );
  const report: Record<string, unknown> = { run, dir, loadavg_start: (await import('node:os')).loadavg() };
  let peak = 0;
  const sampler = setInterval(() => {
    try {
      peak = Math.max(peak, svc.rssMiB());
    } catch {}
  }, 25);
  try {
    const ready = await svc.waitReady(600_000);
    const st = procStatus(svc.pid);
    report.ready = {
      ready_s: (ready.at - svc.startedAt) / 1000,
      cpu_s: cpuSeconds(svc.pid),
      status_mib: st,
      sampled_peak_mib: Math.round(Math.max(peak, st.VmRSS) * 10) / 10,
      smaps_mib: smaps(svc.pid),
      ...(await ask(svc, dir, 'ready', snaps.has('ready'))),
    };
    say(`ready: ${JSON.stringify(st)}`);
    const steadyS = Number(values['steady-s']);
    if (steadyS > 0) {
      const nss = Number(values.namespaces);
      const perNs = Math.ceil(Number(values.configs) / nss);
      const dPerNs = Math.ceil(Number(values.deployments) / nss);
      const free: Array<{ kind: ConfigKind; namespace: string; name: string }> = [];
      for (let s = 3 * dPerNs; s < perNs; s++)
        for (let k = 0; k < nss; k++)
          for (const kind of ['ConfigMap', 'Secret'] as const)
            free.push({ kind, namespace: nsName(k), name: slotName(kind, s) });
      const t0 = Date.now();
      const samples: Array<[number, number]> = [];
      let updates = 0;
      let nextSample = t0;
      const gap = 1000 / Number(values['churn-per-s']);
      while (Date.now() < t0 + steadyS * 1000) {
        const tick = t0 + updates * gap;
        if (tick > Date.now()) await sleep(tick - Date.now());
        const c = free[updates % Math.max(1, free.length)];
        if (!c) {
          await sleep(5000);
          samples.push([Math.round((Date.now() - t0) / 100) / 10, Math.round(svc.rssMiB() * 10) / 10]);
          continue;
        }
        const v = `changed-${Date.now()}-${randomBytes(96).toString('base64')}`;
        const body = [
          {
            op: 'add',
            path: `/data/k${updates % 4}`,
            value: c.kind === 'Secret' ? Buffer.from(v).toString('base64') : v,
          },
        ];
        if (c.kind === 'ConfigMap')
          await kube.core.patchNamespacedConfigMap({ name: c.name, namespace: c.namespace, body });
        else await kube.core.patchNamespacedSecret({ name: c.name, namespace: c.namespace, body });
        updates++;
        if (Date.now() >= nextSample) {
          samples.push([Math.round((Date.now() - t0) / 100) / 10, Math.round(svc.rssMiB() * 10) / 10]);
          nextSample += 5000;
        }
      }
      const last = samples
        .filter(([t]) => t >= steadyS * 0.75)
        .map(([, v]) => v)
        .sort((a, b) => a - b);
      report.steady = {
        after_s: steadyS,
        updates,
        rss_steady_mib: last[Math.floor(last.length / 2)],
        samples,
        status_mib: procStatus(svc.pid),
        cpu_s: cpuSeconds(svc.pid),
        smaps_mib: smaps(svc.pid),
        ...(await ask(svc, dir, 'steady', snaps.has('steady'))),
      };
      say(`steady: ${JSON.stringify(procStatus(svc.pid))}`);
    }
  } finally {
    clearInterval(sampler);
    await svc.stop();
  }
  report.loadavg_end = (await import('node:os')).loadavg();
  const json = JSON.stringify(report, null, 1);
  if (values.out) writeFileSync(values.out, json);
  process.stdout.write(`${json}\n`);
}

async function clean(kube: Kube) {
  const ns = await kube.core.listNamespace({ labelSelector: `${LABEL}=${run}` });
  for (const n of ns.items) await kube.core.deleteNamespace({ name: n.metadata?.name as string });
  say(`deleting ${ns.items.length} namespaces`);
}

async function main() {
  const kube = await connect(say);
  const cmd = positionals[0];
  if (cmd === 'fixture') await fixture(kube);
  else if (cmd === 'measure') await measure(kube);
  else if (cmd === 'clean') await clean(kube);
  else throw new Error('usage: memory-probe.ts fixture|measure|clean --run R ...');
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exit(1);
});
