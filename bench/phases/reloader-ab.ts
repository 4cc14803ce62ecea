// Reloader's load scenarios (the shapes of its test/loadtest S1, S2, S4, S6, S8), run side by side:
// gitops-reloader, then a peer binary (`--peer reloader=PATH`, Stakater Reloader v1.4.21), on the
// same control plane, each in its own namespace and with its own Deployments, one after the other,
// both through the counting API proxy. Skipped unless a peer is given; never part of `npm test` or
// the CI bench.
//
// Scenarios, each on Deployments (1 replica) annotated reloader.stakater.com/auto: "true" that read
// their ConfigMap through envFrom (both tools read that annotation):
//   burst    `burstChanges` changes of one ConfigMap within `burstWindowMs` (S1's burst)
//   fanout   one change of a ConfigMap `fanout` Deployments use (S2's shared ConfigMap)
//   noop     `noopWrites` writes that change only an annotation of the ConfigMap, not its data (S4)
//   restart  a change every 500 ms for 6 s, the tool stopped (SIGTERM) and started again 2 s in (S6)
//   large    one change each of `largeConfigs` ConfigMaps of 100 KB (S8)
// Per scenario and tool: reloads (reloader_reload_executed_total{success="true"}, which both export
// with the same meaning: one per workload reloaded), pods replaced (pods created for the scenario's
// Deployments after its first write), the time from the first write to the last new pod Ready, API
// requests through the proxy (all, and writes), and the tool's VmHWM (peak resident memory since it
// started; the restart scenario starts a new process). Figures are reported, never asserted: the
// expected counts differ by design (one reload per batch of changes; see bench/README.md).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { type Counts, diff, total } from '../api-proxy.ts';
import { createNodes, OWNER_ANNOTATION, owner, statusOf } from '../cluster.ts';
import { type Context, sleep, startService } from '../context.ts';
import { BENCH_LABEL, configData, deploymentObject } from '../fixture.ts';
import type { ServiceProcess } from '../service.ts';
import { round } from '../stats.ts';

export const AB_LABEL = 'gitops-reloader.io/bench-ab';
const AUTO = { 'reloader.stakater.com/auto': 'true' };
export const AB_SCENARIOS = ['burst', 'fanout', 'noop', 'restart', 'large'] as const;
export type AbScenario = (typeof AB_SCENARIOS)[number];

export interface AbSizes {
  burstChanges: number;
  burstWindowMs: number;
  fanout: number;
  noopWrites: number;
  largeConfigs: number;
  largeBytes: number;
  /** No new pod and no reload for this long after the last write: the scenario is over. */
  quietMs: number;
}

export const AB_SIZES: AbSizes = {
  burstChanges: 10,
  burstWindowMs: 2000,
  fanout: 50,
  noopWrites: 20,
  largeConfigs: 5,
  largeBytes: 100 * 1024,
  quietMs: 15_000,
};

export interface AbFigures {
  scenario: AbScenario;
  tool: string;
  /** Writes to ConfigMaps that change their data (noop: writes that do not). */
  changes: number;
  workloads: number;
  reloads: number;
  pods_replaced: number;
  reloads_per_change: number;
  pods_replaced_per_change: number;
  /** First write until the last new pod was Ready (null: no pod was replaced). */
  last_pod_replaced_s: number | null;
  api_requests: number;
  api_writes: number;
  api_by_verb: Counts;
  /** VmHWM of the tool's process after the scenario (the restart scenario's: the new process). */
  peak_rss_mib: number;
  /** restart only: a pod was created after the last change (the last data reached the pods). */
  last_change_applied?: boolean;
}

export interface AbResult {
  sizes: AbSizes;
  /** A tool whose run failed: its figures so far are kept. */
  errors: Array<{ tool: string; error: string }>;
  tools: string[];
  flags: Record<string, string[]>;
  figures: AbFigures[];
}

interface Tool {
  name: string;
  key: string;
  flags: string[];
  start(): Promise<void>;
  stop(): Promise<void>;
  pid(): number;
  /** reloader_reload_executed_total{success="true"} now. */
  reloads(): Promise<number>;
}

const hwmMiB = (pid: number) => {
  const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? round(Number(m[1]) / 1024, 1) : Number.NaN;
};

