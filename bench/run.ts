// npm run bench -- [--scale small|full|tiny] [--out FILE] [--keep] [--skip PHASE,...] [--only PHASE,...]
//                   [--peer reloader=PATH]
//
// Builds the fixture in the run's own namespaces on the local control plane (or TEST_KUBECONFIG),
// runs gitops-reloader as a real child process through each phase, and prints ONE JSON object with
// the figures of the benchmarks issue (also written to --out). Progress goes to stderr. Timings are
// reported, never asserted; see bench/README.md for what each figure means and how it is measured.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../test/cluster/paths.ts';
import { startApiProxy } from './api-proxy.ts';
import { cleanUp, connect, ensureApplicationCrd, removeStale, serverVersion } from './cluster.ts';
import { type Context, SERVICE_DEFAULTS, startService } from './context.ts';
import { CLK_TCK } from './cpu.ts';
import { allocate, expectedPods, names, restartShapes } from './fixture.ts';
import { type BulkNativeRun, type BulkRun, bulk, bulkNative } from './phases/bulk.ts';
import { type FlapResult, flap } from './phases/flap.ts';
import { type HubResult, hub } from './phases/hub.ts';
import { type FleetResult, hubFleet } from './phases/hub-fleet.ts';
import { type LatencySample, latency } from './phases/latency.ts';
import { type PrecisionResult, precision } from './phases/precision.ts';
import { type ProgressiveResult, progressive } from './phases/progressive.ts';
import { AB_SIZES, type AbResult, type AbSizes, reloaderAb } from './phases/reloader-ab.ts';
import { type RestartShapeResult, restart } from './phases/restart.ts';
import { type SetupResult, setUp } from './phases/setup.ts';
import { type StartupRun, startup } from './phases/startup.ts';
import { type SteadyResult, steady } from './phases/steady.ts';
import { PodObserver } from './pods.ts';
import { gateCost } from './progressive.ts';
import { medianPairRatio, oursFirst, ratioOfMedians } from './ratio.ts';
import { ReloadLog } from './reloads.ts';
import { layout, SCALES, type ScaleName, scales } from './scale.ts';
import { buildService, hasHttpAddressFlag, type ServiceProcess } from './service.ts';
import { percentile, round, spread } from './stats.ts';

const PHASES = [
  'steady',
  'latency-default',
  'precision',
  'bulk',
  'flap',
  'latency',
  'restart',
  // The bad change alone is left when only 'progressive-good' (the two good changes' timings) is skipped.
  'progressive',
  'progressive-good',
  // Hub mode (issue 25): its own clusters, services and cleanup; independent of the fixture.
  'hub',
  // Reloader's load scenarios against gitops-reloader and a peer (issue 37); only with --peer.
  'reloader-ab',
  // Hub mode at fleet scale (issue 36): 3 replicas, many clusters; minutes of two cores, so not in CI.
  'hub-fleet',
] as const;
/** Phases with their own namespaces and services: they need neither the fixture nor its service. */
const STANDALONE: ReadonlySet<string> = new Set(['hub', 'hub-fleet', 'reloader-ab']);
type Phase = (typeof PHASES)[number];

const USAGE = `usage: npm run bench -- [--scale small|full|tiny] [--out FILE] [--keep] [--skip PHASE,...]
  --scale   fixture size (default small; full is the issue's fixture: do not run it on a shared machine)
  --out     also write the JSON to FILE
  --keep    leave the namespaces and nodes in place afterwards (for debugging)
  --skip    phases to leave out: ${PHASES.join(', ')}
  --only    run only these phases (the fixture is built only for phases that need it)
  --peer    NAME=PATH: a peer binary (Stakater Reloader) for reloader-ab, which is skipped without it`;

interface Args {
  scale: ScaleName;
  out?: string;
  keep: boolean;
  skip: Set<Phase>;
  peer?: { name: string; binary: string };
}

