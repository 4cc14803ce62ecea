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
import { canonicalServerURL } from '../../service/core/repo-url.ts';
import { clusterId } from '../../service/hub/cluster-secret.ts';
import { replicaOf } from '../../service/hub/seat.ts';
import { pending, waitFor } from '../../test/support/wait-for.ts';
import type { Context } from '../context.ts';
import type { Forwarders } from '../forwarders.ts';
import { freePort, type LogLine, ServiceProcess } from '../service.ts';
import { round, type Spread, spread } from '../stats.ts';
import { HUB_LEASES, hubClusterName, hubNamespace, hubServeArgs, setUpHubClusters } from './hub.ts';

const REPLICAS = 3;
const TIMEOUT_MS = 6 * 60_000;

export interface FleetOptions {
  clusters: number;
  big: { clusters: number; configs: number; workloads: number };
  /** Another build's CLI (e.g. main's), measured the same way first. */
  baselineCli?: string;
  stop(label: string, svc: ServiceProcess): Promise<void>;
}

export interface FleetVariant {
  variant: string;
  /** First spawn until every cluster led, within the shares, and ready on its holder. */
  startSeconds: number;
  /** Each replica's VmRSS in steady state (MiB), by replica; and their max. */
  rssMiB: Record<string, number>;
  rssMaxMiB: number;
  /** Clusters led, by replica, in steady state. */
  led: Record<string, number>;
  /** Per spoke: how many replicas hold a connection to it, and how many connections in all. */
  spokeReplicas: Spread | null;
  spokeConnections: Spread | null;
  failover: {
    clustersMoved: number;
    /** Kill until the last moved cluster's 'ready' on a survivor (first: the first's). */
    seconds: number;
    firstSeconds: number;
    perCluster: Spread | null;
    /** Engines the survivors started after the kill (cold starts; the rest were warm standbys). */
    coldStarts: number;
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
  const lease = HUB_LEASES.fast;
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
          cli ? { cli } : {},
        );
        ctx.services.push(svc);
        started.push(svc);
        replicas.push({ id, svc });
      }
      const holders = async () => {
        const { items } = await kube.coordination.listNamespacedLease({ namespace: sysNs });
        const by = new Map(
          items.map((l) => [l.metadata?.name ?? '', replicaOf(l.spec?.holderIdentity ?? '')]),
        );
        return leaseNames.map((l) => by.get(l) ?? '');
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
      const balanced = await waitFor(
        async () => {
          const h = await holders();
          const count = (id: string) => h.filter((x) => x === id).length;
          const notReady = names.filter((c, i) => {
            const r = replicas.find((x) => x.id === h[i]);
            return !r || !readyIn(r.svc).has(c);
          });
          const over = replicas.filter((r) => count(r.id) > share).map((r) => r.id);
          return notReady.length === 0 && over.length === 0
            ? h
            : pending({ notReady: notReady.length, over });
        },
        {
          describe: `${N} clusters led by ${REPLICAS} replicas within their shares`,
          timeout: TIMEOUT_MS,
          interval: 500,
        },
      );
      const startSeconds = round((Date.now() - spawnedAt) / 1000, 1);
      // Engines of clusters given up while the shares settled stop within two lease durations, and the
      // idle keep-alive connections they leave close after 30 s (kube/watch-http.ts IDLE_KEEP_MS).
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
        `hub-fleet ${variant}: ${N} clusters ready in ${startSeconds}s; RSS ${JSON.stringify(rssMiB)} MiB, led ${JSON.stringify(led)}; replicas per spoke max ${Math.max(...spokes.map((s) => s.replicas.size))}`,
      );

      // Failover: the replica leading the most dies.
      const victim = [...replicas].sort(
        (a, b) => (led[b.id] ?? 0) - (led[a.id] ?? 0),
      )[0] as (typeof replicas)[number];
      const survivors = replicas.filter((r) => r !== victim);
      const moved = names.filter((_, i) => balanced[i] === victim.id);
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
      // A little longer: the survivors' memory after the takeover's lists.
      await new Promise((r) => setTimeout(r, 3000));
      clearInterval(sampler);
      const times = [...acted.values()].map((t) => (t - killedAt) / 1000);
      const coldStarts = survivors
        .map((r) => r.svc.logs.slice(from.get(r.id)).filter((l) => l.msg === 'serving cluster').length)
        .reduce((a, b) => a + b, 0);
      const v: FleetVariant = {
        variant,
        startSeconds,
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
        failover: {
          clustersMoved: moved.length,
          seconds: round(Math.max(...times), 2),
          firstSeconds: round(Math.min(...times), 2),
          perCluster: spread(times, 2),
          coldStarts,
          survivorPeakRatio: Object.fromEntries(
            survivors.map((r) => [r.id, round((peak[r.id] as number) / (before[r.id] as number), 2)]),
          ),
          survivorPeakMiB: Object.fromEntries(survivors.map((r) => [r.id, round(peak[r.id] as number, 1)])),
        },
      };
      variants.push(v);
      ctx.say(
        `hub-fleet ${variant}: failover moved ${moved.length}, the last acting ${v.failover.seconds}s after the kill (first ${v.failover.firstSeconds}s), ${coldStarts} cold starts, survivors' peak ${JSON.stringify(v.failover.survivorPeakMiB)} MiB (×${JSON.stringify(v.failover.survivorPeakRatio)})`,
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
