// Hub mode (`serve --hub`, docs/hub-mode.md): one install in the cluster where Argo CD runs serves the
// clusters Argo CD deploys to. Each cluster Secret opted in (label gitops-reloader.io/serve=true) gets
// its own engine: the same serve() as single-cluster mode, reaching that cluster with that Secret's
// credentials, its ledger and Lease in the hub's release namespace under the cluster's id. The hub
// watches Applications once and gives each engine a gate told only of the Applications whose
// destination resolves to its cluster. A cluster that cannot be reached holds only its own engine.

import type { V1Lease } from '@kubernetes/client-node';
import type { Router } from 'express';
import { type ArgoCd, appPath, newSyncGate, readApplication, trackingLabelKeeper } from '../argocd/argocd.ts';
import { type AppSync, appFromObject } from '../argocd/sync-tracker.ts';
import { argocdWebhookRouter } from '../argocd/webhook.ts';
import { buildInfo } from '../build-info.ts';
import type { Config } from '../config/config.ts';
import { FlagError } from '../config/flags.ts';
import { clusterKey } from '../core/config-hash.ts';
import type { LeaseRecord } from '../core/lease-logic.ts';
import { RateGate } from '../core/token-bucket.ts';
import { WatchProgress } from '../http.ts';
import type { ClusterAccess } from '../kube/access.ts';
import { coreApi, leaseRosterApi } from '../kube/api.ts';
import { defaultIdentity, recordOf } from '../kube/leader.ts';
import { CLUSTER_ID_LABEL } from '../kube/ledger.ts';
import { startWatch, type Watch, type WatchFailure, withBeats } from '../kube/watch.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import { hashKey, type RunningService, serve, WATCH_UNREADY_AFTER_MS } from '../serve.ts';
import type { ClusterState } from '../state.ts';
import { AppRouter } from './app-router.ts';
import {
  CLUSTER_SECRET_TYPE_LABEL,
  CREDENTIALS_LABEL,
  type CredentialsReading,
  readClusterSecret,
  readCredentialsSecret,
  registration,
  type ServedCluster,
} from './cluster-secret.ts';
import { carryServer, chooseCredentials, nextStep } from './credentials-choice.ts';
import { ClusterDirectory } from './directory.ts';
import { HubMetrics } from './hub-metrics.ts';
import { LeaseSightings } from './lease-sightings.ts';
import {
  admit,
  closeSeat,
  clusterConfig,
  openSeat,
  promotions,
  type Seat,
  type SeatDeps,
  scopeOf,
  startEngine,
  stopEngine,
} from './seat.ts';
import { fairShare, ReplicaRoster, rank, standbyPicks } from './shares.ts';
import { assign, weightOf } from './weighted-share.ts';

/** Cold engines a replica starts at once (each lists its cluster; a failover starts the dead replica's share less the warm standbys). */
const MAX_STARTING = 8;
/** While shards from before the cluster label exist, how often the hub asks again whether they still do. */
const UNLABELLED_RECHECK_MS = 10 * 60_000;

interface SecretEntry {
  name: string;
  server: string;
  reading: ReturnType<typeof readClusterSecret>;
}

