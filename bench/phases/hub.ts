// Hub mode (issue 25, item 5; docs/hub-mode.md): `serve --hub` serving 1, 10 and 50 clusters, and the
// failover of a replica's clusters to another replica. The cheap set-up of the issue: many cluster
// Secrets, one API server, disjoint `namespaces` scopes. Each cluster i is
//   - a namespace grb-<run>-hub-<ii> with a few configs and one opted-in Deployment (1 replica);
//   - a `server` of its own: https://127.0.0.1:<port> of a TCP forwarder in the bench process that
//     pipes to the API server (bench/forwarders.ts), so hub mode sees N distinct servers;
//   - a cluster Secret in the phase's own Argo CD namespace grb-<run>-hub-argocd (labels
//     argocd.argoproj.io/secret-type=cluster and gitops-reloader.io/serve=true; data name hub-<ii>,
//     that server, `namespaces` = its namespace, and `config` = a bearer token and the API server's CA).
// The token is the cluster's own ServiceAccount's (TokenRequest), bound to cluster-admin by a
// RoleBinding in its namespace only: everything the phase creates is namespaced, in namespaces labelled with the
// run, so the run's cleanup removes it, also after a failure or Ctrl-C. Nothing is written to Argo
// CD's own namespace (its test spokes' Secrets may be opted in there; a hub reading it would serve
// them), and no Argo CD is needed: with no Application, a config change goes straight to a reload.
//
// Start-up: for each N, the service starts with N Secrets present (a first install for each cluster:
// its own --release-name per run) and is timed from spawn until its 'ready' line for every cluster
// (each engine holds its cluster's Lease and has judged its workloads); RSS is read then (VmRSS), with
// the peak so far (VmHWM). Failover: two replicas, the first acting for all of `failoverClusters`
// clusters and the second a warm standby (its caches synced for every cluster); the replica that holds
// the most of the clusters' Leases is killed (SIGKILL), and the survivor is timed until its 'ready'
// line for every cluster that moved. Once with short lease timings, once with the defaults (15 s).

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { RbacAuthorizationV1Api, type V1Deployment } from '@kubernetes/client-node';
import { canonicalServerURL } from '../../service/core/repo-url.ts';
import { CLUSTER_SECRET_TYPE_LABEL, clusterId, HUB_SERVE_LABEL } from '../../service/hub/cluster-secret.ts';
import { replicaOf } from '../../service/hub/seat.ts';
import { pending, waitFor } from '../../test/support/wait-for.ts';
import { forEachBounded } from '../bounded.ts';
import { createNamespaces, createNodes } from '../cluster.ts';
import type { Context } from '../context.ts';
import { changeConfig, until } from '../context.ts';
import { type ConfigName, configName, configObject, RUN_POD_LABEL, workloadDeployment } from '../fixture.ts';
import { type Forwarders, hostPort, startForwarders } from '../forwarders.ts';
import { freePort, type LogLine, ServiceProcess } from '../service.ts';
import { round, type Spread, spread } from '../stats.ts';

/** The lease timings of test/support/replicas.ts FAST_LEASE, and the service's defaults. */
export const HUB_LEASES = {
  fast: { duration_s: 4, renew_deadline_s: 3, retry_period_s: 0.5 },
  default: { duration_s: 15, renew_deadline_s: 10, retry_period_s: 2 },
} as const;
type LeaseTimings = (typeof HUB_LEASES)[keyof typeof HUB_LEASES];

/** The one workload of each served cluster. */
export const HUB_APP = 'hub-app';
const SERVICE_ACCOUNT = 'hub-spoke';
const CONFIGS_PER_CLUSTER = 4;
const TIMEOUT_MS = 5 * 60_000;

