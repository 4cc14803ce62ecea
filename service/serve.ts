// `gitops-reloader serve`: watches configs and workloads, and reloads what changed.
import type { Router } from 'express';
import { startArgoCd } from './argocd/argocd.ts';
import { type Config, readHashKeyFile, readWebhookKeyFile } from './config/config.ts';
import { FlagError } from './config/flags.ts';
import { compileGlobals } from './core/annotations.ts';
import { MIN_HMAC_KEY_BYTES } from './core/config-hash.ts';
import type { ConfigRecord, WorkloadRecord } from './core/records.ts';
import { watchProviderClasses } from './csi.ts';
import { WatchProgress } from './http.ts';
import type { ClusterAccess } from './kube/access.ts';
import { appsApi, batchApi, type CoreApi, coreApi, customApi } from './kube/api.ts';
import { EventRecorder } from './kube/events.ts';
import { type LeaderElection, startLeaderElection } from './kube/leader.ts';
import { Ledger } from './kube/ledger.ts';
import { CONFIG_RESOURCES, collectionPath, served, WORKLOAD_RESOURCES } from './kube/resources.ts';
import { configRecord, type RawObject, workloadRecord } from './kube/to-record.ts';
import { startWatch, type Watch, type WatchFailure } from './kube/watch.ts';
import type { Logger } from './log.ts';
import { Metrics } from './metrics.ts';
import { Reconciler } from './reconciler.ts';
import { ClusterState } from './state.ts';
import { createGitCommitter } from './strategies/git-commit.ts';

/** Reads the HMAC key: --hash-key-file, else the Secret <release-name>-hash-key in the release namespace. */
async function hashKey(cfg: Config, core: CoreApi): Promise<Buffer> {
  if (cfg.hashKeyFile) return readHashKeyFile(cfg.hashKeyFile);
  const name = `${cfg.releaseName}-hash-key`;
  if (!cfg.releaseNamespace) {
    throw new FlagError(
      'no --hash-key-file, and no --release-namespace (or POD_NAMESPACE) to read the hash-key Secret from',
    );
  }
  let data: string | undefined;
  try {
    const s = await core.readNamespacedSecret({ name, namespace: cfg.releaseNamespace });
    data = s.data?.key;
  } catch (err) {
    throw new FlagError(
      `no --hash-key-file, and the Secret ${cfg.releaseNamespace}/${name} could not be read (${(err as { code?: number }).code ?? (err as Error).message}); create it with a random "key" of at least ${MIN_HMAC_KEY_BYTES} bytes`,
    );
  }
  const key = Buffer.from(data ?? '', 'base64');
  if (key.length < MIN_HMAC_KEY_BYTES) {
    throw new FlagError(
      `Secret ${cfg.releaseNamespace}/${name} key "key" holds ${key.length} bytes; at least ${MIN_HMAC_KEY_BYTES} are needed`,
    );
  }
  return key;
}

export interface RunningService {
  /** Resolves once caches are synced and start-up decisions are made. */
  ready: Promise<void>;
  /** POST /api/v1/argocd/notifications, for the HTTP server; undefined without --webhook-token-file. */
  argocdWebhook: Router | undefined;
  /** True while this replica acts (holds the lease, or runs without leader election). */
  isLeader(): boolean;
  /** Every watch has listed once: the caches are warm (standbys too). */
  isSynced(): boolean;
  /** False when a watch loop stopped cycling (liveness). */
  watchesProgressing(): boolean;
  stop(): Promise<void>;
}