function parseArgs(argv: string[]): Args {
  const a: Args = { scale: 'small', keep: false, skip: new Set() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const [flag, inline] = arg.includes('=')
      ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
      : [arg, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new Error(`${flag} needs a value\n${USAGE}`);
      return v;
    };
    switch (flag) {
      case '--scale': {
        const v = value();
        if (!(SCALES as readonly string[]).includes(v))
          throw new Error(`invalid --scale ${JSON.stringify(v)}\n${USAGE}`);
        a.scale = v as ScaleName;
        break;
      }
      case '--out':
        a.out = path.resolve(value());
        break;
      case '--keep':
        a.keep = true;
        break;
      case '--skip':
        for (const p of value().split(',').filter(Boolean)) {
          if (!(PHASES as readonly string[]).includes(p))
            throw new Error(`unknown phase ${JSON.stringify(p)}\n${USAGE}`);
          a.skip.add(p as Phase);
        }
        break;
      case '--only': {
        const only = value().split(',').filter(Boolean);
        for (const p of only)
          if (!(PHASES as readonly string[]).includes(p))
            throw new Error(`unknown phase ${JSON.stringify(p)}\n${USAGE}`);
        for (const p of PHASES) if (!only.includes(p)) a.skip.add(p);
        break;
      }
      case '--peer': {
        const v = value();
        const [name, binary] = [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)];
        if (!v.includes('=') || !name || !binary)
          throw new Error(`--peer takes NAME=PATH, not ${JSON.stringify(v)}\n${USAGE}`);
        a.peer = { name, binary: path.resolve(binary) };
        break;
      }
      case '--help':
      case '-h':
        process.stderr.write(`${USAGE}\n`);
        process.exit(0);
        break;
      default:
        throw new Error(`unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
    }
  }
  if (!a.peer) a.skip.add('reloader-ab');
  return a;
}

/** reloader-ab's sizes per scale: the (full, small) or a smoke test's (tiny). */
const AB_SIZES_FOR: Record<ScaleName, Partial<AbSizes>> = {
  full: AB_SIZES,
  small: AB_SIZES,
  tiny: { fanout: 10, noopWrites: 10, largeConfigs: 2 },
};

const t0 = Date.now();
const say = (msg: string) =>
  process.stderr.write(`[bench +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}\n`);

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: repoRoot, encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

function target(value: number | null | undefined, op: '<=' | '=', limit: number) {
  const met =
    value === null || value === undefined || Number.isNaN(value)
      ? null
      : op === '<='
        ? value <= limit
        : value === limit;
  return { target: `${op} ${limit}`, value: value ?? null, met };
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const scale = scales[args.scale];
  const { configsPerNs, deploymentsPerNs } = layout(scale);
  const run = randomBytes(3).toString('hex');
  const workDir = path.join(os.tmpdir(), `gitops-reloader-bench-${run}`);
  mkdirSync(workDir, { recursive: true });
  const hashKeyFile = path.join(workDir, 'hash-key');
  writeFileSync(hashKeyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  say(`run ${run}, scale ${scale.name}; service logs in ${workDir}`);

  say('building the service (dist/), which is what the bench runs, as the image does');
  buildService();
  const kube = await connect(say);
  await removeStale(kube, say);
  await ensureApplicationCrd(kube);
  const proxy = await startApiProxy(kube.kubeconfigPath);
  const n = names(run, scale);
  const ctx: Context = {
    kube,
    scale,
    names: n,
    alloc: allocate(scale),
    pods: new PodObserver(kube.kc, run),
    reloads: new ReloadLog(),
    proxy,
    workDir,
    hashKeyFile,
    readyz: hasHttpAddressFlag(),
    say,
    services: [],
  };
  const loadStart = os.loadavg();
  const errors: Array<{ phase: string; error: string }> = [];
  const phaseSeconds: Record<string, number> = {};
  let cleanedUp = false;
  let cleanup: { seconds: number; complete: boolean } | undefined;
  const tearDown = async () => {
    if (cleanedUp) return;
    cleanedUp = true;
    for (const s of ctx.services) s.kill();
    ctx.pods.stop();
    await proxy.stop();
    if (args.keep) say(`--keep: leaving namespaces grb-${run}-* and nodes grb-${run}-node-* in place`);
    else {
      say('cleaning up: deleting the run namespaces, then its nodes');
      cleanup = await cleanUp(kube, run, say, scale.name === 'full' ? 20 * 60_000 : 5 * 60_000);
      say(`cleanup took ${cleanup.seconds.toFixed(1)}s${cleanup.complete ? '' : ' (incomplete)'}`);
    }
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      say(`${sig}: stopping`);
      void tearDown().finally(() => process.exit(130));
    });
  }

  const phase = async <T>(name: string, fn: () => Promise<T>): Promise<T | undefined> => {
    const start = Date.now();
    say(`— ${name}`);
    try {
      return await fn();
    } catch (err) {
      const msg = err instanceof Error ? err.message : String(err);
      errors.push({ phase: name, error: msg });
      say(`${name} FAILED: ${msg}`);
      return undefined;
    } finally {
      phaseSeconds[name] = round((Date.now() - start) / 1000, 1);
    }
  };
  const skip = (p: Phase) => args.skip.has(p);

  let setup: SetupResult | undefined;
  let startupRuns: StartupRun[] = [];
  let steadyResult: SteadyResult | undefined;
  let latencyDefault: LatencySample[] | undefined;
  let precisionResult: PrecisionResult | undefined;
  const bulkRuns: BulkRun[] = [];
  const bulkNativeRuns: BulkNativeRun[] = [];
  let flapResult: FlapResult | undefined;
  let latency0: LatencySample[] | undefined;
  const restartResults: RestartShapeResult[] = [];
  let progressiveResult: ProgressiveResult | undefined;
  let hubResult: HubResult | undefined;
  let abResult: AbResult | undefined;
  const needsFixture = PHASES.some((p) => !STANDALONE.has(p) && !args.skip.has(p));
  let fleetResult: FleetResult | undefined;
  const exitCodes: Record<string, number | null> = {};
  const stopService = async (label: string, svc: ServiceProcess) => {
    exitCodes[label] = await svc.stop();
    if (exitCodes[label] !== 0)
      errors.push({ phase: label, error: `the service exited with ${exitCodes[label]} on SIGTERM` });
  };

  try {
    if (needsFixture) setup = await phase('setup', () => setUp(ctx));
    else await ctx.pods.start();
    // Without a fixture there is nothing to measure; the JSON still reports the error.
    const started = setup ? await phase('startup', () => startup(ctx)) : undefined;
    // A start-up that failed half-way may have left a process behind (holding the lease).
    if (!started) for (const s of ctx.services) s.kill();
    if (started) {
      startupRuns = started.runs;
      const svc = started.service;
      if (!skip('steady')) steadyResult = await phase('steady', () => steady(ctx, svc));
      if (!skip('latency-default'))
        latencyDefault = await phase('latency-default', () =>
          latency(ctx, ctx.alloc.latencyDefault, 120_000),
        );
      if (!skip('precision')) precisionResult = await phase('precision', () => precision(ctx));
      if (!skip('bulk')) {
        // Ours and the native rolling update of an identical set, alternately first.
        for (const [r, indices] of ctx.alloc.bulk.entries()) {
          const ours = async () => {
            const b = await phase(`bulk-${r + 1}`, () => bulk(ctx, indices));
            if (b) bulkRuns.push(b);
          };
          const native = async () => {
            const nativeIndices = ctx.alloc.bulkNative[r] as number[];
            const b = await phase(`bulk-native-${r + 1}`, () => bulkNative(ctx, nativeIndices));
            if (b) bulkNativeRuns.push(b);
          };
          if (oursFirst(r)) {
            await ours();
            await native();
          } else {
            await native();
            await ours();
          }
        }
      }
      if (!skip('flap')) flapResult = await phase('flap', () => flap(ctx));
      await stopService('default-service', svc);
    }

    if (setup && (!skip('latency') || !skip('restart'))) {
      const svc0 = await phase('start debounce-0 service', async () => {
        const s = await startService(ctx, {
          label: 'debounce-0',
          proxied: false,
          flags: ['--debounce=0s', '--min-reload-interval=0s'],
        });
        await s.waitReady(15 * 60_000);
        await s.waitActing(15 * 60_000);
        return s;
      });
      if (svc0) {
        if (!skip('latency'))
          latency0 = await phase('latency', () => latency(ctx, ctx.alloc.latency, 60_000));
        if (!skip('restart')) {
          for (const shape of restartShapes(scale)) {
            const r = await phase(`restart ${shape.key}`, () => restart(ctx, shape));
            if (r) restartResults.push(r);
          }
        }
        await stopService('debounce-0-service', svc0);
      }
    }

    // Last: its services run with other flags, and a halted change stays in the ledger.
    if (setup && !skip('progressive'))
      progressiveResult = await phase('progressive', () =>
        progressive(ctx, { good: !skip('progressive-good'), stop: stopService }),
      );

    // Its own namespaces, nodes and services; needs nothing of the fixture.
    if (!skip('hub')) hubResult = await phase('hub', () => hub(ctx, { stop: stopService }));

    // Reloader's load scenarios, gitops-reloader then the peer, each in its own namespace.
    if (!skip('reloader-ab') && args.peer) {
      const peer = args.peer;
      abResult = await phase('reloader-ab', () =>
        reloaderAb(ctx, {
          peer,
          stop: stopService,
          ...(scale.name === 'full' ? {} : { sizes: AB_SIZES_FOR[scale.name] }),
        }),
      );
      for (const e of abResult?.errors ?? []) errors.push({ phase: `reloader-ab ${e.tool}`, error: e.error });
    }
    if (!skip('hub-fleet'))
      fleetResult = await phase('hub-fleet', () => hubFleet(ctx, fleetOptions(stopService)));
  } finally {
    await tearDown();
  }

  const spurious = ctx.reloads.spurious();
  const doubles = ctx.reloads.doubleRecycles(ctx.pods);
  const restarts = startupRuns.filter((r) => !r.first_install);
  const direct = restarts.filter((r) => !r.proxied);
  const proxied = restarts.filter((r) => r.proxied);
  const firstInstall = startupRuns.find((r) => r.first_install);
  const lat0 = latency0?.map((x) => x.latency_ms) ?? [];
  const latD = latencyDefault?.map((x) => x.latency_ms) ?? [];
  // Per shape: the median of the pairs' ratios; null for a shape that was skipped or failed.
  const restartRatio = Object.fromEntries(
    restartShapes(scale).map((shape) => {
      const r = restartResults.find((x) => x.shape === shape.key);
      return [shape.key, r ? medianPairRatio(r.pairs) : null];
    }),
  );
  const bulkRatio = ratioOfMedians(
    bulkRuns.map((b) => b.seconds),
    bulkNativeRuns.map((b) => b.seconds),
  );
  const firstActionP50 = lat0.length ? percentile(lat0, 50) : null;
  const firstActionP99 = lat0.length ? percentile(lat0, 99) : null;
  const rssReady = spread(
    direct.map((r) => r.rss_ready_mib),
    1,
  );
  const rssSteady = spread(steadyResult?.steady_samples_mib ?? [], 1);
  const perPod = spread(bulkRuns.map((b) => b.api_requests_per_pod));
  const prog = progressiveResult;
  const gate =
    prog?.good_on && prog.good_off
      ? gateCost(prog.good_on.seconds, prog.good_off.seconds, prog.settings.settle_s)
      : null;
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  const clientPkg = JSON.parse(
    readFileSync(path.join(repoRoot, 'node_modules', '@kubernetes', 'client-node', 'package.json'), 'utf8'),
  ) as { version: string };
  const cpus = os.cpus();

  const result = {
    bench: 'gitops-reloader',
    scale: scale.name,
    run,
    started_at: new Date(t0).toISOString(),
    duration_s: round((Date.now() - t0) / 1000, 1),
    startup_ready_s: spread(direct.map((r) => r.ready_s)),
    rss_ready_mib: rssReady,
    rss_steady_mib: rssSteady,
    steady_after_s: steadyResult?.after_s ?? null,
    cpu_steady_s: steadyResult?.cpu_s ?? null,
    startup_api_requests: spread(proxied.flatMap((r) => r.api_requests ?? [])),
    first_action_p50_ms: firstActionP50,
    first_action_p99_ms: firstActionP99,
    first_action_samples: lat0.length,
    latency_default_p50_ms: latD.length ? percentile(latD, 50) : null,
    latency_default_samples: latD.length,
    reloads_per_sync: precisionResult ? round(precisionResult.sync_reloads / precisionResult.syncs, 3) : null,
    double_recycles: doubles.length,
    spurious_reloads: spurious.length,
    api_requests_per_pod: perPod,
    restart_vs_native_ratio: restartRatio,
    bulk_100_s: spread(
      bulkRuns.map((b) => b.seconds),
      2,
    ),
    bulk_100_vs_native_ratio: bulkRatio,
    bulk_deployments: scale.bulkDeployments,
    flap_reloads: flapResult?.reloads ?? null,
    // Issue 24: one ConfigMap shared by progressive_deployments Deployments.
    bad_change_pods_replaced: prog?.bad.old_pods_replaced ?? null,
    bad_change_deployments_touched: prog?.bad.deployments_touched ?? null,
    good_change_bulk_s: prog?.good_on?.seconds ?? null,
    good_change_bulk_off_s: prog?.good_off?.seconds ?? null,
    good_change_gate: gate,
    progressive_deployments: prog?.deployments ?? null,
    // Issue 25: hub mode, per number of served clusters, and the failover of a replica's clusters.
    hub: hubResult ?? null,
    // Issue 37: Reloader's load scenarios, gitops-reloader and the peer side by side.
    reloader_ab: abResult ?? null,
    // Issue 36: hub mode with 3 replicas and many clusters; this build against BENCH_HUB_BASELINE_CLI's.
    hub_fleet: fleetResult ?? null,
    skipped: [...args.skip],
    // Issue 15's targets, then the earlier ones of figures issue 15 does not set.
    targets: {
      applies_at: 'full',
      rss_ready_mib: target(rssReady?.median, '<=', 120),
      rss_steady_mib: target(rssSteady?.median, '<=', 70),
      first_action_p50_ms: target(firstActionP50, '<=', 30),
      first_action_p99_ms: target(firstActionP99, '<=', 100),
      restart_vs_native_ratio: Object.fromEntries(
        Object.entries(restartRatio).map(([shape, v]) => [shape, target(v, '<=', 1.0)]),
      ),
      bulk_100_vs_native_ratio: target(bulkRatio, '<=', 1.5),
      reloads_per_sync: target(
        precisionResult ? precisionResult.sync_reloads / precisionResult.syncs : null,
        '=',
        1,
      ),
      double_recycles: target(doubles.length, '=', 0),
      spurious_reloads: target(spurious.length, '=', 0),
      startup_ready_s: target(spread(direct.map((r) => r.ready_s))?.median, '<=', 15),
      api_requests_per_pod: target(perPod?.median, '<=', 4),
      // Issue 24's: the expected value comes from the set-up (bench/progressive.ts).
      bad_change_pods_replaced: target(
        prog?.bad.old_pods_replaced,
        '=',
        prog?.bad.expected_old_pods_replaced ?? Number.NaN,
      ),
      bad_change_deployments_touched: target(
        prog?.bad.deployments_touched,
        '=',
        prog?.bad.first_wave.length ?? Number.NaN,
      ),
      good_change_gate_s: target(gate?.difference_s, '<=', prog?.settings.settle_s ?? Number.NaN),
    },
    details: {
      fixture: {
        namespaces: scale.namespaces,
        configmaps: scale.configsPerKind,
        secrets: scale.configsPerKind,
        config_bytes: scale.configBytes,
        configs_per_namespace: configsPerNs * 2,
        deployments: scale.deployments,
        deployments_per_namespace: deploymentsPerNs,
        replicas: scale.replicas,
        pods: expectedPods(scale),
        references: 'per Deployment: envFrom (every key), a valueFrom key ref (k0), a volume (every key)',
        kwok_nodes: setup?.nodes ?? null,
        setup_s: setup ? round(setup.total_s, 1) : null,
        setup,
      },
      service: {
        flags_default:
          'defaults (debounce 3s, min-reload-interval 10s, max-concurrent-reloads 20, api-write-qps 20, api-write-burst 30, leader election on)',
        flags_debounce0: '--debounce=0s --min-reload-interval=0s',
        scope: 'cluster-wide watches, --namespace-selector for the run namespaces',
        ready_signal: startupRuns[0]?.ready_signal ?? null,
        exit_codes: exitCodes,
        defaults_assumed: SERVICE_DEFAULTS,
      },
      startup: {
        readyz_means: 'caches synced (leader election on: acting comes later, see acting_s)',
        acting_s: spread(direct.map((r) => r.acting_s)),
        rss_acting_mib: spread(
          direct.map((r) => r.rss_acting_mib),
          1,
        ),
        cpu_ready_s: spread(
          direct.map((r) => r.cpu_ready_s),
          2,
        ),
        cpu_acting_s: spread(
          direct.map((r) => r.cpu_acting_s),
          2,
        ),
        cpu_clock_ticks_assumed: CLK_TCK,
        proxied_ready_s: spread(proxied.map((r) => r.ready_s)),
        proxied_acting_s: spread(proxied.map((r) => r.acting_s)),
        first_install: firstInstall ?? null,
        restarts,
      },
      steady: steadyResult
        ? {
            churn: `${scale.churnPerS} updates/s of unreferenced ConfigMaps and Secrets`,
            churn_updates: steadyResult.churn_updates,
            rss_peak_mib: round(steadyResult.peak_mib, 1),
            cpu_s: steadyResult.cpu_s,
            cpu_clock_ticks_assumed: CLK_TCK,
            rss_samples_mib: steadyResult.samples_mib,
          }
        : null,
      latency: latency0
        ? {
            figures:
              'first_action_p50_ms, first_action_p99_ms (called latency_p50_ms, latency_p99_ms before issue 15)',
            service: 'debounce 0, straight to the API server (no proxy)',
            p90_ms: percentile(lat0, 90),
            max_ms: Math.max(...lat0),
            to_reload_started_p50_ms: percentile(
              latency0.flatMap((x) => x.to_reload_started_ms ?? []),
              50,
            ),
            samples: latency0,
          }
        : null,
      latency_default: latencyDefault
        ? {
            service: 'default flags (debounce 3s), through the counting proxy',
            to_reload_started_p50_ms: percentile(
              latencyDefault.flatMap((x) => x.to_reload_started_ms ?? []),
              50,
            ),
            samples: latencyDefault,
          }
        : null,
      precision: precisionResult
        ? {
            ...precisionResult,
            reloads_per_burst_without_argocd: round(
              precisionResult.burst_reloads / Math.max(1, precisionResult.bursts),
              3,
            ),
            double_recycled_pods: doubles,
            spurious: spurious.map((w) => ({ workload: w.key, process: w.process })),
          }
        : {
            double_recycled_pods: doubles,
            spurious: spurious.map((w) => ({ workload: w.key, process: w.process })),
          },
      bulk: bulkRuns,
      bulk_native: {
        how: 'the same number of Deployments, not opted in, rolled by a kubectl.kubernetes.io/restartedAt template patch on all of them at once',
        ours_s: spread(bulkRuns.map((b) => b.seconds)),
        native_s: spread(bulkNativeRuns.map((b) => b.seconds)),
        runs: bulkNativeRuns,
      },
      restart: Object.fromEntries(
        restartResults.map((r) => [
          r.shape,
          {
            replicas: r.replicas,
            strategy: r.strategy,
            ratio: spread(r.pairs.map((p) => p.ratio)),
            ours_s: spread(r.pairs.map((p) => p.ours_s)),
            native_s: spread(r.pairs.map((p) => p.native_s)),
            ours_from_first_action_s: spread(r.pairs.map((p) => p.ours_from_first_action_s)),
            ratio_from_first_action: spread(r.pairs.map((p) => p.ours_from_first_action_s / p.native_s)),
            pairs: r.pairs,
          },
        ]),
      ),
      flap: flapResult,
      progressive: prog ?? null,
      reloads_total: ctx.reloads.windows.length,
      reload_failures: ctx.reloads.windows.filter((w) => w.failedAt !== undefined).length,
      pod_watch_restarts: ctx.pods.restarts,
      phase_seconds: phaseSeconds,
      cleanup: cleanup ?? null,
      service_logs: workDir,
    },
    machine: {
      cpus: cpus.length,
      cpu_model: cpus[0]?.model ?? null,
      memory_gib: round(os.totalmem() / 2 ** 30, 1),
      kernel: os.release(),
      loadavg_start: loadStart.map((x) => round(x, 2)),
      loadavg_end: os.loadavg().map((x) => round(x, 2)),
    },
    versions: {
      'gitops-reloader': pkg.version,
      commit: gitCommit() ?? null,
      node: process.version,
      'kube-apiserver': await serverVersion(kube).catch(() => null),
      '@kubernetes/client-node': clientPkg.version,
    },
    errors,
  };
  const text = `${JSON.stringify(result, null, 2)}\n`;
  if (args.out) {
    mkdirSync(path.dirname(args.out), { recursive: true });
    writeFileSync(args.out, text);
    say(`written to ${args.out}`);
  }
  process.stdout.write(text);
  return errors.length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    say(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);

/**
 * The hub-fleet phase's size, from the environment: BENCH_HUB_FLEET_CLUSTERS (default 60),
 * BENCH_HUB_FLEET_BIG (`<clusters>x<configs>x<workloads>`, default 3x400x40) and
 * BENCH_HUB_BASELINE_CLI (another build's dist/service/cli.js, measured first; unset: none) and
 * BENCH_HUB_FLEET_LEASE (fast: the tests' 4 s leases, the default; default: the chart's 15 s);
 * BENCH_HUB_FLEET_NODE_FLAGS adds Node flags to this build's replicas (an experiment).
 */
function fleetOptions(stop: (label: string, svc: ServiceProcess) => Promise<void>) {
  const clusters = Number(process.env.BENCH_HUB_FLEET_CLUSTERS ?? 60);
  const big = /^(\d+)x(\d+)x(\d+)$/.exec(process.env.BENCH_HUB_FLEET_BIG ?? '3x400x40');
  if (!Number.isSafeInteger(clusters) || clusters < 3 || !big)
    throw new Error(
      'BENCH_HUB_FLEET_CLUSTERS must be an integer of at least 3, BENCH_HUB_FLEET_BIG <n>x<configs>x<workloads>',
    );
  const baselineCli = process.env.BENCH_HUB_BASELINE_CLI;
  const lease = process.env.BENCH_HUB_FLEET_LEASE ?? 'fast';
  if (lease !== 'fast' && lease !== 'default')
    throw new Error(
      "BENCH_HUB_FLEET_LEASE must be fast (4 s leases, the default) or default (15 s, the chart's)",
    );
  return {
    clusters,
    lease: lease as 'fast' | 'default',
    extraNodeFlags: (process.env.BENCH_HUB_FLEET_NODE_FLAGS ?? '').split(/\s+/).filter(Boolean),
    big: { clusters: Number(big[1]), configs: Number(big[2]), workloads: Number(big[3]) },
    ...(baselineCli ? { baselineCli } : {}),
    stop,
  };
}