async function metricReloads(url: string): Promise<number> {
  return reloadsIn(await (await fetch(url)).text());
}

/** reloader_reload_executed_total{success="true"} in a Prometheus text exposition (both tools' name). */
export function reloadsIn(text: string): number {
  let n = 0;
  for (const line of text.split('\n')) {
    const m = /^reloader_reload_executed_total\{([^}]*)\}\s+([0-9.e+]+)/.exec(line);
    if (m && /success="true"/.test(m[1] as string)) n += Number(m[2]);
  }
  return n;
}

function ours(ctx: Context, o: { stop(label: string, s: ServiceProcess): Promise<void> }): Tool {
  let svc: ServiceProcess | undefined;
  // ANDed with the bench's own selector (the run's namespaces): only this tool's namespace.
  const flags = [`--namespace-selector=${AB_LABEL}=ours`];
  let n = 0;
  let label = '';
  return {
    name: 'gitops-reloader',
    key: 'ours',
    flags,
    async start() {
      label = `ab-ours-${n++}`;
      svc = await startService(ctx, { label, proxied: true, flags });
      await svc.waitReady(120_000);
      await svc.waitActing(120_000);
    },
    async stop() {
      if (svc) await o.stop(label, svc);
    },
    pid: () => svc?.pid ?? 0,
    async reloads() {
      if (!svc?.readyzUrl) throw new Error('the service has no HTTP port');
      return metricReloads(svc.readyzUrl.replace(/\/readyz$/, '/metrics'));
    },
  };
}