export async function serve(
  cfg: Config,
  kc: ClusterAccess,
  log: Logger,
  metrics: Metrics = new Metrics({ defaultMetrics: false }),
): Promise<RunningService> {
  const core = coreApi(kc);
  if (!cfg.releaseNamespace) {
    throw new FlagError(
      '--release-namespace (or the POD_NAMESPACE env var) is required: it holds the ledger',
    );
  }
  const key = await hashKey(cfg, core);
  const { globals, problems } = compileGlobals(cfg);
  if (problems.length > 0) throw new FlagError(problems.join('; '));

  const state = new ClusterState(cfg.defaultStrategy, cfg.enableCsiIntegration);
  const ledger = new Ledger({
    core,
    namespace: cfg.releaseNamespace,
    prefix: cfg.releaseName,
    shards: cfg.ledgerShards,
    dryRun: cfg.dryRun,
    log: (level, msg, f) => log[level](f, msg),
  });
  const ignored = new Set(cfg.ignoreNamespaces);
  const allowedByLabel = new Set<string>();
  const inScope = (ns: string) =>
    !ignored.has(ns) &&
    (cfg.namespaces.length === 0 || cfg.namespaces.includes(ns)) &&
    (cfg.namespaceSelector === undefined || allowedByLabel.has(ns));
  const argocd = await startArgoCd({ cfg, kc, state, log });
  const events = new EventRecorder(core, log);
  const apis = {
    core,
    apps: appsApi(kc),
    batch: batchApi(kc),
    custom: customApi(kc),
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
  const git = await createGitCommitter(cfg, { core, custom: apis.custom, log, metrics });
  // Every replica watches (a standby has a warm cache); only the leader has a Reconciler, one per
  // leadership term, which alone runs reloads and writes the ledger.
  let reconciler: Reconciler | undefined;
  const newReconciler = () =>
    new Reconciler({
      cfg,
      state,
      ledger,
      events,
      log,
      globals,
      hashKey: key,
      ...apis,
      kc,
      inScope,
      gate: argocd.gate,
      metrics,
      git,
      ...(webhook ? { webhook } : {}),
    });
  // A live watch reports a relist at least every relist interval, so two intervals of silence means stuck.
  const progress = new WatchProgress(2 * cfg.relistIntervalMs + 60_000);

  const watches: Watch<unknown>[] = [];
  const synced: Promise<void>[] = [argocd.synced];
  const onFailure = (f: WatchFailure) => {
    progress.beat(f.path);
    metrics.watchFailure(f.path, f.mode);
    const level = f.mode === 'relist' ? 'info' : 'warn';
    log[level](
      { watch: f.path, mode: f.mode, status: f.status, retryInMs: f.retryInMs, reason: f.reason },
      f.message,
    );
  };
  const scopes = cfg.namespaces.length > 0 ? cfg.namespaces : [undefined];
  const common = { relistIntervalMs: cfg.relistIntervalMs, idleTimeoutMs: cfg.watchIdleTimeoutMs, onFailure };

  const watched: Array<[string, Watch<unknown>]> = [];
  function watch<S>(path: string, o: Omit<Parameters<typeof startWatch<S>>[1], 'path' | 'onSynced'>) {
    let done!: () => void;
    synced.push(new Promise<void>((r) => (done = r)));
    const beat = () => progress.beat(path);
    beat();
    const w = startWatch<S>(kc, {
      ...common,
      ...o,
      path,
      onSynced: () => {
        beat();
        done();
      },
      onAdd: (k, v) => {
        beat();
        o.onAdd?.(k, v);
      },
      onUpdate: (k, v, old) => {
        beat();
        o.onUpdate?.(k, v, old);
      },
      onDelete: (k, old) => {
        beat();
        o.onDelete?.(k, old);
      },
    }) as Watch<unknown>;
    watches.push(w);
    watched.push([path, w]);
  }
  metrics.watchedItemsFrom(() => watched.map(([path, w]) => [path, w.store.size] as const));

  if (cfg.namespaceSelector !== undefined) {
    watch<string>('/api/v1/namespaces', {
      labelSelector: cfg.namespaceSelector,
      transform: (raw) => raw.metadata?.name,
      key: (raw) => raw.metadata?.name ?? '',
      onAdd: (_k, ns) => {
        metrics.reloader.eventReceived('add', 'namespaces');
        allowedByLabel.add(ns);
      },
      onUpdate: (_k, ns) => {
        metrics.reloader.eventReceived('update', 'namespaces');
        allowedByLabel.add(ns);
      },
      onDelete: (_k, ns) => {
        metrics.reloader.eventReceived('delete', 'namespaces');
        allowedByLabel.delete(ns);
      },
    });
  }

  for (const ns of scopes) {
    for (const r of CONFIG_RESOURCES) {
      if ((cfg.ignoreResources as readonly string[]).includes(r.plural)) continue;
      watch<ConfigRecord>(collectionPath(r, ns), {
        labelSelector: cfg.resourceLabelSelector,
        // Our own ledger shards are ConfigMaps too; they never reload anything.
        transform: (raw) =>
          (raw as RawObject).metadata?.labels?.['app.kubernetes.io/component'] === 'ledger' &&
          (raw as RawObject).metadata?.labels?.['app.kubernetes.io/name'] === 'gitops-reloader'
            ? undefined
            : argocd.withTrackingLabel(raw as RawObject, configRecord(r.kind, raw as RawObject, key)),
        onAdd: (_k, rec) => {
          metrics.reloader.eventReceived('add', r.plural);
          const old = state.putConfig(rec);
          reconciler?.configChanged(old, rec);
        },
        onUpdate: (_k, rec) => {
          metrics.reloader.eventReceived('update', r.plural);
          const old = state.putConfig(rec);
          reconciler?.configChanged(old, rec);
        },
        onDelete: (_k, old) => {
          metrics.reloader.eventReceived('delete', r.plural);
          const gone = state.deleteConfig(old.ref);
          reconciler?.configChanged(gone, undefined);
        },
      });
    }
  }
  if (cfg.enableCsiIntegration) {
    await watchProviderClasses({
      kc,
      hashKey: key,
      state,
      scopes,
      log,
      events,
      watch,
      metrics,
      reconciler: () => reconciler,
    });
  }

  for (const r of WORKLOAD_RESOURCES) {
    if ((cfg.ignoreWorkloadKinds as readonly string[]).includes(r.kind)) {
      log.info({ kind: r.kind }, 'workload kind ignored (--ignore-workload-kinds); not watched');
      continue;
    }
    if (r.group === 'argoproj.io' && !(await served(kc, r))) {
      log.info({ resource: `${r.plural}.${r.group}` }, 'not served by the API server; not watched');
      continue;
    }
    for (const ns of scopes) {
      watch<WorkloadRecord>(collectionPath(r, ns), {
        transform: (raw) => workloadRecord(r.kind, raw as RawObject),
        onAdd: (_k, rec) => {
          const { now, old } = state.putWorkload(rec);
          reconciler?.workloadChanged(old, now);
        },
        onUpdate: (_k, rec) => {
          const { now, old } = state.putWorkload(rec);
          reconciler?.workloadChanged(old, now);
        },
        onDelete: (_k, old) => {
          const id = `${old.ref.kind}/${old.ref.namespace}/${old.ref.name}`;
          state.deleteWorkload(id);
          void reconciler?.workloadDeleted(id);
        },
      });
    }
  }

  let isSynced = false;
  const cachesSynced = Promise.all(synced).then(() => {
    isSynced = true;
    log.info({ configs: state.configs.size, workloads: state.workloads.size }, 'caches synced');
  });

  /** Starts acting: judges every workload against the ledger and resumes pending reloads. */
  const lead = async (signal?: AbortSignal) => {
    await cachesSynced;
    if (signal?.aborted) return;
    const r = newReconciler();
    reconciler = r;
    metrics.setLeader(true);
    try {
      await r.start();
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
    log.info({ dryRun: cfg.dryRun, leaderElection: cfg.leaderElect }, 'ready');
  };
  const stopLeading = async () => {
    const r = reconciler;
    reconciler = undefined;
    metrics.setLeader(false);
    await r?.stop();
  };

  let election: LeaderElection | undefined;
  let ready: Promise<void>;
  if (cfg.leaderElect) {
    election = startLeaderElection(kc, {
      namespace: cfg.releaseNamespace,
      name: `${cfg.releaseName}-leader`,
      identity: cfg.leaderIdentity,
      leaseDurationMs: cfg.leaseDurationMs,
      renewDeadlineMs: cfg.leaseRenewDeadlineMs,
      retryPeriodMs: cfg.leaseRetryPeriodMs,
      onStartedLeading: (signal) => {
        log.info({ identity: election?.identity }, 'became the leader');
        lead(signal).catch((err: Error) =>
          log.error({ err: err.message }, 'could not start acting as leader'),
        );
      },
      onStoppedLeading: async () => {
        log.warn({ identity: election?.identity }, 'stopped leading; no longer acting');
        await stopLeading();
      },
      onNewLeader: (id) => log.info({ leader: id }, 'leader observed'),
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
    isLeader: () => reconciler !== undefined,
    isSynced: () => isSynced,
    watchesProgressing: () => progress.progressing(),
    stop: async () => {
      // Stop acting first (and hand the lease over), then stop watching.
      if (election) await election.stop();
      else await stopLeading();
      await argocd.stop();
      await Promise.all(watches.map((w) => w.stop()));
    },
  };
}
