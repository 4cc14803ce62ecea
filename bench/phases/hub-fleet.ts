// Hub mode at fleet scale (issue 36, item 5; docs/hub-mode.md "Fleet scale"): N clusters of mixed size
// (most as the hub phase's, the first `big` ones with many more configs and Deployments), served by 3
// replicas of one release, with the same cheap set-up as the hub phase (bench/phases/hub.ts: a
// namespace, an account and a loopback forwarder per cluster, one API server). Not in `.ci/run`'s
// bench (it is in its --skip list): minutes of two cores.
//
// For each variant (this build; and, when BENCH_HUB_BASELINE_CLI names another build's
// dist/service/cli.js, that build first, on the same clusters in the same run), with the tests' short
// leases (4 s):
//   - start-up: the 3 replicas spawned together, until every cluster's Lease is held, no replica over
//     its fair share, and each cluster's holder logged 'ready' for it;
//   - steady (32 s later: engines of clusters given up have stopped, and their idle keep-alive
//     connections closed): each
//     replica's VmRSS; per spoke, the replicas with a TCP connection to its forwarder and the
//     connections (read from /proc: the sockets of each replica's process whose peer is the forwarder);
//   - failover: the replica leading the most clusters is killed (SIGKILL); until every moved cluster
//     logged 'ready' on a survivor, the survivors' VmRSS sampled every 250 ms (peak against steady),
//     and the engines the survivors started cold ('serving cluster' after the kill; each is one LIST
//     per watch of its cluster, where a warm standby lists nothing).
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import https from 'node:https';
import { canonicalServerURL } from '../../service/core/repo-url.ts';
import { clusterId } from '../../service/hub/cluster-secret.ts';
import { replicaOf } from '../../service/hub/seat.ts';
import { engineStatus, idle } from '../../test/support/decisions.ts';
import { PodTracker, type PodView, waitAllReplaced } from '../../test/support/observe.ts';
import { pending, waitFor } from '../../test/support/wait-for.ts';
import { forEachBounded } from '../bounded.ts';
import type { Context } from '../context.ts';
import { changeConfig } from '../context.ts';
import { configName } from '../fixture.ts';
import type { Forwarders } from '../forwarders.ts';
import { freePort, type LogLine, ServiceProcess } from '../service.ts';
import { round, type Spread, spread } from '../stats.ts';
import { HUB_APP, HUB_LEASES, hubClusterName, hubNamespace, hubServeArgs, setUpHubClusters } from './hub.ts';

const REPLICAS = 3;
const TIMEOUT_MS = 6 * 60_000;

export interface FleetOptions {
  clusters: number;
  big: { clusters: number; configs: number; workloads: number };
  /** Another build's CLI (e.g. main's), measured the same way first. */
  baselineCli?: string;
  /** Node flags for this build's replicas beyond the image's (an experiment; none by default). */
  extraNodeFlags: string[];
  /** The lease timings: the tests' short ones (4 s) or the chart's (15 s). */
  lease: keyof typeof HUB_LEASES;
  stop(label: string, svc: ServiceProcess): Promise<void>;
}

export interface FleetVariant {
  variant: string;
  /**
   * Whether every cluster came to be led within the shares and ready on its holder within the
   * phase's timeout. When not, the figures are read at the timeout and there is no failover.
   */
  settled: boolean;
  /** First spawn until every cluster led, within the shares, and ready on its holder (or the timeout). */
  startSeconds: number;
  /** Clusters not led, or led but not ready on their holder, when the figures were read. */
  notReady: number;
  /** Each replica's VmRSS in steady state (MiB), by replica; and their max. */
  rssMiB: Record<string, number>;
  rssMaxMiB: number;
  /** Clusters led, by replica, in steady state. */
  led: Record<string, number>;
  /** A change's time to its reload complete, in steady state (clusters led by the survivors-to-be). */
  changeToReloadMs: Spread | null;
  /** Per spoke: how many replicas hold a connection to it, and how many connections in all. */
  spokeReplicas: Spread | null;
  spokeConnections: Spread | null;
  failover: null | {
    clustersMoved: number;
    /**
     * Every moved cluster's config was changed right before the kill: its pod replaced (by a survivor),
     * and how many were replaced exactly once (a new pod each, nothing more under way after).
     */
    podsReplacedOnce: number;
    /** Moved clusters whose pod was replaced more than once, with the new pods counted. */
    replacedTwice: Record<string, number>;
    /** Kill until the last moved cluster's pod is replaced and Ready. */
    replacedSeconds: number;
    /** LISTs the API server served from the kill until every moved cluster acted (all clients), by resource. */
    lists: { total: number; by: Record<string, number> };
    /** Kill until the last moved cluster's 'ready' on a survivor (first: the first's). */
    seconds: number;
    firstSeconds: number;
    perCluster: Spread | null;
    /** Engines the survivors started after the kill (cold starts; the rest were warm standbys). */
    coldStarts: number;
    /** Each survivor's VmRSS once every moved cluster's pod was replaced and nothing more was under way. */
    survivorAfterMiB: Record<string, number>;
    /** Each survivor's peak VmRSS during the failover ÷ its VmRSS right before the kill. */
    survivorPeakRatio: Record<string, number>;
    survivorPeakMiB: Record<string, number>;
  };
}