function peer(ctx: Context, name: string, binary: string): Tool {
  const say = ctx.say;
  let proc: ChildProcess | undefined;
  let out: string[] = [];
  const flags = [`--namespace-selector=${AB_LABEL}=peer`];
  const kubeconfig = path.join(ctx.workDir, 'proxy-peer.kubeconfig');
  return {
    name,
    key: 'peer',
    flags,
    async start() {
      writeFileSync(kubeconfig, ctx.proxy.kubeconfig, { mode: 0o600 });
      const deadline = Date.now() + 120_000;
      // Its metrics port is fixed (:9090); on this shared machine another process may hold it for a
      // while (a --reloader-compat test): start again until it is free.
      for (let started = false; !started; ) {
        out = [];
        const p = spawn(binary, flags, {
          env: { ...process.env, KUBECONFIG: kubeconfig },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        proc = p;
        const keep = (d: Buffer) => out.push(d.toString());
        p.stdout?.on('data', keep);
        p.stderr?.on('data', keep);
        const exited = new Promise((r) => p.on('close', r));
        // One "Starting Controller" line per resource it watches once its informers run; then it
        // binds :9090. Half a second without exiting after that: it serves.
        for (;;) {
          const text = out.join('');
          if (p.exitCode !== null) {
            await exited;
            if (/address already in use/.test(text) && Date.now() < deadline) {
              say(`${name}: :9090 is taken; starting again in 2 s`);
              await sleep(2_000);
              break;
            }
            throw new Error(`${name} exited: ${text.slice(-2000)}`);
          }
          if ((text.match(/Starting Controller/g) ?? []).length >= 2) {
            await sleep(500);
            if (p.exitCode === null) {
              started = true;
              break;
            }
            continue;
          }
          if (Date.now() > deadline) throw new Error(`${name} did not start: ${text.slice(-500)}`);
          await sleep(200);
        }
      }
      // It says nothing when its informers have synced; an update before that is read as an add.
      await sleep(5_000);
    },
    async stop() {
      if (proc && proc.exitCode === null) {
        const exited = new Promise((r) => proc?.on('close', r));
        proc.kill('SIGTERM');
        await exited;
      }
      writeFileSync(path.join(ctx.workDir, `peer-${name}.log`), out.join(''), { flag: 'a' });
    },
    pid: () => proc?.pid ?? 0,
    // Reloader serves its metrics on :9090.
    reloads: () => metricReloads('http://127.0.0.1:9090/metrics'),
  };
}

const isWrite = (k: string) => !/^(get|list|watch) /.test(k);

export async function reloaderAb(
  ctx: Context,
  o: {
    peer: { name: string; binary: string };
    sizes?: Partial<AbSizes>;
    stop(label: string, s: ServiceProcess): Promise<void>;
  },
): Promise<AbResult> {
  const sizes = { ...AB_SIZES, ...o.sizes };
  const { kube, names, say } = ctx;
  await createNodes(kube, names.run, 1, 'ab');
  // The service's release namespace (its Lease and ledger) and Argo CD's, when the fixture's set-up
  // did not run.
  for (const name of [names.system, names.argocd]) {
    await kube.core
      .createNamespace({
        body: {
          metadata: {
            name,
            labels: { [BENCH_LABEL]: names.run },
            annotations: { [OWNER_ANNOTATION]: owner() },
          },
        },
      })
      .catch((err: unknown) => {
        if (statusOf(err) !== 409) throw err;
      });
  }
  const tools = [ours(ctx, o), peer(ctx, o.peer.name, o.peer.binary)];
  const figures: AbFigures[] = [];
  const errors: AbResult['errors'] = [];
  for (const tool of tools) {
    try {
      await runTool(tool);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      say(`reloader-ab: ${tool.name} FAILED: ${error}`);
      errors.push({ tool: tool.name, error });
    }
  }
  return {
    sizes,
    errors,
    tools: tools.map((t) => t.name),
    flags: Object.fromEntries(tools.map((t) => [t.name, t.flags])),
    figures,
  };

  async function runTool(tool: Tool): Promise<void> {
    const ns = `grb-${names.run}-ab-${tool.key}`;
    await kube.core.createNamespace({
      body: {
        metadata: {
          name: ns,
          labels: { [BENCH_LABEL]: names.run, [AB_LABEL]: tool.key },
          annotations: { [OWNER_ANNOTATION]: owner() },
        },
      },
    });
    const cm = async (name: string, bytes: number) => {
      const body: V1ConfigMap = { metadata: { name, namespace: ns }, data: configData(bytes) };
      await kube.core.createNamespacedConfigMap({ namespace: ns, body });
    };
    const deploy = async (name: string, config: string) => {
      const body = deploymentObject({
        run: names.run,
        namespace: ns,
        name,
        replicas: 1,
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: config } }] },
      });
      await kube.apps.createNamespacedDeployment({ namespace: ns, body });
    };
    const apps: Record<AbScenario, string[]> = {
      burst: ['burst'],
      fanout: Array.from({ length: sizes.fanout }, (_, i) => `fan-${String(i).padStart(3, '0')}`),
      noop: ['noop'],
      restart: ['restart'],
      large: Array.from({ length: sizes.largeConfigs }, (_, i) => `large-${i}`),
    };
    say(
      `reloader-ab: ${tool.name}: creating its ConfigMaps and ${Object.values(apps).flat().length} Deployments in ${ns}`,
    );
    for (const s of ['burst', 'noop', 'restart'] as const) {
      await cm(s, 256);
      await deploy(s, s);
    }
    await cm('fanout', 256);
    for (const a of apps.fanout) await deploy(a, 'fanout');
    for (const a of apps.large) {
      await cm(a, sizes.largeBytes);
      await deploy(a, a);
    }
    const all = Object.values(apps).flat();
    await waitPods(ctx, ns, all, 300_000);
    say(`reloader-ab: ${tool.name}: starting (${tool.flags.join(' ')})`);
    await tool.start();
    try {
      for (const scenario of AB_SCENARIOS) {
        say(`reloader-ab: ${tool.name}: ${scenario}`);
        const before = await ctx.proxy.counts();
        const reloadsBefore = await tool.reloads();
        const t0 = Date.now();
        let changes = 0;
        let lastChange = t0;
        let reloadsOld = 0;
        const change = async (name: string, bytes = 256) => {
          await kube.core.patchNamespacedConfigMap({
            name,
            namespace: ns,
            body: [{ op: 'replace', path: '/data', value: configData(bytes, `${Date.now()}-`) }],
          });
          changes++;
          lastChange = Date.now();
        };
        if (scenario === 'burst') {
          const gap = sizes.burstWindowMs / Math.max(1, sizes.burstChanges - 1);
          for (let i = 0; i < sizes.burstChanges; i++) {
            await change('burst');
            if (i < sizes.burstChanges - 1) await sleep(gap);
          }
        } else if (scenario === 'fanout') {
          await change('fanout');
        } else if (scenario === 'noop') {
          for (let i = 0; i < sizes.noopWrites; i++) {
            await kube.core.patchNamespacedConfigMap({
              name: 'noop',
              namespace: ns,
              body: [{ op: 'add', path: '/metadata/annotations', value: { 'noop-counter': String(i) } }],
            });
            await sleep(100);
          }
          lastChange = Date.now();
        } else if (scenario === 'restart') {
          const end = Date.now() + 6_000;
          let restarted: Promise<void> | undefined;
          while (Date.now() < end) {
            await change('restart');
            if (!restarted && Date.now() - t0 >= 2_000) {
              // Stop and start the tool while the changes go on; the old process's reloads count too.
              restarted = (async () => {
                reloadsOld = (await tool.reloads()) - reloadsBefore;
                await tool.stop();
                await tool.start();
              })();
            }
            await sleep(500);
          }
          await restarted;
        } else {
          for (const a of apps.large) await change(a, sizes.largeBytes);
        }
        const changed = scenario === 'noop' ? sizes.noopWrites : changes;
        // Every Deployment whose config changed gets a new pod (ours starts the waves of a
        // progressive reload one settle period apart: a quiet spell alone would end too early).
        const replaced = scenario === 'noop' ? [] : apps[scenario];
        await settle(ctx, ns, apps[scenario], replaced, t0, lastChange, sizes.quietMs, 300_000);
        const after = await ctx.proxy.counts();
        const reloads =
          scenario === 'restart'
            ? reloadsOld + (await tool.reloads())
            : (await tool.reloads()) - reloadsBefore;
        const created = apps[scenario]
          .flatMap((a) => ctx.pods.ofApp(ns, a))
          .filter((p) => p.firstSeenAt >= t0);
        const readyAt = created.map((p) => p.readyAt ?? p.firstSeenAt);
        const d = diff(after, before);
        figures.push({
          scenario,
          tool: tool.name,
          changes: changed,
          workloads: apps[scenario].length,
          reloads,
          pods_replaced: created.length,
          reloads_per_change: round(reloads / Math.max(1, changed), 2),
          pods_replaced_per_change: round(created.length / Math.max(1, changed), 2),
          last_pod_replaced_s: readyAt.length ? round((Math.max(...readyAt) - t0) / 1000, 1) : null,
          api_requests: total(d),
          api_writes: total(d, isWrite),
          api_by_verb: d,
          peak_rss_mib: hwmMiB(tool.pid()),
          ...(scenario === 'restart'
            ? { last_change_applied: created.some((p) => p.firstSeenAt > lastChange) }
            : {}),
        });
      }
    } finally {
      await tool.stop();
    }
  }
}

