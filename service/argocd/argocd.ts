// Wires the Argo CD integration: the Application watch (only where the CRD is served and the
// Applications can be listed) feeding the SyncGate, the refresh a notification asks for, and the
// notification webhook router. serve.ts passes `gate` to the Reconciler and the router to the HTTP
// server.

import type { Router } from 'express';
import { DEFAULT_TRACKING_LABEL } from '../config/choices.ts';
import type { Config } from '../config/config.ts';
import type { ConfigRecord } from '../core/records.ts';
import type { ClusterAccess } from '../kube/access.ts';
import { startWatch, type Watch, type WatchFailure } from '../kube/watch.ts';
import { getJson, KubeHttpError } from '../kube/watch-http.ts';
import type { Logger } from '../log.ts';
import type { ClusterState } from '../state.ts';
import { type NotifyResult, SyncGate } from './gate.ts';
import type { SyncNotification } from './notification.ts';
import { type AppSync, appFromObject } from './sync-tracker.ts';
import type { AppKey } from './tracking.ts';
import { argocdWebhookRouter } from './webhook.ts';

const GROUP_VERSION = '/apis/argoproj.io/v1alpha1';

export interface ArgoCdDeps {
  cfg: Config;
  kc: ClusterAccess;
  state: ClusterState;
  log: Logger;
  /**
   * What the webhook does with a valid notification. Default: hand it to the gate. serve records it
   * for the leader instead (the inbox), so a replica that does not act never acts on it.
   */
  notify?(n: SyncNotification): Promise<NotifyResult>;
}

export interface ArgoCd {
  gate: SyncGate;
  /** Resolves once every Application watch has listed (at once when none runs). */
  synced: Promise<void>;
  /** The notification webhook (POST /api/v1/argocd/notifications); undefined without --webhook-token-file. */
  router: Router | undefined;
  /** Namespaces whose Applications are watched. */
  watchedNamespaces: readonly string[];
  /**
   * Keeps a custom --argocd-tracking-label on a config record: the record keeps only the default
   * instance label of its own accord.
   */
  withTrackingLabel(
    raw: { metadata?: { labels?: Record<string, string> | null } },
    rec: ConfigRecord | undefined,
  ): ConfigRecord | undefined;
  stop(): Promise<void>;
}

/** The Applications of a namespace, or one of them. */
export const appPath = (ns: string, name?: string) =>
  `${GROUP_VERSION}/namespaces/${ns}/applications${name ? `/${encodeURIComponent(name)}` : ''}`;

async function servesApplications(kc: ClusterAccess, signal: AbortSignal): Promise<boolean> {
  try {
    const list = (await getJson(kc, GROUP_VERSION, signal, 10_000)) as {
      resources?: Array<{ name: string }>;
    };
    return Boolean(list.resources?.some((r) => r.name === 'applications'));
  } catch (err) {
    if (err instanceof KubeHttpError && err.status === 404) return false;
    throw err;
  }
}

/** Lists one Application to learn whether we may read them here. */
async function readable(kc: ClusterAccess, ns: string, signal: AbortSignal): Promise<true | string> {
  try {
    await getJson(kc, `${appPath(ns)}?limit=1`, signal, 10_000);
    return true;
  } catch (err) {
    if (err instanceof KubeHttpError && (err.status === 403 || err.status === 401)) return err.message;
    // Anything else (a timeout, a 5xx) is transient: the hardened watch retries it.
    return true;
  }
}

/** The gate of one cluster's configs, told of Applications by the caller's watch. */
export function newSyncGate(o: {
  cfg: Config;
  state: ClusterState;
  log: Logger;
  watched(appNamespace: string): boolean;
  refresh(app: AppKey): Promise<AppSync | undefined>;
}): SyncGate {
  const { cfg, state } = o;
  return new SyncGate({
    tracking: {
      method: cfg.argocdTracking,
      labelKey: cfg.argocdTrackingLabel,
      controlNamespace: cfg.argocdNamespaces[0] ?? 'argocd',
    },
    onFailedSync: cfg.argocdOnFailedSync,
    watched: o.watched,
    notificationsEnabled: cfg.webhookTokenFile !== undefined,
    usersOf: (ref) =>
      state.affectedBy(ref).map((workload) => ({
        workload,
        debounceMs: state.workloads.get(workload)?.parsed.policy.debounceMs,
      })),
    refresh: o.refresh,
    log: o.log,
  });
}