export async function serveHub(
  cfg: Config,
  kc: ClusterAccess,
  log: Logger,
  metrics: Metrics,
): Promise<RunningService> {
  const controlNamespace = cfg.argocdNamespaces[0];
  if (controlNamespace === undefined) {
    throw new FlagError('--hub needs --argocd-namespaces: the first holds the cluster Secrets');
  }
  if (cfg.defaultStrategy === 'git') {
    throw new FlagError('--default-strategy=git is not served in hub mode yet (docs/hub-mode.md)');
  }
  if (cfg.fluxNamespaces.length > 0 || cfg.fluxWebhookTokenFile !== undefined) {
    log.info(
      { fluxNamespaces: cfg.fluxNamespaces },
      'Flux is not served in hub mode yet; its flags are ignored',
    );
  }
  const key = await hashKey(cfg, coreApi(kc), log);
  const hubMetrics = new HubMetrics(metrics, {
    ...buildInfo(),
    countByNamespace: cfg.metricsCountByNamespace,
  });
  // The replica's identity: its roster Lease's; each seat elects as `<identity>/<cluster id>`.
  const identity = cfg.leaderIdentity ?? defaultIdentity();
  const releaseNamespace = cfg.releaseNamespace as string;
  const abort = new AbortController();
  // One write budget for the hub's own API server, shared by every engine of this replica (ADR 0043).
  const homeWrites = new RateGate({
    qps: cfg.hubWriteQps,
    burst: cfg.hubWriteBurst,
    onPass: (ms) => hubMetrics.homeWriteWaited(ms / 1000),
  });
  // Whether ledger shards or Job records from before the cluster label (ADR 0043) are in the release
  // namespace: asked once per component (one LIST of at most one item), again at most every
  // UNLABELLED_RECHECK_MS while some are, so that no term's start reads what cannot be there.
  const unlabelledAsked = new Map<string, { at: number; answer: Promise<boolean>; some?: boolean }>();
  const unlabelled = (component: 'ledger' | 'job-spec'): Promise<boolean> => {
    const now = performance.now();
    const last = unlabelledAsked.get(component);
    if (last && !(last.some === true && now - last.at > UNLABELLED_RECHECK_MS)) return last.answer;
    const entry: { at: number; answer: Promise<boolean>; some?: boolean } = {
      at: now,
      answer: coreApi(kc)
        .listNamespacedConfigMap({
          namespace: releaseNamespace,
          labelSelector: `app.kubernetes.io/component=${component},!${CLUSTER_ID_LABEL}`,
          limit: 1,
        })
        .then((page) => page.items.length > 0),
    };
    unlabelledAsked.set(component, entry);
    // A failed answer is asked again next time; 'none' is kept (new ones are created labelled).
    entry.answer.then(
      (some) => {
        entry.some = some;
      },
      () => {
        if (unlabelledAsked.get(component) === entry) unlabelledAsked.delete(component);
      },
    );
    return entry.answer;
  };
  const directory = new ClusterDirectory();
  /** Served clusters by server (Argo CD's key for a cluster). */
  const seats = new Map<string, Seat>();
  const apps = new AppRouter(directory, (server) => seats.get(server)?.gate);
  const watches: Watch<unknown>[] = [];
  // The hub's own watches (cluster Secrets, Applications) decide its readiness and liveness; a served
  // cluster's failing watches are that cluster's, and leave the hub ready for the others.
  const progress = new WatchProgress(2 * cfg.relistIntervalMs + 60_000);
  const onFailure = (f: WatchFailure) => {
    progress.report(f);
    log[f.mode === 'relist' ? 'info' : 'warn'](
      { watch: f.path, mode: f.mode, status: f.status, retryInMs: f.retryInMs, reason: f.reason },
      f.message,
    );
  };

  /** A watch whose every event and listing counts as progress (liveness). */
  function startBeating<S>(o: Parameters<typeof startWatch<S>>[1]): Watch<unknown> {
    const beat = () => progress.beat(o.path);
    beat();
    return startWatch<S>(kc, withBeats(beat, o)) as Watch<unknown>;
  }

  // The engines' gates see Applications from here: one watch for every cluster.
  const appsSynced: Promise<void>[] = [];
  for (const ns of cfg.argocdNamespaces) {
    let done!: () => void;
    appsSynced.push(new Promise<void>((r) => (done = r)));
    watches.push(
      startBeating<AppSync>({
        path: appPath(ns),
        relistIntervalMs: cfg.relistIntervalMs,
        idleTimeoutMs: cfg.watchIdleTimeoutMs,
        onFailure,
        transform: (raw) => appFromObject(raw),
        onAdd: (_k, app) => apps.route(app),
        onUpdate: (_k, app) => apps.route(app),
        onDelete: (_k, old) => apps.deleted(old.app),
        onSynced: done,
      }) as Watch<unknown>,
    );
  }
  const allAppsSynced = Promise.all(appsSynced).then(() => undefined);

  /** The Argo CD part of one cluster's engine: a gate fed with the Applications deploying to it. */
  const argocdOf = (seat: Seat, clusterLog: Logger, state: ClusterState): ArgoCd => {
    const gate = newSyncGate({
      cfg,
      state,
      log: clusterLog,
      watched: (ns) => cfg.argocdNamespaces.includes(ns),
      refresh: async (app) => {
        const now = await readApplication(kc, app, abort.signal);
        // An Application that now deploys elsewhere is gone, for this cluster.
        return now && directory.serverOf(now.destination) === seat.cluster.server ? now : undefined;
      },
    });
    seat.gate = gate;
    for (const app of apps.appsOf(seat.cluster.server)) gate.observe(app);
    return {
      gate,
      synced: allAppsSynced,
      router: undefined,
      watchedNamespaces: cfg.argocdNamespaces,
      withTrackingLabel: trackingLabelKeeper(cfg),
      stop: async () => {
        if (seat.gate === gate) seat.gate = undefined;
        gate.stop();
      },
    };
  };

  // Sharding (ADR 0043): every replica computes one plan each roster round, the weighted fair share
  // (weighted-share.ts: bounded loads in weight and number, clusters staying where they are led while
  // within the bounds), and leads only the clusters the plan gives it. As a guard, it never leads
  // more than ⌈clusters ÷ live replicas⌉ (service/hub/shares.ts), counting its claims: a claim lapses
  // after a lease duration, or once another replica is seen leading the cluster.
  const leading = (except?: Seat) =>
    [...seats.values()].filter(
      (s) =>
        s !== except &&
        (holds(s) ||
          (s.claimedAt !== undefined &&
            performance.now() - s.claimedAt < cfg.leaseDurationMs &&
            !ledElsewhere(s))),
    ).length;
  const share = () => fairShare(seats.size, roster?.live ?? 1);
  /** This round's plan and the last round's (a cluster is given up only when both put it elsewhere). */
  let plan: Map<string, string> | undefined;
  let lastPlan: Map<string, string> | undefined;
  /** A cluster's weight: its engine's here, else what its leader published, else 1 (unknown). */
  const weightOfSeat = (s: Seat): number => {
    const here = s.running?.isSynced() ? s.running.weight?.() : undefined;
    return here !== undefined ? weightOf(here, 0) : (roster?.weights.get(s.cluster.id) ?? 1);
  };
  const replan = () => {
    if (!roster?.counted || !leases.synced) return;
    const current = new Map(
      [...seats.values()].map((s) => [
        s.cluster.id,
        s.running?.isLeader() ? identity : leases.leader(leaseOf(s)),
      ]),
    );
    lastPlan = plan;
    plan = assign(
      [...seats.values()].map((s) => ({ id: s.cluster.id, weight: weightOfSeat(s) })),
      [...roster.liveIdentities].sort(),
      current,
    );
  };
  const planned = (seat: Seat) => plan?.get(seat.cluster.id);
  const mayLead = (seat: Seat): boolean => {
    if (!roster) return leading(seat) < share();
    if (planned(seat) !== identity || leading(seat) >= share()) return false;
    seat.claimedAt = performance.now();
    return true;
  };
  /** Gives up the Leases of clusters the plan puts on another replica, two rounds running. */
  const rebalance = () => {
    for (const s of [...seats.values()].filter((x) => x.running?.isLeader())) {
      const to = planned(s);
      if (to === undefined || to === identity || lastPlan?.get(s.cluster.id) !== to) continue;
      s.claimedAt = undefined;
      log.info(
        { cluster: s.cluster.name, to, weight: weightOfSeat(s), replicas: roster?.live },
        'the weighted fair share puts the cluster on another replica; giving it up',
      );
      void s.running?.yieldLease("over this replica's fair share", 2 * cfg.leaseDurationMs);
    }
  };
  const roster = cfg.leaderElect
    ? new ReplicaRoster({
        api: leaseRosterApi(kc),
        namespace: releaseNamespace,
        releaseName: cfg.releaseName,
        identity,
        leaseDurationMs: cfg.leaseDurationMs,
        retryPeriodMs: cfg.leaseRetryPeriodMs,
        log,
        onRound: () => {
          replan();
          rebalance();
          steer();
        },
        // What this replica leads, weighed: the others plan with it.
        weights: () =>
          Object.fromEntries(
            [...seats.values()]
              .filter((s) => s.running?.isLeader())
              .map((s) => [s.cluster.id, weightOfSeat(s)]),
          ),
      })
    : undefined;
  roster?.start();

  // Every Lease in the release namespace: who leads each served cluster, seen on this process's clock.
  if (cfg.leaderElect) {
    watches.push(
      startBeating<LeaseRecord>({
        path: `/apis/coordination.k8s.io/v1/namespaces/${releaseNamespace}/leases`,
        relistIntervalMs: cfg.relistIntervalMs,
        idleTimeoutMs: cfg.watchIdleTimeoutMs,
        onFailure,
        key: (raw) => (raw as V1Lease).metadata?.name ?? '',
        transform: (raw) => recordOf(raw as V1Lease),
        onAdd: (k, r) => leases.saw(k, r),
        onUpdate: (k, r) => leases.saw(k, r),
        onDelete: (k) => leases.gone(k),
        onSynced: () => {
          leases.synced = true;
          steerSoon();
        },
      }),
    );
  }

  // Our own credentials Secrets (the least-privilege alternative to Argo CD's), by Secret: for their
  // server, they are used instead of the cluster Secret's credentials; refused, they hold it
  // (credentials-choice.ts): Argo CD's credentials are never used for a server one of ours names.
  const overrides = new Map<string, CredentialsReading>();
  const credentialsOf = (c: ServedCluster) => chooseCredentials(c, overrides);
  /** Applies to a seat's access the credentials it should use now, if they changed. */
  const useCredentials = (seat: Seat) => {
    const choice = credentialsOf(seat.cluster);
    const step = nextStep(seat.using, choice);
    const where = { cluster: seat.cluster.name, server: seat.cluster.server };
    if (step.step === 'rotate') {
      seat.access.rotate(step.to.use);
      seat.using = { digest: step.to.digest, from: step.to.from, ours: step.to.ours };
      log.info({ ...where, credentials: step.to.from }, 'cluster credentials rotated');
    } else if (step.step === 'keep') {
      log.error(
        {
          ...where,
          secret: step.secret,
          reason: step.reason,
          credentials: (seat.using as { from: string }).from,
        },
        'cluster keeps its last good credentials: a credentials Secret of ours for it is refused',
      );
    } else if (step.step === 'hold') {
      seat.access.hold(`${step.secret}: ${step.reason}`);
      seat.using = { held: step.reason };
      log.error(
        { ...where, secret: step.secret, reason: step.reason },
        'cluster held: its credentials are refused, and no others are used for it',
      );
    }
    held.set(seat, 'held' in seat.using);
  };
  /** The seats held for refused credentials (the gauge gitops_reloader_hub_clusters_held). */
  const held = new Map<Seat, boolean>();
  hubMetrics.countHeld(
    () => [...held.values()].filter(Boolean).length,
    () => [...overrides.values()].filter((r) => 'refused' in r).length,
  );

  /** A seat for the cluster: its engine starts once the cluster answers (service/hub/seat.ts). */
  const open = (cluster: ServedCluster): Seat => {
    const using = credentialsOf(cluster);
    if ('hold' in using) {
      log.error(
        { cluster: cluster.name, server: cluster.server, secret: using.secret, reason: using.hold },
        'cluster held: its credentials are refused, and no others are used for it',
      );
    }
    const seat = openSeat(cluster, using);
    engines.set(seat, {
      cfg: clusterConfig(cfg, cluster, identity),
      log: log.child({ cluster: cluster.name || cluster.server }),
      credentialsFrom: (seat) => ('from' in seat.using ? seat.using.from : 'none (held)'),
      engine: async (seat, clusterCfg, clusterLog) => {
        const clusterMetrics = hubMetrics.forCluster(cluster);
        seat.dropMetrics = () => hubMetrics.drop(cluster.id, clusterMetrics);
        return serve(clusterCfg, seat.access, clusterLog, clusterMetrics, {
          home: kc,
          // Its own key: a namespace key of one cluster computes nothing in another.
          hashKey: clusterKey(key, cluster.server),
          argocd: (state) => argocdOf(seat, clusterLog, state),
          mayLead: () => mayLead(seat),
          clusterId: cluster.id,
          unlabelled,
          seen: leases.seen(leaseOf(seat)),
          homeWrites,
        });
      },
    });
    held.set(seat, 'held' in seat.using);
    steerSoon();
    return seat;
  };
  const close = (seat: Seat, why: string) => {
    held.delete(seat);
    engines.delete(seat);
    return closeSeat(seat, why, log);
  };

  // Which seats run an engine (ADR 0043): those this replica leads or is to take (within its share),
  // and a bounded warm standby of others; every other seat is cold, with no watch of its cluster.
  /** Each seat's engine starter (seat.ts SeatDeps). */
  const engines = new Map<Seat, SeatDeps>();
  /** A cluster's Lease: `<release>-<cluster id>-leader` (serve.ts, with clusterConfig's releaseName). */
  const leaseOf = (seat: Seat) => `${cfg.releaseName}-${seat.cluster.id}-leader`;
  const leases = new LeaseSightings(cfg.leaseDurationMs);
  /**
   * This replica holds the cluster's Lease: its engine acts, or the Lease names it (a term whose start
   * is still under way: its engine does not act yet, and must not be stopped).
   */
  const holds = (seat: Seat) =>
    (seat.running?.isLeader() ?? false) ||
    (seat.engine !== undefined && leases.leader(leaseOf(seat)) === identity);
  const ledElsewhere = (seat: Seat) => {
    const leader = leases.leader(leaseOf(seat));
    return leader !== undefined && leader !== identity;
  };
  /** How long a started engine that leads nothing is kept before it is stopped (a start, a hold-off). */
  const graceMs = 2 * cfg.leaseDurationMs + cfg.leaseRetryPeriodMs;
  let steering = false;
  const steer = () => {
    if (abort.signal.aborted) return;
    if (!cfg.leaderElect) {
      for (const [seat, d] of engines) startEngine(seat, d);
      return;
    }
    // Not before the Leases were listed and the live replicas counted: a replica that thinks itself
    // alone would start an engine for every cluster.
    if (!leases.synced || !roster?.counted) return;
    const now = performance.now();
    const leaderOf = (seat: Seat) => leases.leader(leaseOf(seat), now);
    const standby = new Set(
      standbyPicks({
        clusters: [...engines.keys()].map((s) => ({ id: s.cluster.id, leader: leaderOf(s) })),
        live: roster?.liveIdentities ?? [identity],
        self: identity,
        limit: cfg.hubStandbyClusters,
      }),
    );
    // Free clusters are started best-ranked for this replica first (rendezvous hashing): two survivors
    // taking over a dead replica's clusters mostly pick different ones instead of racing for each.
    const byRank = [...engines].sort(([a], [b]) => {
      const ra = rank(a.cluster.id, identity);
      const rb = rank(b.cluster.id, identity);
      return ra === rb ? 0 : ra > rb ? -1 : 1;
    });
    // Engines start a few at a time (MAX_STARTING): on a busy replica, many lists at once would delay
    // the Lease renewals of the clusters it already leads. Takes before standbys.
    // (An engine not synced after a grace, e.g. of a cluster that does not answer, no longer counts.)
    let starting = [...engines.keys()].filter(
      (s) => s.engine && !s.running?.isSynced() && now - s.engine.since < graceMs,
    ).length;
    const start = (seat: Seat, d: SeatDeps) => {
      starting++;
      startEngine(seat, d);
    };
    for (const [seat, d] of byRank) {
      if (seat.engine || starting >= MAX_STARTING) continue;
      const leader = leaderOf(seat);
      const free = leader === undefined || leader === identity;
      if (free && planned(seat) === identity && leading() < share()) {
        seat.claimedAt = now; // counts against the share until it leads (or the claim lapses)
        start(seat, d);
      }
    }
    for (const [seat, d] of byRank) {
      if (!seat.engine && starting < MAX_STARTING && standby.has(seat.cluster.id)) start(seat, d);
    }
    for (const seat of engines.keys()) {
      if (!seat.engine || holds(seat) || standby.has(seat.cluster.id)) continue;
      const claimed = seat.claimedAt !== undefined && now - seat.claimedAt < graceMs;
      // Another replica leads it (it won the race, or took it after this one gave it up), or this one
      // neither claimed it nor started its engine lately (an engine still listing is left to finish).
      const idle = !claimed && seat.running?.isSynced() === true && now - seat.engine.since > graceMs;
      if (ledElsewhere(seat) || idle) {
        void stopEngine(seat, 'another replica leads the cluster, and it is not kept warm here', log);
      }
    }
  };
  /** Steers once the current change is applied (a seat opened in it has its deps). */
  const steerSoon = () => {
    if (steering) return;
    steering = true;
    queueMicrotask(() => {
      steering = false;
      steer();
    });
  };

  // The cluster Secrets, served or not (an Application's destination.name resolves through them all).
  // Changes are applied one at a time, in order, so a seat is never opened twice.
  // Not before our own credentials Secrets are listed: a cluster is never opened with Argo CD's
  // credentials when ours exist for it.
  let credentialsDone!: () => void;
  const credentialsSynced = new Promise<void>((r) => (credentialsDone = r));
  let applying = credentialsSynced;
  const apply = (secret: string, entry: SecretEntry | undefined) => {
    applying = applying
      .then(() => applyNow(secret, entry))
      .catch((err: Error) => {
        log.error({ secret, err: err.message }, 'could not apply a cluster Secret change');
      });
  };
  /** Each cluster Secret that wants its cluster served (opted in, read, in scope), served or not. */
  const wanting = new Map<string, ServedCluster>();
  const servedFrom = (secret: string): Seat | undefined => {
    for (const s of seats.values()) if (s.cluster.secret === secret) return s;
    return undefined;
  };
  const applyNow = async (secret: string, entry: SecretEntry | undefined) => {
    const moved = entry ? directory.put(secret, entry) : directory.delete(secret);
    const reading = entry?.reading;
    const seat = servedFrom(secret);
    const served = reading && 'served' in reading ? reading.served : undefined;
    if (reading && 'refused' in reading) {
      log.warn({ secret, reason: reading.refused }, 'cluster Secret refused; its cluster is not served');
    }
    const scope = served ? scopeOf(cfg.namespaces, served.namespaces) : undefined;
    if (served && scope === undefined) {
      log.warn(
        { secret, namespaces: served.namespaces },
        "cluster Secret's namespaces share none with --namespaces; its cluster is not served",
      );
    }
    const wanted = scope !== undefined ? served : undefined;
    if (wanted) wanting.set(secret, wanted);
    else wanting.delete(secret);
    if (seat && wanted && seat.cluster.server === wanted.server && sameScope(seat.cluster, wanted)) {
      seat.cluster = wanted;
      useCredentials(seat);
    } else {
      if (seat) {
        seats.delete(seat.cluster.server);
        await close(seat, wanted ? 'its cluster Secret changed server or namespaces' : 'no longer opted in');
      }
      if (wanted) {
        const may = admit(
          [...seats.values()].map((s) => s.cluster),
          wanted,
        );
        if ('sameId' in may) {
          // Two servers with one id would share a Lease and a ledger: neither is served (with 128
          // bits of digest, only a crafted collision gets here).
          const clash = seats.get(may.server) as Seat;
          seats.delete(may.server);
          await close(clash, 'another cluster Secret names a server with the same cluster id');
          log.error(
            { secret, server: wanted.server, id: wanted.id, other: may.sameId },
            'two cluster Secrets name servers with one cluster id; neither is served',
          );
        } else if ('sameServer' in may) {
          log.warn(
            { secret, server: wanted.server, servedFrom: may.sameServer },
            'another cluster Secret already serves this server; this one is not served',
          );
        } else seats.set(wanted.server, open(wanted));
      }
    }
    // A server left without a seat (its Secret deleted, changed, or a clash gone) is served from the
    // next Secret that wants it.
    for (const next of promotions(wanting, (server) => seats.has(server))) {
      const c = wanting.get(next) as ServedCluster;
      log.info({ secret: next, server: c.server }, 'cluster Secret now serves its cluster');
      seats.set(c.server, open(c));
    }
    if (moved) apps.reroute();
  };

  let secretsDone!: () => void;
  const secretsSynced = new Promise<void>((r) => (secretsDone = r));
  const entryOf = (raw: Parameters<typeof readClusterSecret>[0]): SecretEntry => {
    const { name, server } = registration(raw);
    return { name, server, reading: readClusterSecret(raw) };
  };
  watches.push(
    startBeating<SecretEntry>({
      path: `/api/v1/namespaces/${controlNamespace}/secrets`,
      labelSelector: `${CLUSTER_SECRET_TYPE_LABEL}=cluster`,
      relistIntervalMs: cfg.relistIntervalMs,
      idleTimeoutMs: cfg.watchIdleTimeoutMs,
      onFailure,
      transform: (raw) => entryOf(raw as Parameters<typeof readClusterSecret>[0]),
      onAdd: (k, e) => apply(k, e),
      onUpdate: (k, e) => apply(k, e),
      onDelete: (k) => apply(k, undefined),
      onSynced: secretsDone,
    }) as Watch<unknown>,
  );
  const applyCredentials = (secret: string, raw: CredentialsReading | undefined) => {
    // At once: a cluster opened after this uses them; open ones rotate (or hold) in turn.
    const reading = raw && carryServer(overrides.get(secret), raw);
    if (reading) overrides.set(secret, reading);
    else overrides.delete(secret);
    if (reading && 'refused' in reading) {
      log.error({ secret, server: reading.server, reason: reading.refused }, 'credentials Secret refused');
    }
    applying = applying.then(() => {
      for (const seat of seats.values()) useCredentials(seat);
    });
  };
  watches.push(
    startBeating<CredentialsReading>({
      path: `/api/v1/namespaces/${releaseNamespace}/secrets`,
      labelSelector: `${CREDENTIALS_LABEL}=true`,
      relistIntervalMs: cfg.relistIntervalMs,
      idleTimeoutMs: cfg.watchIdleTimeoutMs,
      onFailure,
      transform: (raw) =>
        readCredentialsSecret(raw as Parameters<typeof readCredentialsSecret>[0], {
          execCommands: cfg.hubExecCommands,
        }),
      onAdd: (k, r) => applyCredentials(k, r),
      onUpdate: (k, r) => applyCredentials(k, r),
      onDelete: (k) => applyCredentials(k, undefined),
      onSynced: credentialsDone,
    }),
  );
  log.info(
    { secretsIn: controlNamespace, applicationsIn: cfg.argocdNamespaces, credentialsIn: releaseNamespace },
    'hub mode',
  );

  const synced = Promise.all([allAppsSynced, secretsSynced, credentialsSynced]).then(() => applying);
  let isSynced = false;
  void synced.then(() => {
    isSynced = true;
  });

  const webhook: Router | undefined = cfg.webhookTokenFile
    ? argocdWebhookRouter({
        tokenFile: cfg.webhookTokenFile,
        // A hint only (the Application watch is what gates): handed to the engine of the cluster the
        // Application deploys to, when this replica acts for it.
        notify: async (n) => {
          const server = apps.serverOf(n.app);
          const seat = server === undefined ? undefined : seats.get(server);
          if (!seat?.running?.isLeader() || !seat.gate) {
            return {
              outcome: 'accepted',
              action: 'not acting for its cluster here; the Application watch gates',
            };
          }
          return seat.gate.notify(n);
        },
        log,
      })
    : undefined;

  return {
    ready: synced,
    argocdWebhook: webhook,
    metrics: hubMetrics,
    fluxWebhook: undefined,
    isLeader: () => [...seats.values()].some((s) => s.running?.isLeader()),
    isSynced: () => isSynced,
    watchesFailing: () => progress.failing(WATCH_UNREADY_AFTER_MS),
    watchesProgressing: () => progress.progressing(),
    status: () => ({
      hub: true,
      clusters: Object.fromEntries(
        [...seats.values()].map((s) => [
          s.cluster.id,
          {
            name: s.cluster.name,
            server: s.cluster.server,
            ...(s.running
              ? (s.running.status() as Record<string, unknown>)
              : !s.engine
                ? { leader: false }
                : 'held' in s.using
                  ? { starting: true, held: s.using.held }
                  : { starting: true }),
          },
        ]),
      ),
    }),
    yieldLease: async (reason, holdOffMs) => {
      await Promise.all([...seats.values()].map((s) => s.running?.yieldLease(reason, holdOffMs)));
    },
    stop: async () => {
      abort.abort(new Error('the service is stopping'));
      // A change being applied finishes first (a seat half-opened is then closed below); a watch that
      // never listed does not hold the shutdown up.
      await Promise.race([applying, new Promise((r) => setTimeout(r, 5_000).unref())]);
      await Promise.all([...seats.values()].map((s) => close(s, 'the service is stopping')));
      seats.clear();
      await roster?.stop();
      await Promise.all(watches.map((w) => w.stop()));
    },
  };
}

const sameScope = (a: ServedCluster, b: ServedCluster) =>
  a.namespaces.length === b.namespaces.length && a.namespaces.every((n, i) => b.namespaces[i] === n);
