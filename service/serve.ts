// `gitops-reloader serve`: watches configs and workloads, and reloads what changed.

import type { Router } from 'express';
import { AlertSender } from './alerts/sender.ts';
import { type ArgoCd, startArgoCd } from './argocd/argocd.ts';
import { inboxSelector, NotificationInbox } from './argocd/inbox.ts';
import { type InboxRecord, inboxRecordOf, takeFromInbox } from './argocd/inbox-consumer.ts';
import type { SyncNotification } from './argocd/notification.ts';
import { receiveNotification } from './argocd/receive.ts';
import { catchUp, namespaceCreation } from './catch-up.ts';
import { type Config, readHashKeyFile, readWebhookKeyFile } from './config/config.ts';
import { FlagError } from './config/flags.ts';
import { compileGlobals } from './core/annotations.ts';
import { composeGates } from './core/change-gates.ts';
import { keyFingerprint } from './core/config-hash.ts';
import type { Observed } from './core/lease-logic.ts';
import { RateGate } from './core/token-bucket.ts';
import type { ReloadStatus } from './engine/status.ts';
import { startFlux } from './flux/flux.ts';
import { WatchProgress } from './http.ts';
import { type ClusterAccess, writeGatedAccess } from './kube/access.ts';
import { appsApi, batchApi, type CoreApi, coreApi, customApi } from './kube/api.ts';
import { EventRecorder } from './kube/events.ts';
import { HashKeyError, readOrCreateHashKey } from './kube/hash-key-secret.ts';
import { JobSpecStore } from './kube/job-spec-store.ts';
import {
  CachesNotSynced,
  type LeaderElection,
  leaderWriteFence,
  startLeaderElection,
  within,
} from './kube/leader.ts';
import { Ledger } from './kube/ledger.ts';
import { CONFIG_RESOURCES, collectionPath, type Resource } from './kube/resources.ts';
import { startWatch, type Watch, type WatchFailure, withBeats } from './kube/watch.ts';
import type { Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { Reconciler } from './reconciler.ts';
import { routeEvents } from './routing.ts';
import { ClusterState } from './state.ts';
import { strategyExecutor } from './strategies/execute.ts';
import { createGitCommitter } from './strategies/git-commit.ts';
import { RestartBudget } from './strategies/restart-budget.ts';

/** Reads the HMAC key: --hash-key-file, else the Secret <release-name>-hash-key (created when missing). */
export async function hashKey(cfg: Config, core: CoreApi, log: Logger): Promise<Buffer> {
  if (cfg.hashKeyFile) return readHashKeyFile(cfg.hashKeyFile);
  if (!cfg.releaseNamespace) {
    throw new FlagError(
      'no --hash-key-file, and no --release-namespace (or POD_NAMESPACE) to read the hash-key Secret from',
    );
  }
  try {
    return await readOrCreateHashKey({
      core,
      namespace: cfg.releaseNamespace,
      name: `${cfg.releaseName}-hash-key`,
      create: cfg.createHashKey,
      log: (msg, f) => log.info(f, msg),
    });
  } catch (err) {
    throw err instanceof HashKeyError ? new FlagError(`no --hash-key-file, and ${err.message}`) : err;
  }
}

/**
 * How long a replica whose start as leader failed waits before it competes for the lease again:
 * doubling from one lease duration (so a healthy standby takes the released lease first), capped at 5 min.
 */
export function startBackoffMs(failedStarts: number, leaseDurationMs: number): number {
  return Math.min(leaseDurationMs * 2 ** Math.max(0, failedStarts - 1), 300_000);
}

export { HELM_RELEASE_EXCLUDED } from './routing.ts';

/**
 * A replica whose watch has failed for this long without one success is not ready (docs/adr/0027):
 * its cache is going stale. Longer than a retry or two, so a blip does not flap readiness.
 */
export const WATCH_UNREADY_AFTER_MS = 60_000;

/** Hub mode's status: each served cluster's, by its name (or server). */
export interface HubStatus {
  hub: true;
  /**
   * By cluster id (names are not unique in Argo CD): its name and server, and its engine's status as
   * this replica sees it.
   */
  clusters: Record<string, { name: string; server: string } & Record<string, unknown>>;
}

export interface RunningService {
  /** Resolves once caches are synced and start-up decisions are made. */
  ready: Promise<void>;
  /** POST /api/v1/argocd/notifications, for the HTTP server; undefined without --webhook-token-file. */
  argocdWebhook: Router | undefined;
  /** POST /api/v1/flux/events, for the HTTP server; undefined without --flux-webhook-token-file. */
  fluxWebhook: Router | undefined;
  /** True while this replica acts (holds the lease, or runs without leader election). */
  isLeader(): boolean;
  /** Every watch has listed once: the caches are warm (standbys too). */
  isSynced(): boolean;
  /** Watches whose failures have gone on without a success for WATCH_UNREADY_AFTER_MS (readiness). */
  watchesFailing(): string[];
  /** False when a watch loop stopped cycling, or failed without a success for as long (liveness). */
  watchesProgressing(): boolean;
  /** What the engine does now, when this replica leads (engine/status.ts). */
  status(): ReloadStatus | { leader: false } | HubStatus;
  /** What /metrics exports, when not the Metrics given to serve (hub mode: every cluster's, labelled). */
  metrics?: { readonly contentType: string; text(): Promise<string> };
  /** Gives the Lease up (if held) and does not compete for it for `holdOffMs`: hub mode's rebalancing. */
  yieldLease(reason: string, holdOffMs: number): Promise<void>;
  /** What the engine carries: its workloads plus its configs (hub mode's weighted share). */
  weight?(): number;
  stop(): Promise<void>;
}

/**
 * What hub mode (service/hub/hub.ts) gives the engine of one served cluster: `kc` then reaches that
 * cluster (its watches and reloads), while its ledger, Lease and job records live in the hub.
 */
export interface HubSeat {
  /** The hub's own access: its release namespace holds this cluster's ledger, Lease and records. */
  home: ClusterAccess;
  /** The process's HMAC key, read once for every cluster. */
  hashKey: Buffer;
  /** The cluster's share of the hub's one Application watch: a gate that sees only its Applications. */
  argocd(state: ClusterState): ArgoCd;
  /** May this replica take the cluster's Lease now (its fair share of the clusters, service/hub/shares.ts)? */
  mayLead(): boolean;
  /** The cluster's id: its ledger shards and job records carry it as a label and are listed by it. */
  clusterId: string;
  /**
   * Whether ledger shards or Job records from before the cluster label may be in the release namespace
   * (asked once by the hub, not at every term's start).
   */
  unlabelled?: (component: 'ledger' | 'job-spec') => Promise<boolean>;
  /** The cluster's Lease as the hub last saw it (hub/lease-sightings.ts): its election starts from it. */
  seen?: Observed;
  /**
   * The management cluster's write budget (--hub-write-qps), shared by every engine of the replica: its
   * ledger, job record and Event writes there wait for it instead of the served cluster's.
   */
  homeWrites?: RateGate;
}

export async function serve(
  cfg: Config,
  kc: ClusterAccess,
  log: Logger,
  metrics: Metrics = new Metrics({ defaultMetrics: false }),
  hub?: HubSeat,
): Promise<RunningService> {
  // One write rate limit for the whole process, shared by every reload: it, not the number of reloads
  // running, protects the API server (docs/adr/0018). Lease renewals (the election's own `kc`) and
  // reads (watches, relists) do not wait for it.
  const writeGate = new RateGate({
    qps: cfg.apiWriteQps,
    burst: cfg.apiWriteBurst,
    onPass: (ms) => metrics.apiWriteWaited(ms / 1000),
  });
  metrics.apiWritesWaitingFrom(() => writeGate.waiting);
  const pass = (signal: AbortSignal) => writeGate.pass(signal);
  // Set below when this replica elects; undefined without leader election (nothing to fence).
  let election: LeaderElection | undefined;
  // Writes any replica may make (notification records, Events, the hash key at first start)...
  const core = coreApi(writeGatedAccess(kc, pass));
  // ...and the leader's (reloads, the ledger): each is checked against the Lease by the clock
  // immediately before it is sent, so none goes out after the term ended (docs/adr/0027).
  const writes = writeGatedAccess(
    kc,
    pass,
    leaderWriteFence(() => election),
  );
  const leaderCore = coreApi(writes);
  // Where the ledger, the Lease and the job records live: this cluster, or the hub (hub mode).
  const home = hub?.home ?? kc;
  // Hub mode: writes to the hub's own API server pass the replica's one budget for it, not this
  // cluster's (N clusters would otherwise allow N × --api-write-qps there).
  const homePass = hub?.homeWrites
    ? (signal: AbortSignal) => (hub.homeWrites as RateGate).pass(signal)
    : pass;
  const homeCore = hub ? coreApi(writeGatedAccess(home, homePass)) : core;
  const leaderHomeCore = hub
    ? coreApi(
        writeGatedAccess(
          home,
          homePass,
          leaderWriteFence(() => election),
        ),
      )
    : leaderCore;
  if (!cfg.releaseNamespace) {
    throw new FlagError(
      '--release-namespace (or the POD_NAMESPACE env var) is required: it holds the ledger',
    );
  }
  const key = hub ? hub.hashKey : await hashKey(cfg, core, log);
  const { globals, problems } = compileGlobals(cfg);
  if (problems.length > 0) throw new FlagError(problems.join('; '));

  const state = new ClusterState(cfg.defaultStrategy, cfg.enableCsiIntegration);
  // Hub mode: whether state from before the cluster label may exist (ADR 0043).
  const unlabelled = hub?.unlabelled;
  const ledger = new Ledger({
    core: leaderHomeCore,
    namespace: cfg.releaseNamespace,
    prefix: cfg.releaseName,
    shards: cfg.ledgerShards,
    dryRun: cfg.dryRun,
    keyFingerprint: keyFingerprint(key),
    ...(hub ? { owner: hub.clusterId } : {}),
    ...(unlabelled ? { unlabelledMayExist: () => unlabelled('ledger') } : {}),
    log: (level, msg, f) => log[level](f, msg),
  });
  const ignored = new Set(cfg.ignoreNamespaces);
  const allowedByLabel = new Set<string>();
  const inScope = (ns: string) =>
    !ignored.has(ns) &&
    (cfg.namespaces.length === 0 || cfg.namespaces.includes(ns)) &&
    (cfg.namespaceSelector === undefined || allowedByLabel.has(ns));
  // Set once this replica acts as leader (below); the webhook reads it.
  let acting = false;
  let inbox: NotificationInbox | undefined;
  const releaseNamespace = cfg.releaseNamespace;
  const argocd: ArgoCd = hub
    ? hub.argocd(state)
    : await startArgoCd({
        cfg,
        kc,
        state,
        log,
        // Every replica records a notification where whichever replica leads (now or next) reads it; the
        // acting leader also acts on it at once. A replica that does not act never acts on it.
        notify: (n) =>
          receiveNotification(n, {
            record: (x) => (inbox as NotificationInbox).record(x),
            act: (x) => argocd.gate.notify(x),
            acting: () => acting,
          }),
      });
  const flux = await startFlux({ cfg, kc, log });
  const gate = composeGates([argocd.gate, flux.gate]);
  const events = new EventRecorder(core, log, undefined, { reloaderReasons: cfg.reloaderCompat === true });
  // Events about our own objects (the Lease) go where they live.
  const homeEvents = hub ? new EventRecorder(homeCore, log) : events;
  const apis = {
    core: leaderCore,
    apps: appsApi(writes),
    batch: batchApi(writes),
    custom: customApi(writes),
  };
  const webhook = cfg.webhookUrl
    ? {
        url: cfg.webhookUrl,
        timeoutMs: cfg.webhookTimeoutMs,
        retries: cfg.webhookRetries,
        ...(cfg.webhookSecretFile ? { key: readWebhookKeyFile(cfg.webhookSecretFile) } : {}),
      }
    : undefined;
  // One writer for the process: its per-repository queue is what merges a batch into one commit.
  // Not in hub mode yet: which Application may commit for a cluster's workload is not decided there.
  const git = hub ? undefined : await createGitCommitter(cfg, { core, custom: apis.custom, log, metrics });
  // Every replica watches (a standby has a warm cache); only the leader has a Reconciler, one per
  // leadership term, which alone runs reloads and writes the ledger.
  let reconciler: Reconciler | undefined;
  // The code that changes the cluster, given to each term's Reconciler (docs/adr/0020).
  const budget = RestartBudget.of({
    ...cfg.restartBudget,
    onWait: (scope) => metrics.restartBudgetWaited(scope),
  });
  const strategies = strategyExecutor({
    cfg,
    state,
    ...apis,
    // The strategies' own requests (a surge pod's create) wait their turn like every other write.
    kc: writes,
    log,
    inScope,
    metrics,
    ...(git ? { git } : {}),
    ...(webhook ? { webhook } : {}),
    ...(budget ? { budget } : {}),
    // Job reload records live beside the ledger, in the release namespace (docs/adr/0025).
    jobSpecs: new JobSpecStore({
      // Leader writes: fenced by the clock like the ledger's (docs/adr/0027).
      core: leaderHomeCore,
      namespace: ledger.namespace,
      prefix: ledger.prefix,
      ...(hub ? { owner: hub.clusterId } : {}),
      ...(unlabelled ? { unlabelledMayExist: () => unlabelled('job-spec') } : {}),
      warn: (msg, f) => log.warn(f, msg),
    }),
    events,
  });
  // Chat alerts: one sender for the process; only the leader's reloads tell it anything.
  const alerts = cfg.alerts
    ? new AlertSender(cfg.alerts, { log, count: (sink, result) => metrics.alert(sink, result) })
    : undefined;
  if (cfg.alerts) {
    log.info(
      {
        alertSink: cfg.alerts.sink,
        alertWebhook: cfg.alerts.webhook.origin,
        alertProxy: cfg.alerts.proxy?.origin,
      },
      'chat alerts on',
    );
  }
  const newReconciler = (term?: AbortSignal) => {
    // Each term's start-up reads a namespace's creation at most once (docs/catch-up.md, the same second).
    const namespaceCreated = namespaceCreation(core, log);
    return new Reconciler({
      ...(term ? { term } : {}),
      cfg,
      state,
      ledger,
      events,
      log,
      globals,
      hashKey: key,
      strategies,
      inScope,
      ...(gate ? { gate } : {}),
      ...(alerts ? { alerts } : {}),
      metrics,
      catchUp: (t, set, entry, key, opts, ledgerWrittenMs) =>
        catchUp({ core, state, log, metrics, namespaceCreated }, t, set, entry, key, opts, ledgerWrittenMs),
    });
  };
  // A live watch reports a relist at least every relist interval, so two intervals of silence means stuck.
  const progress = new WatchProgress(2 * cfg.relistIntervalMs + 60_000);

  const watches: Watch<unknown>[] = [];
  const synced: Promise<void>[] = [argocd.synced, flux.synced];
  const onFailure = (f: WatchFailure) => {
    progress.report(f);
    metrics.watchFailure(f.path, f.mode);
    const level = f.mode === 'relist' ? 'info' : 'warn';
    log[level](
      { watch: f.path, mode: f.mode, status: f.status, retryInMs: f.retryInMs, reason: f.reason },
      f.message,
    );
  };
  const common = { relistIntervalMs: cfg.relistIntervalMs, idleTimeoutMs: cfg.watchIdleTimeoutMs, onFailure };

  const watched: Array<[string, Watch<unknown>]> = [];
  // The watches that have not listed once yet, named when a new leader gives up waiting for them.
  const unsynced = new Set<string>(['argocd applications']);
  void argocd.synced.then(() => unsynced.delete('argocd applications'));
  if (flux.watched.length > 0) {
    unsynced.add('flux appliers and sources');
    void flux.synced.then(() => unsynced.delete('flux appliers and sources'));
  }
  function watch<S>(path: string, o: Omit<Parameters<typeof startWatch<S>>[1], 'path' | 'onSynced'>) {
    let done!: () => void;
    unsynced.add(path);
    synced.push(
      new Promise<void>((r) => {
        done = () => {
          unsynced.delete(path);
          r();
        };
      }),
    );
    const beat = () => progress.beat(path);
    beat();
    const w = startWatch<S>(kc, withBeats(beat, { ...common, ...o, path, onSynced: done })) as Watch<unknown>;
    watches.push(w);
    watched.push([path, w]);
  }
  metrics.watchedItemsFrom(() => watched.map(([path, w]) => [path, w.store.size] as const));

  await routeEvents({
    cfg,
    kc,
    hashKey: key,
    state,
    argocd,
    events,
    log,
    metrics,
    allowedByLabel,
    watch,
    reconciler: () => reconciler,
  });

  let takeAllFromInbox = () => {};
  let stopInboxExpiry = () => {};
  if (cfg.webhookTokenFile) {
    // The notification inbox (docs/adr/0013): every replica watches it, so a new leader finds at once
    // what was recorded while another replica led, or while none did.
    const consumer = {
      releaseName: cfg.releaseName,
      log,
      inbox: () => inbox,
      acting: () => acting,
      notify: (n: SyncNotification) => argocd.gate.notify(n),
    };
    watch<InboxRecord>(collectionPath(CONFIG_RESOURCES[0] as Resource<string>, releaseNamespace), {
      labelSelector: inboxSelector(cfg.releaseName),
      transform: (raw) => inboxRecordOf(raw, Date.now()),
      onAdd: (_k, rec) => void takeFromInbox(consumer, [rec]),
      onUpdate: (_k, rec) => void takeFromInbox(consumer, [rec]),
    });
    const inboxWatch = watched[watched.length - 1]?.[1] as Watch<InboxRecord>;
    inbox = new NotificationInbox({
      core,
      namespace: releaseNamespace,
      prefix: cfg.releaseName,
      size: () => inboxWatch.store.size,
      maxAgeMs: cfg.notificationRecordMaxAgeMs,
    });
    takeAllFromInbox = () => void takeFromInbox(consumer, [...inboxWatch.store.values()]);
    // Records whose sync never ends expire while the leader runs, not only when one starts.
    stopInboxExpiry = inbox.expireWhile(
      () => acting,
      () => inboxWatch.store.values(),
      log,
    );
  }

  let isSynced = false;
  const cachesSynced = Promise.all(synced).then(() => {
    isSynced = true;
    log.info({ configs: state.configs.size, workloads: state.workloads.size }, 'caches synced');
  });

  /**
   * Starts acting: judges every workload against the ledger and resumes pending reloads. This replica
   * acts (isLeader, the leader metric) only once that has succeeded.
   */
  const lead = async (signal?: AbortSignal) => {
    // An elected leader that cannot sync its caches gives the Lease up rather than hold it unable to
    // act (docs/adr/0027); without election there is no one else to act, so it waits.
    await (signal
      ? within(
          cachesSynced,
          cfg.leaderCacheSyncTimeoutMs,
          () =>
            new CachesNotSynced(
              `caches not synced within --leader-cache-sync-timeout (${cfg.leaderCacheSyncTimeoutMs / 1000}s): ${[...unsynced].join(', ')}`,
            ),
        )
      : cachesSynced);
    if (signal?.aborted) return;
    const r = newReconciler(signal);
    reconciler = r;
    try {
      await r.start();
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
    if (signal?.aborted || reconciler !== r) return;
    acting = true;
    metrics.setLeader(true);
    log.info({ dryRun: cfg.dryRun, leaderElection: cfg.leaderElect }, 'ready');
    takeAllFromInbox();
  };
  const stopLeading = async () => {
    const r = reconciler;
    reconciler = undefined;
    acting = false;
    metrics.setLeader(false);
    await r?.stop();
  };

  let ready: Promise<void>;
  if (cfg.leaderElect) {
    // Consecutive failed starts, for the back-off before this replica competes for the lease again.
    let failedStarts = 0;
    election = startLeaderElection(home, {
      namespace: cfg.releaseNamespace,
      name: `${cfg.releaseName}-leader`,
      identity: cfg.leaderIdentity,
      leaseDurationMs: cfg.leaseDurationMs,
      renewDeadlineMs: cfg.leaseRenewDeadlineMs,
      retryPeriodMs: cfg.leaseRetryPeriodMs,
      onStartedLeading: (signal) => {
        log.info({ identity: election?.identity }, 'became the leader');
        lead(signal).then(
          () => {
            if (!signal.aborted) failedStarts = 0;
          },
          async (err: Error) => {
            failedStarts++;
            const holdOffMs = startBackoffMs(failedStarts, cfg.leaseDurationMs);
            const reason = err instanceof CachesNotSynced ? 'cache-sync-timeout' : 'start-failed';
            metrics.leaderStartFailed(reason);
            // Holding the lease without acting would keep every other replica from acting: give it up,
            // and let another replica (or this one, after the back-off) try.
            log.error(
              { err: err.message, reason, failedStarts, retryInMs: holdOffMs },
              'could not start acting as leader; releasing the lease',
            );
            void homeEvents.emit(
              {
                apiVersion: 'coordination.k8s.io/v1',
                kind: 'Lease',
                namespace: releaseNamespace,
                name: `${cfg.releaseName}-leader`,
              },
              'LeaseReleased',
              `${election?.identity} could not start acting as leader and released the lease: ${err.message}`,
              'Warning',
            );
            await election?.resign(`start failed: ${err.message}`, holdOffMs);
          },
        );
      },
      onStoppedLeading: async () => {
        log.warn({ identity: election?.identity }, 'stopped leading; no longer acting');
        await stopLeading();
      },
      onNewLeader: (id) => log.info({ leader: id }, 'leader observed'),
      ...(hub ? { mayTake: () => hub.mayLead() } : {}),
      ...(hub?.seen ? { seen: hub.seen } : {}),
      log: {
        debug: (f, m) => log.debug(f, m),
        info: (f, m) => log.info(f, m),
        warn: (f, m) => log.warn(f, m),
        error: (f, m) => log.error(f, m),
      },
    });
    ready = cachesSynced;
  } else {
    ready = lead();
  }

  return {
    ready,
    argocdWebhook: argocd.router,
    fluxWebhook: flux.router,
    isLeader: () => acting,
    isSynced: () => isSynced,
    watchesFailing: () => progress.failing(WATCH_UNREADY_AFTER_MS),
    watchesProgressing: () => progress.progressing(),
    status: () => reconciler?.status() ?? { leader: false },
    weight: () => state.workloads.size + state.configs.size,
    yieldLease: async (reason, holdOffMs) => {
      if (election?.isLeader()) await election.resign(reason, holdOffMs);
    },
    stop: async () => {
      // Stop acting first (and hand the lease over), then stop watching.
      stopInboxExpiry();
      if (election) await election.stop();
      else await stopLeading();
      await argocd.stop();
      await flux.stop();
      await Promise.all(watches.map((w) => w.stop()));
    },
  };
}
