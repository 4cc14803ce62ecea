// --enable-csi-integration: watches the Secrets Store CSI driver's SecretProviderClass and
// SecretProviderClassPodStatus objects and keeps one config record per class in the cluster state,
// so a mounted object's new version reaches the reconciler like a Secret change (docs/csi.md).
import { type ProviderClassStatus, readProviderClassStatus } from './core/provider-class-versions.ts';
import type { ClusterAccess } from './kube/access.ts';
import type { EventRecorder } from './kube/events.ts';
import {
  PROVIDER_CLASS_RESOURCE,
  PROVIDER_CLASS_STATUS_RESOURCE,
  ProviderClasses,
  type ProviderClassMeta,
  providerClassMeta,
  SECRETS_STORE_GROUP,
} from './kube/provider-classes.ts';
import { collectionPath, served } from './kube/resources.ts';
import type { RawObject } from './kube/to-record.ts';
import type { WatchOptions } from './kube/watch.ts';
import { getJson, KubeHttpError } from './kube/watch-http.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { Reconciler } from './reconciler.ts';
import type { ClusterState } from './state.ts';

/** serve.ts's watch helper: starts a watch that counts towards cache sync and liveness. */
export type StartWatch = <S>(path: string, o: Omit<WatchOptions<S>, 'path' | 'onSynced'>) => void;

export interface CsiDeps {
  kc: ClusterAccess;
  hashKey: Buffer;
  state: ClusterState;
  /** Namespaces watched; [undefined] for all. */
  scopes: ReadonlyArray<string | undefined>;
  log: Logger;
  events: EventRecorder;
  metrics: Metrics;
  watch: StartWatch;
  /** The leader's reconciler, if this replica acts. */
  reconciler(): Reconciler | undefined;
}

type StatusOrProblem = ProviderClassStatus | { problem: string; namespace?: string; name?: string };

/**
 * Starts the two watches. Without the driver's CRDs, or without read access to them, it logs why and
 * watches nothing: the rest of the service works on (Reloader also skips CSI without the CRDs).
 */
export async function watchProviderClasses(d: CsiDeps): Promise<boolean> {
  const { kc, state, log, events } = d;
  const resource = `${PROVIDER_CLASS_STATUS_RESOURCE.plural}.${SECRETS_STORE_GROUP}`;
  if (!(await served(kc, PROVIDER_CLASS_STATUS_RESOURCE)) || !(await served(kc, PROVIDER_CLASS_RESOURCE))) {
    log.warn(
      { resource },
      '--enable-csi-integration is set, but the Secrets Store CSI driver CRDs are not served; SecretProviderClasses are not watched (restart after installing the driver)',
    );
    return false;
  }
  const denied = await forbidden(kc, d.scopes);
  if (denied) {
    log.warn(
      { resource, err: denied },
      '--enable-csi-integration is set, but listing the CSI driver objects is forbidden; SecretProviderClasses are not watched (grant get, list, watch on secretproviderclasses and secretproviderclasspodstatuses: chart value csiIntegration.enabled)',
    );
    return false;
  }

  const classes = new ProviderClasses(d.hashKey);
  const refresh = (keys: string[]) => {
    for (const k of keys) {
      const rec = classes.record(k);
      const old = rec ? state.putConfig(rec) : state.deleteConfig(classes.ref(k));
      if (old && rec && old.digest.all !== rec.digest.all) {
        // Which objects of the class moved: the precision the status allows (ids, never content).
        const ids = new Set([...Object.keys(old.digest.keys), ...Object.keys(rec.digest.keys)]);
        const at = (r: Record<string, string>, id: string) => (Object.hasOwn(r, id) ? r[id] : undefined);
        const objects = [...ids].filter((id) => at(old.digest.keys, id) !== at(rec.digest.keys, id)).sort();
        log.info(
          { namespace: rec.ref.namespace, config: `SecretProviderClass/${rec.ref.name}`, objects },
          'mounted object versions changed',
        );
      }
      if (rec || old) d.reconciler()?.configChanged(old, rec);
    }
  };

  const reported = new Set<string>();
  const onStatus = (s: StatusOrProblem) => {
    if (!('problem' in s)) {
      refresh(classes.putStatus(s));
      return;
    }
    // It may have named a class before: whatever it reported no longer counts.
    if (s.namespace && s.name) refresh(classes.deleteStatus(s.namespace, s.name));
    const id = `${s.namespace}/${s.name}/${s.problem}`;
    if (reported.has(id)) return;
    reported.add(id);
    log.warn(
      { namespace: s.namespace, status: s.name, why: s.problem },
      'SecretProviderClassPodStatus ignored: it names no SecretProviderClass in its namespace',
    );
    if (d.reconciler() && s.namespace && s.name) {
      void events.emit(
        {
          apiVersion: `${SECRETS_STORE_GROUP}/${PROVIDER_CLASS_STATUS_RESOURCE.version}`,
          kind: PROVIDER_CLASS_STATUS_RESOURCE.kind,
          namespace: s.namespace,
          name: s.name,
        },
        'ReloadConfigInvalid',
        `ignored: ${s.problem}`,
        'Warning',
      );
    }
  };

  for (const ns of d.scopes) {
    d.watch<ProviderClassMeta>(collectionPath(PROVIDER_CLASS_RESOURCE, ns), {
      transform: (raw) => providerClassMeta(raw),
      onAdd: (_k, m) => refresh(classes.putClass(m)),
      onUpdate: (_k, m) => refresh(classes.putClass(m)),
      onDelete: (_k, m) => refresh(classes.deleteClass(m)),
    });
    d.watch<StatusOrProblem>(collectionPath(PROVIDER_CLASS_STATUS_RESOURCE, ns), {
      transform: (raw) => {
        const s = readProviderClassStatus(raw as RawObject);
        if (!('problem' in s)) return s;
        return { problem: s.problem, namespace: raw.metadata?.namespace, name: raw.metadata?.name };
      },
      // Reloader counts the events of its secretproviderclasspodstatuses controller under this name.
      onAdd: (_k, s) => {
        d.metrics.reloader.eventReceived('add', PROVIDER_CLASS_STATUS_RESOURCE.plural);
        onStatus(s);
      },
      onUpdate: (_k, s) => {
        d.metrics.reloader.eventReceived('update', PROVIDER_CLASS_STATUS_RESOURCE.plural);
        onStatus(s);
      },
      onDelete: (_k, s) => {
        d.metrics.reloader.eventReceived('delete', PROVIDER_CLASS_STATUS_RESOURCE.plural);
        if (s.namespace && s.name) refresh(classes.deleteStatus(s.namespace, s.name));
      },
    });
  }
  return true;
}

/** The reason a LIST of either resource is refused in some watched scope, if one is. */
async function forbidden(
  kc: ClusterAccess,
  scopes: ReadonlyArray<string | undefined>,
): Promise<string | undefined> {
  for (const ns of scopes) {
    for (const r of [PROVIDER_CLASS_RESOURCE, PROVIDER_CLASS_STATUS_RESOURCE]) {
      try {
        await getJson(kc, `${collectionPath(r, ns)}?limit=1`, new AbortController().signal, 10_000);
      } catch (err) {
        if (err instanceof KubeHttpError && (err.status === 403 || err.status === 401)) return err.message;
        // Anything else is transient: the hardened watch retries it.
      }
    }
  }
  return undefined;
}
