// Event routing: the watches of namespaces (--namespace-selector), ConfigMaps and Secrets, and
// workloads, each event put into the ClusterState and handed to the leader's Reconciler, if this
// replica acts. Every replica routes (a standby keeps a warm cache); only the leader reconciles.

import type { ArgoCd } from './argocd/argocd.ts';
import { isInboxRecord } from './argocd/inbox.ts';
import type { Config } from './config/config.ts';
import type { ConfigRecord, WorkloadRecord } from './core/records.ts';
import { type StartWatch, watchProviderClasses } from './csi.ts';
import type { ClusterAccess } from './kube/access.ts';
import type { EventRecorder } from './kube/events.ts';
import { CONFIG_RESOURCES, collectionPath, served, WORKLOAD_RESOURCES } from './kube/resources.ts';
import { configRecord, type RawObject, workloadRecord } from './kube/to-record.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { Reconciler } from './reconciler.ts';
import type { ClusterState } from './state.ts';

/** The field selector that leaves Helm release Secrets out of the Secret watch. */
export const HELM_RELEASE_EXCLUDED = 'type!=helm.sh/release.v1';

export interface RoutingDeps {
  cfg: Config;
  kc: ClusterAccess;
  hashKey: Buffer;
  state: ClusterState;
  argocd: Pick<ArgoCd, 'withTrackingLabel'>;
  events: EventRecorder;
  log: Logger;
  metrics: Metrics;
  /** Namespaces that match --namespace-selector, kept up to date here. */
  allowedByLabel: Set<string>;
  watch: StartWatch;
  /** The leader's reconciler, if this replica acts. */
  reconciler(): Reconciler | undefined;
}

/** Starts every watch that feeds the reconciler. */
export async function routeEvents(d: RoutingDeps): Promise<void> {
  const { cfg, metrics, state, watch, log, kc } = d;
  const scopes = cfg.namespaces.length > 0 ? cfg.namespaces : [undefined];
  if (cfg.namespaceSelector !== undefined) {
    watch<string>('/api/v1/namespaces', {
      labelSelector: cfg.namespaceSelector,
      transform: (raw) => raw.metadata?.name,
      key: (raw) => raw.metadata?.name ?? '',
      onAdd: (_k, ns) => {
        metrics.reloader.eventReceived('add', 'namespaces');
        d.allowedByLabel.add(ns);
      },
      onUpdate: (_k, ns) => {
        metrics.reloader.eventReceived('update', 'namespaces');
        d.allowedByLabel.add(ns);
      },
      onDelete: (_k, ns) => {
        metrics.reloader.eventReceived('delete', 'namespaces');
        d.allowedByLabel.delete(ns);
      },
    });
  }

  for (const ns of scopes) {
    for (const r of CONFIG_RESOURCES) {
      if ((cfg.ignoreResources as readonly string[]).includes(r.plural)) continue;
      watch<ConfigRecord>(collectionPath(r, ns), {
        labelSelector: cfg.resourceLabelSelector,
        // Helm's release records (up to 1 MiB each, one per revision) are never a workload's config:
        // the API server leaves them out, so they cost neither transfer nor memory.
        ...(r.kind === 'Secret' && !cfg.includeHelmReleaseSecrets
          ? { fieldSelector: HELM_RELEASE_EXCLUDED }
          : {}),
        // Our own ledger shards are ConfigMaps too; they never reload anything.
        transform: (raw) =>
          ((raw as RawObject).metadata?.labels?.['app.kubernetes.io/component'] === 'ledger' &&
            (raw as RawObject).metadata?.labels?.['app.kubernetes.io/name'] === 'gitops-reloader') ||
          isInboxRecord((raw as RawObject).metadata?.labels ?? undefined)
            ? undefined
            : d.argocd.withTrackingLabel(
                raw as RawObject,
                configRecord(r.kind, raw as RawObject, d.hashKey, cfg.annotationAliases),
              ),
        onAdd: (_k, rec) => {
          metrics.reloader.eventReceived('add', r.plural);
          const old = state.putConfig(rec);
          d.reconciler()?.configChanged(old, rec);
        },
        onUpdate: (_k, rec) => {
          metrics.reloader.eventReceived('update', r.plural);
          const old = state.putConfig(rec);
          d.reconciler()?.configChanged(old, rec);
        },
        onDelete: (_k, old) => {
          metrics.reloader.eventReceived('delete', r.plural);
          const gone = state.deleteConfig(old.ref);
          d.reconciler()?.configChanged(gone, undefined);
        },
      });
    }
  }
  if (cfg.enableCsiIntegration) {
    await watchProviderClasses({
      kc,
      hashKey: d.hashKey,
      state,
      scopes,
      log,
      events: d.events,
      watch,
      metrics,
      reconciler: d.reconciler,
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
        transform: (raw) => workloadRecord(r.kind, raw as RawObject, cfg.annotationAliases),
        onAdd: (_k, rec) => {
          const { now, old } = state.putWorkload(rec);
          d.reconciler()?.workloadChanged(old, now);
        },
        onUpdate: (_k, rec) => {
          const { now, old } = state.putWorkload(rec);
          d.reconciler()?.workloadChanged(old, now);
        },
        onDelete: (_k, old) => {
          const id = `${old.ref.kind}/${old.ref.namespace}/${old.ref.name}`;
          state.deleteWorkload(id);
          void d.reconciler()?.workloadDeleted(id);
        },
      });
    }
  }
}