export interface HubStartRun {
  clusters: number;
  release: string;
  /** Spawn until the last cluster's 'ready' line (the service's timestamps). */
  start_s: number;
  /** Spawn until the first cluster's 'ready' line. */
  first_cluster_s: number;
  /** Spawn until /readyz = 200 (the hub's own watches synced; says nothing of the clusters). */
  readyz_s: number | null;
  /** VmRSS when every cluster is ready. */
  rss_mib: number;
  /** VmHWM then: the peak resident memory of the start-up. */
  rss_peak_mib: number;
  /** CPU seconds (user + system) from spawn until every cluster is ready. */
  cpu_s: number;
  /** Requests the API server refused with 429 (its fairness queues full), as logged until then. */
  throttled: number;
  /** Leader starts that failed (the engine gave its Lease up for a lease duration), until then. */
  leader_start_failures: number;
}

export interface HubStart {
  /** Median over the runs. */
  startSeconds: number;
  rssMiB: number;
  rssPeakMiB: number;
  cpuSeconds: number;
  firstClusterSeconds: number;
  runs: HubStartRun[];
}

export interface HubFailover {
  /** Kill (SIGKILL) until the survivor's 'ready' line for the last cluster that moved. */
  seconds: number;
  /** The same, to the first cluster that moved. */
  firstSeconds: number;
  /** The moved clusters' times: {median, min, max, n}. */
  perCluster: Spread | null;
  clustersMoved: number;
  /** Clusters served by both replicas. */
  clusters: number;
  leaseDurationSeconds: number;
  leaseRenewDeadlineSeconds: number;
  leaseRetryPeriodSeconds: number;
  /** After the failover, the survivor holds every cluster's Lease (read from the API server). */
  survivorHoldsAll: boolean;
  /** Kill until the survivor logged 'became the leader' for the last cluster. */
  becameLeaderSeconds: number;
  /** The survivor's failed leader starts after the kill, until the last cluster was ready. */
  leaderStartFailures: number;
}

export interface HubLatencySample {
  cluster: string;
  /** Config change accepted until 'reload started' / 'reload complete' of its Deployment (bench clock). */
  to_reload_started_ms: number;
  to_reload_complete_ms: number;
}

export interface HubResult {
  setup: string;
  clusterCounts: number[];
  /** Start-up and memory, keyed by the number of served clusters. */
  start: Record<string, HubStart>;
  /** (rssMiB at the most clusters − at the fewest) ÷ the clusters between: what one more cluster costs. */
  rssPerClusterMiB: number | null;
  failover: HubFailover | null;
  failoverDefaultLease: HubFailover | null;
  reloadLatency: {
    clusters: number;
    flags: string;
    changeToCompleteMs: Spread | null;
    changeToStartedMs: Spread | null;
    samples: HubLatencySample[];
  } | null;
  setupSeconds: number;
  forwarderConnections: number;
}

export interface HubOptions {
  /** Stops a service the phase started, recording its exit code (run.ts's stopService). */
  stop(label: string, svc: ServiceProcess): Promise<void>;
}

const pad = (i: number) => String(i).padStart(2, '0');
export const hubClusterName = (i: number) => `hub-${pad(i)}`;
export const hubNamespace = (run: string, i: number) => `grb-${run}-hub-${pad(i)}`;

const lineTime = (l: LogLine) => {
  const t = typeof l.time === 'string' ? Date.parse(l.time) : Number.NaN;
  return Number.isFinite(t) ? t : l.seenAt;
};

const START_FAILED = 'could not start acting as leader; releasing the lease';
const throttledIn = (logs: readonly LogLine[]) => logs.filter((l) => l.status === 429).length;
const startFailuresIn = (logs: readonly LogLine[]) => logs.filter((l) => l.msg === START_FAILED).length;

const alive = (svc: ServiceProcess) => svc.proc.exitCode === null && svc.proc.signalCode === null;

/**
 * Waits for a `msg` line of every cluster in `clusters` (field `cluster`), from log line `from` on;
 * returns the first such line of each. Fails at once when the service exits first.
 */