/** Every Deployment of `apps` has one Ready pod. */
async function waitPods(ctx: Context, ns: string, apps: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = apps.filter((a) => !ctx.pods.live(ns, a).some((p) => p.ready));
    if (missing.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${missing.length} Deployments without a Ready pod in ${ns}`);
    await sleep(250);
  }
}

/**
 * The scenario is over when every Deployment of `replaced` has a pod created after `t0`, and, after
 * the last write, no pod of its Deployments was created, became Ready or went away for `quietMs`,
 * every Deployment with a Ready pod.
 */
async function settle(
  ctx: Context,
  ns: string,
  apps: string[],
  replaced: string[],
  t0: number,
  since: number,
  quietMs: number,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const waiting = replaced.filter((a) => !ctx.pods.ofApp(ns, a).some((p) => p.firstSeenAt >= t0));
    if (waiting.length > 0) {
      if (Date.now() > deadline)
        throw new Error(`${waiting.length} Deployments in ${ns} got no new pod within ${timeoutMs / 1000}s`);
      await sleep(250);
      continue;
    }
    const last = Math.max(
      since,
      ...apps.flatMap((a) =>
        ctx.pods
          .ofApp(ns, a)
          .flatMap((p) => [p.firstSeenAt, p.readyAt ?? 0, p.deletingAt ?? 0, p.goneAt ?? 0]),
      ),
    );
    const allReady = apps.every((a) => ctx.pods.live(ns, a).some((p) => p.ready));
    if (allReady && Date.now() - last >= quietMs) return;
    if (Date.now() > deadline) throw new Error(`pods in ${ns} did not settle within ${timeoutMs / 1000}s`);
    await sleep(250);
  }
}