/** ArgoCd.withTrackingLabel for these flags. */
export function trackingLabelKeeper(cfg: Config): ArgoCd['withTrackingLabel'] {
  const labelKey = cfg.argocdTrackingLabel;
  return (raw, rec) => {
    const v = raw.metadata?.labels?.[labelKey];
    if (!rec || labelKey === DEFAULT_TRACKING_LABEL || v === undefined) return rec;
    return { ...rec, labels: { ...rec.labels, [labelKey]: v } };
  };
}

/** One Application by its key, or undefined when it is gone. */
export async function readApplication(
  kc: ClusterAccess,
  app: AppKey,
  signal: AbortSignal,
): Promise<AppSync | undefined> {
  try {
    return appFromObject(await getJson(kc, appPath(app.namespace, app.name), signal, 10_000));
  } catch (err) {
    if (err instanceof KubeHttpError && err.status === 404) return undefined;
    throw err;
  }
}

export async function startArgoCd(d: ArgoCdDeps): Promise<ArgoCd> {
  const { cfg, kc, state, log } = d;
  const abort = new AbortController();
  const watched = new Set<string>();
  if (cfg.argocdNamespaces.length > 0) {
    let served = false;
    try {
      served = await servesApplications(kc, abort.signal);
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'cannot tell whether Argo CD Applications are served');
    }
    if (!served) {
      log.info({}, 'Argo CD Applications are not served here; sync-aware batching relies on notifications');
    } else {
      for (const ns of cfg.argocdNamespaces) {
        const ok = await readable(kc, ns, abort.signal);
        if (ok === true) watched.add(ns);
        else
          log.warn(
            { namespace: ns, err: ok },
            'cannot list Argo CD Applications; sync-aware batching for its apps relies on notifications',
          );
      }
    }
  }

  const refresh = (app: AppKey) => readApplication(kc, app, abort.signal);

  const gate = newSyncGate({ cfg, state, log, watched: (ns) => watched.has(ns), refresh });

  const onFailure = (f: WatchFailure) =>
    log[f.mode === 'relist' ? 'info' : 'warn'](
      { watch: f.path, mode: f.mode, status: f.status, retryInMs: f.retryInMs, reason: f.reason },
      f.message,
    );
  const watches: Watch<AppSync>[] = [];
  const synced: Promise<void>[] = [];
  for (const ns of watched) {
    let done!: () => void;
    synced.push(new Promise<void>((r) => (done = r)));
    watches.push(
      startWatch<AppSync>(kc, {
        path: appPath(ns),
        relistIntervalMs: cfg.relistIntervalMs,
        idleTimeoutMs: cfg.watchIdleTimeoutMs,
        onFailure,
        transform: (raw) => appFromObject(raw),
        onAdd: (_k, app) => gate.observe(app),
        onUpdate: (_k, app) => gate.observe(app),
        onDelete: (_k, old) => gate.appDeleted(old.app),
        onSynced: done,
      }),
    );
  }
  log.info(
    {
      watched: [...watched],
      tracking: cfg.argocdTracking,
      trackingLabel: cfg.argocdTrackingLabel,
      onFailedSync: cfg.argocdOnFailedSync,
      webhook: cfg.webhookTokenFile !== undefined,
    },
    'Argo CD integration configured',
  );

  const router = cfg.webhookTokenFile
    ? argocdWebhookRouter({
        tokenFile: cfg.webhookTokenFile,
        notify: d.notify ?? ((n) => gate.notify(n)),
        log,
      })
    : undefined;

  const withTrackingLabel = trackingLabelKeeper(cfg);

  return {
    gate,
    synced: Promise.all(synced).then(() => undefined),
    router,
    watchedNamespaces: [...watched],
    withTrackingLabel,
    stop: async () => {
      abort.abort(new Error('the service is stopping'));
      gate.stop();
      await Promise.all(watches.map((w) => w.stop()));
    },
  };
}