export function clusterLines(
  svc: ServiceProcess,
  msg: string,
  clusters: readonly string[],
  from: number,
  timeout: number,
): Promise<Map<string, LogLine>> {
  const want = new Set(clusters);
  const found = new Map<string, LogLine>();
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      off();
      if (err) reject(err);
      else resolve(found);
    };
    const take = (l: LogLine) => {
      if (l.msg === msg && typeof l.cluster === 'string' && want.has(l.cluster) && !found.has(l.cluster))
        found.set(l.cluster, l);
      if (found.size === want.size) finish();
    };
    const timer = setTimeout(
      () =>
        finish(
          new Error(
            `timed out after ${timeout / 1000}s waiting for '${msg}' of ${want.size} clusters: missing ${[...want].filter((c) => !found.has(c)).join(', ')}`,
          ),
        ),
      timeout,
    );
    const off = svc.onLog(take);
    for (let i = from; i < svc.logs.length && !settled; i++) take(svc.logs[i] as LogLine);
    if (want.size === 0) finish();
    void svc.exited.then((code) =>
      finish(
        new Error(
          `the service exited (${code}) before '${msg}' of ${want.size - found.size} clusters: ${svc.text.join('\n').slice(-2000)}`,
        ),
      ),
    );
  });
}

/** Peak resident set size so far in MiB (VmHWM of /proc/<pid>/status). */
function vmHWM(pid: number): number {
  const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

export async function hub(ctx: Context, o: HubOptions): Promise<HubResult> {
  const { kube, scale: s, names: n } = ctx;
  const counts = [...s.hubClusters].sort((a, b) => a - b);
  const maxN = counts[counts.length - 1] ?? 0;
  if (maxN < 1 || !counts.includes(s.hubFailoverClusters))
    throw new Error(`scale ${s.name}: hubClusters must include hubFailoverClusters`);
  const argocdNs = `grb-${n.run}-hub-argocd`;
  const sysNs = `grb-${n.run}-hub-sys`;
  const clusterNs = Array.from({ length: maxN }, (_, i) => hubNamespace(n.run, i));
  const names = Array.from({ length: maxN }, (_, i) => hubClusterName(i));
  const t0 = Date.now();
  let forwarders: Forwarders | undefined;
  const started: ServiceProcess[] = [];

  const startHub = async (label: string, release: string, flags: string[] = []) => {
    // Its own loopback port always: the failover's two replicas run side by side.
    const port = await freePort();
    const svc = new ServiceProcess(
      [
        ...hubServeArgs({
          kubeconfig: kube.kubeconfigPath,
          argocdNs,
          sysNs,
          release,
          hashKeyFile: ctx.hashKeyFile,
        }),
        ...flags,
      ],
      path.join(ctx.workDir, `service-${ctx.services.length}-${label}.log`),
      port,
    );
    ctx.services.push(svc);
    started.push(svc);
    ctx.reloads.follow(svc, `${ctx.services.length - 1}-${label}`);
    return svc;
  };

  try {
    const setup = await setUpHubClusters(ctx, { argocdNs, sysNs, clusterNs, names });
    forwarders = setup.forwarders;
    const { servers, registerUpTo } = setup;
    const api = kube.kc.getCurrentCluster();
    const setupSeconds = (Date.now() - t0) / 1000;
    ctx.say(
      `hub: ${maxN} clusters (namespaces, Deployments, Secrets' servers on loopback forwarders to ${api?.server}) in ${setupSeconds.toFixed(1)}s`,
    );

    // --- Start-up and memory, per number of clusters. ---
    const start: Record<string, HubStart> = {};
    let failover: HubFailover | null = null;
    let failoverDefaultLease: HubFailover | null = null;
    let reloadLatency: HubResult['reloadLatency'] = null;
    for (const count of counts) {
      await registerUpTo(count);
      const served = names.slice(0, count);
      const runs: HubStartRun[] = [];
      for (let r = 0; r < s.hubStartRuns; r++) {
        const release = `hub${count}-${r}`;
        const svc = await startHub(`hub-${count}-${r}`, release);
        const readyz = svc.waitReady(TIMEOUT_MS).catch(() => undefined);
        const lines = await clusterLines(svc, 'ready', served, 0, TIMEOUT_MS);
        const rss = svc.rssMiB();
        const peak = vmHWM(svc.pid);
        const cpu = svc.cpuSeconds();
        const times = [...lines.values()].map(lineTime);
        const rz = await readyz;
        const run: HubStartRun = {
          clusters: count,
          release,
          start_s: round((Math.max(...times) - svc.startedAt) / 1000),
          first_cluster_s: round((Math.min(...times) - svc.startedAt) / 1000),
          readyz_s: rz ? round((rz.at - svc.startedAt) / 1000) : null,
          rss_mib: round(rss, 1),
          rss_peak_mib: round(peak, 1),
          cpu_s: round(cpu, 2),
          throttled: throttledIn(svc.logs),
          leader_start_failures: startFailuresIn(svc.logs),
        };
        runs.push(run);
        ctx.say(
          `hub ${count} clusters: every cluster ready in ${run.start_s.toFixed(2)}s (first ${run.first_cluster_s.toFixed(2)}s), RSS ${run.rss_mib} MiB (peak ${run.rss_peak_mib}), ${run.cpu_s} CPU s${run.throttled ? `; ${run.throttled} requests throttled (429)` : ''}${run.leader_start_failures ? `, ${run.leader_start_failures} leader starts failed` : ''}`,
        );
        if (count === maxN && r === s.hubStartRuns - 1 && s.hubLatencyChanges > 0)
          reloadLatency = await latencyAmong(ctx, svc, count, clusterNs);
        await o.stop(`hub-${count}-${r}`, svc);
      }
      const med = (f: (x: HubStartRun) => number, digits = 3) =>
        spread(runs.map(f), digits)?.median ?? Number.NaN;
      start[String(count)] = {
        startSeconds: med((x) => x.start_s),
        rssMiB: med((x) => x.rss_mib, 1),
        rssPeakMiB: med((x) => x.rss_peak_mib, 1),
        cpuSeconds: med((x) => x.cpu_s, 2),
        firstClusterSeconds: med((x) => x.first_cluster_s),
        runs,
      };
      if (count === s.hubFailoverClusters) {
        failover = await failoverOf(ctx, startHub, o, served, servers, sysNs, 'fast');
        if (s.hubDefaultLeaseFailover)
          failoverDefaultLease = await failoverOf(ctx, startHub, o, served, servers, sysNs, 'default');
      }
    }
    return {
      setup: `${maxN} cluster Secrets, one API server (loopback TCP forwarders, one port each), disjoint namespaces scopes; per cluster ${CONFIGS_PER_CLUSTER} configs and 1 opted-in Deployment of 1 replica`,
      clusterCounts: counts,
      start,
      rssPerClusterMiB: perCluster(start, counts),
      failover,
      failoverDefaultLease,
      reloadLatency,
      setupSeconds: round(setupSeconds, 1),
      forwarderConnections: forwarders.connections(),
    };
  } finally {
    for (const svc of started) svc.kill();
    await Promise.all(started.map((svc) => svc.exited));
    await forwarders?.close();
  }
}

function perCluster(start: Record<string, HubStart>, counts: number[]): number | null {
  const lo = counts[0] as number;
  const hi = counts[counts.length - 1] as number;
  const a = start[String(lo)]?.rssMiB;
  const b = start[String(hi)]?.rssMiB;
  return hi > lo && a !== undefined && b !== undefined ? round((b - a) / (hi - lo), 2) : null;
}

type StartHub = (label: string, release: string, flags?: string[]) => Promise<ServiceProcess>;

async function failoverOf(
  ctx: Context,
  startHub: StartHub,
  o: HubOptions,
  clusters: string[],
  servers: string[],
  sysNs: string,
  which: keyof typeof HUB_LEASES,
): Promise<HubFailover> {
  const lease: LeaseTimings = HUB_LEASES[which];
  const release = `hubfo-${which}`;
  const flags = [
    `--lease-duration=${lease.duration_s * 1000}ms`,
    `--lease-renew-deadline=${lease.renew_deadline_s * 1000}ms`,
    `--lease-retry-period=${lease.retry_period_s * 1000}ms`,
  ];
  const a = await startHub(`hubfo-${which}-a`, release, [...flags, '--leader-identity=hub-a']);
  await clusterLines(a, 'ready', clusters, 0, TIMEOUT_MS);
  const b = await startHub(`hubfo-${which}-b`, release, [...flags, '--leader-identity=hub-b']);
  const leaseNames = clusters.map(
    (_name, i) => `${release}-${clusterId(canonicalServerURL(servers[i] as string) as string)}-leader`,
  );
  const holders = async () =>
    Promise.all(
      leaseNames.map(async (name) => {
        const l = await ctx.kube.coordination.readNamespacedLease({ name, namespace: sysNs });
        return replicaOf(l.spec?.holderIdentity ?? '');
      }),
    );
  // The shares settled: every Lease held by one of the two, neither over its fair share, and the
  // clusters hub-b took acting there (since issue 36 a replica runs engines only for the clusters it
  // leads and a bounded warm standby, so hub-b's caches are not synced for all of them).
  const half = Math.ceil(clusters.length / 2);
  const settled = await waitFor(
    async () => {
      const h = await holders();
      const ofA = h.filter((x) => x === 'hub-a').length;
      const ofB = h.filter((x) => x === 'hub-b').length;
      return ofA + ofB === clusters.length && ofA <= half && ofB <= half ? h : pending({ ofA, ofB });
    },
    { describe: 'the clusters shared by hub-a and hub-b', timeout: TIMEOUT_MS, interval: 500 },
  );
  await clusterLines(
    b,
    'ready',
    clusters.filter((_, i) => settled[i] === 'hub-b'),
    0,
    TIMEOUT_MS,
  );
  const before = await holders();
  const ofA = before.filter((h) => h === 'hub-a').length;
  const ofB = before.filter((h) => h === 'hub-b').length;
  const [victim, survivor, victimId, survivorId] =
    ofA >= ofB ? [a, b, 'hub-a', 'hub-b'] : [b, a, 'hub-b', 'hub-a'];
  const moved = clusters.filter((_, i) => before[i] === victimId);
  const from = survivor.logs.length;
  const killedAt = Date.now();
  victim.kill();
  await victim.exited;
  const ready = await clusterLines(survivor, 'ready', moved, from, lease.duration_s * 1000 + TIMEOUT_MS);
  const became = await clusterLines(survivor, 'became the leader', moved, from, 10_000);
  const times = [...ready.values()].map((l) => (lineTime(l) - killedAt) / 1000);
  const after = await holders();
  const result: HubFailover = {
    seconds: round(Math.max(...times)),
    firstSeconds: round(Math.min(...times)),
    perCluster: spread(times),
    clustersMoved: moved.length,
    clusters: clusters.length,
    leaseDurationSeconds: lease.duration_s,
    leaseRenewDeadlineSeconds: lease.renew_deadline_s,
    leaseRetryPeriodSeconds: lease.retry_period_s,
    survivorHoldsAll: after.every((h) => h === survivorId),
    leaderStartFailures: startFailuresIn(survivor.logs.slice(from)),
    becameLeaderSeconds: round(Math.max(...[...became.values()].map((l) => (lineTime(l) - killedAt) / 1000))),
  };
  ctx.say(
    `hub failover (lease ${lease.duration_s}s): ${moved.length} of ${clusters.length} clusters moved from ${victimId} to ${survivorId}; the last acts ${result.seconds.toFixed(2)}s after the kill (first ${result.firstSeconds.toFixed(2)}s)`,
  );
  await o.stop(`hubfo-${which}-survivor`, survivor);
  return result;
}

/**
 * One config change at a time in `changes` clusters spread over the served ones: from the change
 * accepted to the reload started and complete in that cluster, under the default flags (debounce 3 s).
 */
async function latencyAmong(
  ctx: Context,
  svc: ServiceProcess,
  count: number,
  clusterNs: string[],
): Promise<NonNullable<HubResult['reloadLatency']>> {
  const k = ctx.scale.hubLatencyChanges;
  const picks = Array.from({ length: k }, (_, j) => Math.floor(((j + 0.5) * count) / k));
  const samples: HubLatencySample[] = [];
  for (const i of picks) {
    const namespace = clusterNs[i] as string;
    ctx.reloads.expect(namespace, HUB_APP);
    const t = await changeConfig(ctx, { kind: 'ConfigMap', namespace, name: configName('ConfigMap', 0) });
    const w = await until(`a reload of ${namespace}/${HUB_APP} complete`, 120_000, () => {
      if (!alive(svc)) throw new Error('the hub service exited');
      return ctx.reloads.of(namespace, HUB_APP).find((x) => x.startedAt >= t && x.completedAt !== undefined);
    });
    samples.push({
      cluster: hubClusterName(i),
      to_reload_started_ms: w.startedAt - t,
      to_reload_complete_ms: (w.completedAt as number) - t,
    });
  }
  ctx.say(
    `hub: config change to reload complete among ${count} clusters: ${samples.map((x) => x.to_reload_complete_ms).join(', ')} ms`,
  );
  return {
    clusters: count,
    flags: 'defaults (debounce 3s)',
    changeToCompleteMs: spread(
      samples.map((x) => x.to_reload_complete_ms),
      0,
    ),
    changeToStartedMs: spread(
      samples.map((x) => x.to_reload_started_ms),
      0,
    ),
    samples,
  };
}

export interface HubClusters {
  forwarders: Forwarders;
  /** Each cluster's server URL (its forwarder's). */
  servers: string[];
  /** Creates the cluster Secrets of clusters [registered, count). */
  registerUpTo(count: number): Promise<void>;
}

/**
 * The clusters' side of the cheap set-up: per cluster a namespace with its configs and Deployment, its
 * own ServiceAccount and token, a loopback forwarder as its server; `big` clusters (the first ones)
 * also hold `bigConfigs` more ConfigMaps and `bigWorkloads` more opted-in Deployments of 0 replicas
 * (issue 36's "a few with 1,000 configs and 200 workloads", scaled to the machine).
 */
export async function setUpHubClusters(
  ctx: Context,
  o: {
    argocdNs: string;
    sysNs: string;
    clusterNs: string[];
    names: string[];
    big?: { clusters: number; configs: number; workloads: number };
  },
): Promise<HubClusters> {
  const { kube, scale: s, names: n } = ctx;
  const { argocdNs, sysNs, clusterNs, names } = o;
  const maxN = clusterNs.length;
  // --- The clusters' side: namespaces, node, credentials, configs and Deployments. ---
  await createNamespaces(kube, n.run, [argocdNs, sysNs, ...clusterNs]);
  await createNodes(kube, n.run, 1, 'hub');
  const rbac = kube.kc.makeApiClient(RbacAuthorizationV1Api);
  const tokens = new Map<string, string>();
  const configs = (namespace: string): ConfigName[] => [
    ...Array.from({ length: CONFIGS_PER_CLUSTER - 1 }, (_, k) => ({
      kind: 'ConfigMap' as const,
      namespace,
      name: configName('ConfigMap', k),
    })),
    { kind: 'Secret', namespace, name: configName('Secret', 0) },
  ];
  const deployment = (namespace: string): V1Deployment =>
    workloadDeployment(
      n.run,
      {
        index: 0,
        namespace,
        name: HUB_APP,
        envFrom: { kind: 'ConfigMap', namespace, name: configName('ConfigMap', 0) },
        keyRef: { kind: 'Secret', namespace, name: configName('Secret', 0) },
        volume: { kind: 'ConfigMap', namespace, name: configName('ConfigMap', 1) },
      },
      1,
    );
  await forEachBounded(clusterNs, Math.max(1, Math.floor(s.inFlight / 4)), async (namespace) => {
    // Each cluster its own ServiceAccount (an API server tells clients apart by user: one account for
    // all would put every cluster in one flow of its fairness queues, which 50 real clusters never share).
    await kube.core.createNamespacedServiceAccount({
      namespace,
      body: { metadata: { name: SERVICE_ACCOUNT } },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: SERVICE_ACCOUNT },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace }],
      },
    });
    const token = await kube.core.createNamespacedServiceAccountToken({
      name: SERVICE_ACCOUNT,
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 4 * 3600 } },
    });
    if (!token.status?.token) throw new Error(`the TokenRequest in ${namespace} returned no token`);
    tokens.set(namespace, token.status.token);
    for (const c of configs(namespace)) {
      const body = configObject(c, s.configBytes);
      if (c.kind === 'ConfigMap') await kube.core.createNamespacedConfigMap({ namespace, body });
      else await kube.core.createNamespacedSecret({ namespace, body });
    }
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment(namespace) });
  });
  // Pods settle before anything is timed (their creation would load the API server meanwhile).
  await waitFor(
    async () => {
      const pods = await kube.core.listPodForAllNamespaces({
        labelSelector: `app=${HUB_APP},${RUN_POD_LABEL}=${n.run}`,
      });
      const ready = pods.items.filter(
        (p) =>
          !p.metadata?.deletionTimestamp &&
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      ).length;
      return ready === maxN ? true : pending(`${ready}/${maxN} pods Ready`);
    },
    { describe: `${maxN} ${HUB_APP} pods Ready`, timeout: TIMEOUT_MS, interval: 1000 },
  );

  // --- One server URL per cluster, and its credentials. ---
  const api = kube.kc.getCurrentCluster();
  if (!api) throw new Error('the kubeconfig has no current cluster');
  const target = hostPort(api.server);
  const forwarders = await startForwarders(target, maxN);
  const caData = api.caData ?? (api.caFile ? readFileSync(api.caFile).toString('base64') : undefined);
  // A server named by host name: its certificate names that host, not the forwarder's 127.0.0.1.
  const serverName = /^[\d.]+$|:/.test(target.host) ? undefined : target.host;
  const config = (namespace: string) =>
    JSON.stringify({
      bearerToken: tokens.get(namespace),
      tlsClientConfig: {
        ...(caData ? { caData } : {}),
        ...(api.skipTLSVerify ? { insecure: true } : {}),
        ...(serverName ? { serverName } : {}),
      },
    });
  const servers = forwarders.list.map((f) => f.url);
  let registered = 0;
  const registerUpTo = async (count: number) => {
    for (; registered < count; registered++) {
      const i = registered;
      await kube.core.createNamespacedSecret({
        namespace: argocdNs,
        body: {
          metadata: {
            name: `cluster-${pad(i)}`,
            labels: { [CLUSTER_SECRET_TYPE_LABEL]: 'cluster', [HUB_SERVE_LABEL]: 'true' },
          },
          type: 'Opaque',
          stringData: {
            name: names[i] as string,
            server: servers[i] as string,
            namespaces: clusterNs[i] as string,
            config: config(clusterNs[i] as string),
          },
        },
      });
    }
  };
  return { forwarders, servers, registerUpTo };
}

/** The arguments every hub-mode service of the bench starts with (the hub and hub-fleet phases). */
export function hubServeArgs(o: {
  kubeconfig: string;
  argocdNs: string;
  sysNs: string;
  release: string;
  hashKeyFile: string;
}): string[] {
  return [
    '--hub',
    `--kubeconfig=${o.kubeconfig}`,
    `--argocd-namespaces=${o.argocdNs}`,
    `--release-namespace=${o.sysNs}`,
    `--release-name=${o.release}`,
    `--hash-key-file=${o.hashKeyFile}`,
  ];
}