export interface FleetResult {
  setup: string;
  clusters: number;
  replicas: number;
  leaseDurationSeconds: number;
  variants: FleetVariant[];
  setupSeconds: number;
}

const lineTime = (l: LogLine) => {
  const t = typeof l.time === 'string' ? Date.parse(l.time) : Number.NaN;
  return Number.isFinite(t) ? t : l.seenAt;
};

/** The loopback ports each of a process's TCP sockets is connected to (IPv4 and IPv6 tables). */
function peerPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1] as string);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || !inodes.has(f[9] as string)) continue;
      // st 01 = ESTABLISHED
      if (f[3] !== '01') continue;
      const remote = f[2] as string;
      ports.push(Number.parseInt(remote.slice(remote.lastIndexOf(':') + 1), 16));
    }
  }
  return ports;
}

/**
 * The LISTs the API server has served so far, by resource (its apiserver_request_total counter, read
 * from its /metrics with the bench's own credentials). Every cluster is the same API server here, so a
 * difference over a window is every client's LISTs in it.
 */
async function apiserverLists(kube: Context['kube']): Promise<Record<string, number>> {
  const server = kube.kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster');
  const url = new URL('/metrics', server);
  const opts: https.RequestOptions = { method: 'GET', headers: {} };
  await kube.kc.applyToHTTPSOptions(opts);
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.request(url, opts, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () =>
        res.statusCode === 200 ? resolve(body) : reject(new Error(`GET /metrics: HTTP ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes('verb="LIST"')) continue;
    const resource = /resource="([^"]*)"/.exec(line)?.[1] ?? '';
    out[resource] = (out[resource] ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return out;
}

/**
 * Whether the service's status shows each served cluster by name, as test/support/decisions.ts reads
 * it (issue 35 on; the issue's main keyed its clusters by name, without the field).
 */
async function statusByCluster(svc: ServiceProcess): Promise<boolean> {
  const s = (await engineStatus(svc)) as { hub?: boolean; clusters?: Record<string, { name?: unknown }> };
  return s.hub === true && Object.values(s.clusters ?? {}).some((c) => typeof c?.name === 'string');
}

const listsSince = (before: Record<string, number>, after: Record<string, number>) => {
  const by: Record<string, number> = {};
  let total = 0;
  for (const [r, n] of Object.entries(after)) {
    const d = n - (before[r] ?? 0);
    if (d > 0) {
      by[r] = d;
      total += d;
    }
  }
  return { total, by };
};

export async function hubFleet(ctx: Context, o: FleetOptions): Promise<FleetResult> {
  const { kube, names: n } = ctx;
  const N = o.clusters;
  const argocdNs = `grb-${n.run}-fleet-argocd`;
  const sysNs = `grb-${n.run}-fleet-sys`;
  const clusterNs = Array.from({ length: N }, (_, i) => hubNamespace(n.run, i).replace('-hub-', '-fleet-'));
  const names = Array.from({ length: N }, (_, i) => hubClusterName(i));
  const t0 = Date.now();
  const started: ServiceProcess[] = [];
  let forwarders: Forwarders | undefined;
  const lease = HUB_LEASES[o.lease];
  const leaseFlags = [
    `--lease-duration=${lease.duration_s * 1000}ms`,
    `--lease-renew-deadline=${lease.renew_deadline_s * 1000}ms`,
    `--lease-retry-period=${lease.retry_period_s * 1000}ms`,
  ];
  try {
    const setup = await setUpHubClusters(ctx, { argocdNs, sysNs, clusterNs, names, big: o.big });
    forwarders = setup.forwarders;
    await setup.registerUpTo(N);
    const portOf = new Map(setup.forwarders.list.map((f, i) => [f.port, names[i] as string]));
    const setupSeconds = round((Date.now() - t0) / 1000, 1);
    ctx.say(`hub-fleet: ${N} clusters (${o.big.clusters} big) set up in ${setupSeconds}s`);

    const variants: FleetVariant[] = [];
    const runs: Array<[string, string | undefined]> = [
      ...(o.baselineCli ? [['baseline', o.baselineCli] as [string, string]] : []),
      ['this build', undefined],
    ];
    for (const [variant, cli] of runs) {
      const release = `fleet-${variants.length}`;
      const leaseNames = setup.servers.map(
        (srv) => `${release}-${clusterId(canonicalServerURL(srv) as string)}-leader`,
      );
      const replicas: Array<{ id: string; svc: ServiceProcess }> = [];
      const spawnedAt = Date.now();
      for (let r = 0; r < REPLICAS; r++) {
        const id = `fleet-${r}`;
        const svc = new ServiceProcess(
          [
            ...hubServeArgs({
              kubeconfig: kube.kubeconfigPath,
              argocdNs,
              sysNs,
              release,
              hashKeyFile: ctx.hashKeyFile,
            }),
            `--leader-identity=${id}`,
            ...leaseFlags,
          ],
          `${ctx.workDir}/service-${ctx.services.length}-${release}-${id}.log`,
          await freePort(),
          cli ? { cli } : o.extraNodeFlags.length > 0 ? { extraNodeFlags: o.extraNodeFlags } : {},
        );
        ctx.services.push(svc);
        started.push(svc);
        replicas.push({ id, svc });
      }
      // Each cluster's Lease as its engines name it ('leader election started'): a build before ADR
      // 0038's 128-bit cluster ids (the issue's main) names them otherwise than clusterId() does now.
      const logged = new Map<string, string>();
      const leaseOfCluster = (i: number): string => {
        const c = names[i] as string;
        if (!logged.has(c))
          for (const r of replicas) {
            const l = r.svc.logs.find((x) => x.msg === 'leader election started' && x.cluster === c);
            if (typeof l?.lease === 'string') {
              logged.set(c, l.lease.slice(l.lease.indexOf('/') + 1));
              break;
            }
          }
        return logged.get(c) ?? (leaseNames[i] as string);
      };
      const holders = async () => {
        const { items } = await kube.coordination.listNamespacedLease({ namespace: sysNs });
        const by = new Map(
          items.map((l) => [l.metadata?.name ?? '', replicaOf(l.spec?.holderIdentity ?? '')]),
        );
        return names.map((_, i) => by.get(leaseOfCluster(i)) ?? '');
      };
      const readyIn = (svc: ServiceProcess, from = 0) => {
        const out = new Map<string, LogLine>();
        for (let i = from; i < svc.logs.length; i++) {
          const l = svc.logs[i] as LogLine;
          if (l.msg === 'ready' && typeof l.cluster === 'string' && !out.has(l.cluster))
            out.set(l.cluster, l);
        }
        return out;
      };
      const share = Math.ceil(N / REPLICAS);
      const settle = async () => {
        const h = await holders();
        const count = (id: string) => h.filter((x) => x === id).length;
        const notReady = names.filter((c, i) => {
          const r = replicas.find((x) => x.id === h[i]);
          return !r || !readyIn(r.svc).has(c);
        });
        const over = replicas.filter((r) => count(r.id) > share).map((r) => r.id);
        return { h, notReady: notReady.length, over };
      };
      // A build that cannot settle this fleet (leases flapping under the API server's 429s) is
      // reported as such, with its memory at the timeout, rather than failing the phase.
      let last = await settle();
      const settled = await waitFor(
        async () => {
          last = await settle();
          return last.notReady === 0 && last.over.length === 0
            ? true
            : pending({ notReady: last.notReady, over: last.over });
        },
        {
          describe: `${N} clusters led by ${REPLICAS} replicas within their shares`,
          timeout: TIMEOUT_MS,
          interval: 500,
        },
      ).catch((err: Error) => {
        ctx.say(`hub-fleet ${variant}: did not settle: ${err.message}`);
        return false;
      });
      const balanced = last.h;
      const startSeconds = round((Date.now() - spawnedAt) / 1000, 1);
      // Engines of clusters given up while the shares settled stop within two lease durations, and the
      // idle keep-alive connections they leave close after 30 s (kube/watch-http.ts IDLE_KEEP_MS).
      if (settled)
        await new Promise((r) => setTimeout(r, Math.max(2 * lease.duration_s * 1000 + 2000, 32_000)));
      const rssMiB: Record<string, number> = {};
      const led: Record<string, number> = {};
      const perSpoke = new Map<string, { replicas: Set<string>; connections: number }>();
      for (const name of names) perSpoke.set(name, { replicas: new Set(), connections: 0 });
      for (const r of replicas) {
        rssMiB[r.id] = round(r.svc.rssMiB(), 1);
        led[r.id] = balanced.filter((h) => h === r.id).length;
        for (const port of peerPorts(r.svc.pid)) {
          const spoke = portOf.get(port);
          if (!spoke) continue;
          const s = perSpoke.get(spoke) as { replicas: Set<string>; connections: number };
          s.replicas.add(r.id);
          s.connections++;
        }
      }
      const spokes = [...perSpoke.values()];
      ctx.say(
        `hub-fleet ${variant}: ${N} clusters ${settled ? 'ready' : `not settled (${last.notReady} not ready)`} in ${startSeconds}s; RSS ${JSON.stringify(rssMiB)} MiB, led ${JSON.stringify(led)}; replicas per spoke max ${Math.max(...spokes.map((s) => s.replicas.size))}`,
      );
      const figures = {
        variant,
        settled,
        startSeconds,
        notReady: last.notReady,
        rssMiB,
        rssMaxMiB: Math.max(...Object.values(rssMiB)),
        led,
        spokeReplicas: spread(
          spokes.map((s) => s.replicas.size),
          1,
        ),
        spokeConnections: spread(
          spokes.map((s) => s.connections),
          1,
        ),
      };
      if (!settled) {
        variants.push({ ...figures, changeToReloadMs: null, failover: null });
        for (const r of replicas) await o.stop(`${release}-${r.id}`, r.svc);
        continue;
      }

      // Failover: the replica leading the most dies, right after a change in every cluster it leads
      // (the shards suite's check at this size: each moved cluster's pod replaced, once).
      const victim = [...replicas].sort(
        (a, b) => (led[b.id] ?? 0) - (led[a.id] ?? 0),
      )[0] as (typeof replicas)[number];
      const survivors = replicas.filter((r) => r !== victim);
      const moved = names.filter((_, i) => balanced[i] === victim.id);
      // A change's time to reload in steady state: two small clusters of each survivor, one at a time.
      const timed = survivors.flatMap((r) =>
        names.filter((_, i) => balanced[i] === r.id && i >= o.big.clusters).slice(0, 2),
      );
      const latencies: number[] = [];
      for (const c of timed) {
        const ns = clusterNs[names.indexOf(c)] as string;
        const holder = replicas.find((r) => r.id === balanced[names.indexOf(c)]) as (typeof replicas)[number];
        const mark = holder.svc.logs.length;
        const at = await changeConfig(ctx, {
          kind: 'ConfigMap',
          namespace: ns,
          name: configName('ConfigMap', 0),
        });
        const done = await waitFor(
          async () => {
            const l = holder.svc.logs.slice(mark).find((x) => x.msg === 'reload complete' && x.cluster === c);
            return l ? lineTime(l) : pending('no reload complete yet');
          },
          { describe: `${c}'s reload after a change`, timeout: 120_000, interval: 100 },
        );
        latencies.push(done - at);
        if (await statusByCluster(holder.svc))
          await idle(holder.svc, `Deployment/${ns}/${HUB_APP}`, { cluster: c });
      }
      const movedNs = new Map(moved.map((c) => [c, clusterNs[names.indexOf(c)] as string]));
      const podsBefore = new Map<string, PodView[]>();
      const trackers = new Map<string, PodTracker>();
      await forEachBounded([...movedNs], 8, async ([c, ns]) => {
        const t = await PodTracker.start(kube, ns, HUB_APP);
        trackers.set(c, t);
        podsBefore.set(c, [...t.seen.values()]);
      });
      await forEachBounded([...movedNs.values()], 8, (ns) =>
        changeConfig(ctx, { kind: 'ConfigMap', namespace: ns, name: configName('ConfigMap', 0) }).then(
          () => undefined,
        ),
      );
      const from = new Map(survivors.map((r) => [r.id, r.svc.logs.length]));
      const before: Record<string, number> = {};
      const peak: Record<string, number> = {};
      for (const r of survivors) {
        before[r.id] = r.svc.rssMiB();
        peak[r.id] = before[r.id] as number;
      }
      const sampler = setInterval(() => {
        for (const r of survivors) {
          try {
            peak[r.id] = Math.max(peak[r.id] as number, r.svc.rssMiB());
          } catch {
            // exited
          }
        }
      }, 250);
      const listsBefore = await apiserverLists(kube);
      const killedAt = Date.now();
      victim.svc.kill();
      await victim.svc.exited;
      const acted = await waitFor(
        async () => {
          const seen = new Map<string, number>();
          for (const r of survivors) {
            for (const [c, l] of readyIn(r.svc, from.get(r.id))) {
              if (moved.includes(c) && !seen.has(c)) seen.set(c, lineTime(l));
            }
          }
          return seen.size === moved.length
            ? seen
            : pending(`${seen.size}/${moved.length} moved clusters ready`);
        },
        { describe: 'every moved cluster acting on a survivor', timeout: TIMEOUT_MS, interval: 250 },
      );
      const lists = listsSince(listsBefore, await apiserverLists(kube));
      // Every moved cluster's pod replaced (no change lost), then nothing more under way for it.
      await forEachBounded([...movedNs], 8, ([c, ns]) =>
        waitAllReplaced(kube, ns, HUB_APP, podsBefore.get(c) as PodView[], 1).then(() => undefined),
      );
      const replacedSeconds = round((Date.now() - killedAt) / 1000, 2);
      clearInterval(sampler);
      // The service's decision that nothing more is under way for each; a build whose status does not
      // show clusters (the issue's main) is read from its log instead: a survivor's 'reload complete'.
      const byCluster = await statusByCluster(survivors[0]?.svc as ServiceProcess);
      await forEachBounded([...movedNs], 4, ([c, ns]) =>
        byCluster
          ? idle(
              survivors.map((r) => r.svc),
              `Deployment/${ns}/${HUB_APP}`,
              { cluster: c, timeout: 120_000 },
            )
          : waitFor(
              async () =>
                survivors.some((r) =>
                  r.svc.logs
                    .slice(from.get(r.id))
                    .some((l) => l.msg === 'reload complete' && l.cluster === c),
                ) || pending('no reload complete'),
              { describe: `${c}'s reload complete on a survivor`, timeout: 120_000 },
            ).then(() => undefined),
      );
      const after: Record<string, number> = {};
      for (const r of survivors) after[r.id] = round(r.svc.rssMiB(), 1);
      const replacedTwice: Record<string, number> = {};
      let podsReplacedOnce = 0;
      for (const [c, t] of trackers) {
        t.stop();
        const fresh = t.newSince(podsBefore.get(c) as PodView[]).length;
        if (fresh === 1) podsReplacedOnce++;
        else replacedTwice[c] = fresh;
      }
      const times = [...acted.values()].map((t) => (t - killedAt) / 1000);
      const coldStarts = survivors
        .map((r) => r.svc.logs.slice(from.get(r.id)).filter((l) => l.msg === 'serving cluster').length)
        .reduce((a, b) => a + b, 0);
      const v: FleetVariant = {
        ...figures,
        changeToReloadMs: spread(latencies, 0),
        failover: {
          clustersMoved: moved.length,
          podsReplacedOnce,
          replacedTwice,
          replacedSeconds,
          lists,
          seconds: round(Math.max(...times), 2),
          firstSeconds: round(Math.min(...times), 2),
          perCluster: spread(times, 2),
          coldStarts,
          survivorAfterMiB: after,
          survivorPeakRatio: Object.fromEntries(
            survivors.map((r) => [r.id, round((peak[r.id] as number) / (before[r.id] as number), 2)]),
          ),
          survivorPeakMiB: Object.fromEntries(survivors.map((r) => [r.id, round(peak[r.id] as number, 1)])),
        },
      };
      variants.push(v);
      const f = v.failover as NonNullable<FleetVariant['failover']>;
      ctx.say(
        `hub-fleet ${variant}: failover moved ${moved.length}, the last acting ${f.seconds}s after the kill (first ${f.firstSeconds}s), pods replaced once ${podsReplacedOnce}/${moved.length} (last ${replacedSeconds}s), ${coldStarts} cold starts, ${lists.total} LISTs, change → reload ${JSON.stringify(v.changeToReloadMs)} ms, survivors' peak ${JSON.stringify(f.survivorPeakMiB)} MiB (×${JSON.stringify(f.survivorPeakRatio)})`,
      );
      for (const r of survivors) await o.stop(`${release}-${r.id}`, r.svc);
    }
    return {
      setup: `${N} cluster Secrets (the first ${o.big.clusters} with ${o.big.configs} more ConfigMaps and ${o.big.workloads} more opted-in Deployments of 0 replicas; the others 4 configs and 1 Deployment), one API server through loopback forwarders, ${REPLICAS} replicas of one release, leases ${lease.duration_s}s`,
      clusters: N,
      replicas: REPLICAS,
      leaseDurationSeconds: lease.duration_s,
      variants,
      setupSeconds,
    };
  } finally {
    for (const svc of started) svc.kill();
    await Promise.all(started.map((svc) => svc.exited));
    await forwarders?.close();
  }
}
