// Wires the Flux integration: watches of Kustomizations, HelmReleases and their sources (only where
// the CRDs are served and the objects can be listed, read-only) feeding the FluxGate. serve.ts
// composes the gate with Argo CD's and passes it to the Reconciler.

import type { Router } from 'express';
import type { Config } from '../config/config.ts';
import type { ClusterAccess } from '../kube/access.ts';
import { startWatch, type Watch, type WatchFailure } from '../kube/watch.ts';
import { getJson, KubeHttpError } from '../kube/watch-http.ts';
import type { Logger } from '../log.ts';
import { type Applier, type ApplierKind, applierFromObject, sourceFromObject } from './applier.ts';
import type { FluxEvent } from './event.ts';
import { FluxGate } from './gate.ts';
import { type FluxNotifyResult, fluxWebhookRouter } from './webhook.ts';

interface Resource {
  groupVersion: string;
  plural: string;
  kind: string;
}

const APPLIERS: ReadonlyArray<Resource & { kind: ApplierKind }> = [
  { groupVersion: 'kustomize.toolkit.fluxcd.io/v1', plural: 'kustomizations', kind: 'Kustomization' },
  { groupVersion: 'helm.toolkit.fluxcd.io/v2', plural: 'helmreleases', kind: 'HelmRelease' },
];

const SOURCES: readonly Resource[] = [
  { groupVersion: 'source.toolkit.fluxcd.io/v1', plural: 'gitrepositories', kind: 'GitRepository' },
  { groupVersion: 'source.toolkit.fluxcd.io/v1', plural: 'ocirepositories', kind: 'OCIRepository' },
  { groupVersion: 'source.toolkit.fluxcd.io/v1', plural: 'buckets', kind: 'Bucket' },
];

export interface FluxDeps {
  cfg: Config;
  kc: ClusterAccess;
  log: Logger;
}

export interface Flux {
  gate: FluxGate;
  /** Resolves once every watch has listed (at once when none runs). */
  synced: Promise<void>;
  /** The resources watched, as `plural in namespace`. */
  watched: readonly string[];
  /** POST /api/v1/flux/events; undefined without --flux-webhook-token-file. */
  router: Router | undefined;
  stop(): Promise<void>;
}

/** Events remembered for idempotency (a duplicate delivery does nothing). */
const SEEN_LIMIT = 10_000;

const path = (r: Resource, ns: string) => `/apis/${r.groupVersion}/namespaces/${ns}/${r.plural}`;

/** The resources of `list` that the API server serves (a group it does not serve: none of them). */
async function served(
  kc: ClusterAccess,
  list: readonly Resource[],
  signal: AbortSignal,
): Promise<Resource[]> {
  const out: Resource[] = [];
  for (const gv of new Set(list.map((r) => r.groupVersion))) {
    try {
      const res = (await getJson(kc, `/apis/${gv}`, signal, 10_000)) as {
        resources?: Array<{ name: string }>;
      };
      const names = new Set((res.resources ?? []).map((r) => r.name));
      out.push(...list.filter((r) => r.groupVersion === gv && names.has(r.plural)));
    } catch (err) {
      if (!(err instanceof KubeHttpError && err.status === 404)) throw err;
    }
  }
  return out;
}

/** Lists one object to learn whether we may read them there; a transient error counts as yes. */
async function readable(kc: ClusterAccess, p: string, signal: AbortSignal): Promise<true | string> {
  try {
    await getJson(kc, `${p}?limit=1`, signal, 10_000);
    return true;
  } catch (err) {
    if (err instanceof KubeHttpError && (err.status === 403 || err.status === 401)) return err.message;
    return true;
  }
}

export async function startFlux(d: FluxDeps): Promise<Flux> {
  const { cfg, kc, log } = d;
  const abort = new AbortController();
  /** Reads an applier now and tells the gate what the API server says (a quorum GET, not the cache). */
  const reread = async (kind: ApplierKind, namespace: string, name: string): Promise<void> => {
    const r = APPLIERS.find((x) => x.kind === kind) as (typeof APPLIERS)[number];
    try {
      const raw = await getJson(
        kc,
        `${path(r, namespace)}/${encodeURIComponent(name)}`,
        abort.signal,
        10_000,
      );
      const a = applierFromObject(r.kind, raw);
      if (a) gate.observe(a);
    } catch (err) {
      if (!(err instanceof KubeHttpError && err.status === 404)) throw err;
      gate.applierDeleted(`${kind}/${namespace}/${name}`);
    }
  };
  const gate: FluxGate = new FluxGate({
    onFailedApply: cfg.fluxOnFailedApply,
    dependsOnAsOne: cfg.fluxDependsOnAsOne,
    log,
    reread: (a) => reread(a.ref.kind, a.ref.namespace, a.ref.name),
  });
  const watches: Watch<unknown>[] = [];
  const synced: Promise<void>[] = [];
  const watched: string[] = [];
  const watchedAppliers = new Set<string>();
  const seen = new Set<string>();

  // A notification is a hint: it makes the service read the Kustomization or HelmRelease now instead
  // of when the watch delivers it. What it claims (revision, changes) decides nothing: the status read
  // here does, as the watch's would.
  const notify = async (e: FluxEvent): Promise<FluxNotifyResult> => {
    const key = [
      e.object.kind,
      e.object.namespace,
      e.object.name,
      e.revision ?? '',
      e.reason,
      e.timestamp,
      e.severity,
    ].join('\u0000');
    if (seen.has(key)) return { outcome: 'duplicate' };
    seen.add(key);
    if (seen.size > SEEN_LIMIT) seen.delete(seen.values().next().value as string);
    const r = APPLIERS.find((x) => x.kind === e.object.kind);
    if (!r || !watchedAppliers.has(`${r.plural}/${e.object.namespace}`))
      return {
        outcome: 'accepted',
        action: `ignored: ${e.object.kind}s in ${e.object.namespace} are not watched (--flux-namespaces)`,
      };
    const name = `${e.object.kind}/${e.object.namespace}/${e.object.name}`;
    try {
      await reread(r.kind, e.object.namespace, e.object.name);
      return { outcome: 'accepted', action: `read ${name}` };
    } catch (err) {
      log.warn(
        { applier: name, err: (err as Error).message },
        'could not read the Flux object a notification named; the watch will deliver it',
      );
      return { outcome: 'accepted', action: `could not read ${name}; left to the watch` };
    }
  };
  const router = cfg.fluxWebhookTokenFile
    ? fluxWebhookRouter({ tokenFile: cfg.fluxWebhookTokenFile, notify, log })
    : undefined;

  if (cfg.fluxNamespaces.length === 0) {
    return { gate, synced: Promise.resolve(), watched, router, stop: async () => gate.stop() };
  }

  let appliers: Resource[] = [];
  let sources: Resource[] = [];
  try {
    appliers = await served(kc, APPLIERS, abort.signal);
    sources = await served(kc, SOURCES, abort.signal);
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'cannot tell whether Flux resources are served');
  }
  if (appliers.length === 0) {
    log.info({}, 'Flux Kustomizations and HelmReleases are not served here; no Flux sync-aware batching');
    return { gate, synced: Promise.resolve(), watched, router, stop: async () => gate.stop() };
  }

  const onFailure = (f: WatchFailure) =>
    log[f.mode === 'relist' ? 'info' : 'warn'](
      { watch: f.path, mode: f.mode, status: f.status, retryInMs: f.retryInMs, reason: f.reason },
      f.message,
    );
  const watch = <T>(
    r: Resource,
    ns: string,
    transform: (raw: unknown) => T | undefined,
    on: { put(v: T): void; gone(v: T): void },
  ) => {
    let done!: () => void;
    synced.push(new Promise<void>((res) => (done = res)));
    watched.push(`${r.plural} in ${ns}`);
    watches.push(
      startWatch<T>(kc, {
        path: path(r, ns),
        relistIntervalMs: cfg.relistIntervalMs,
        idleTimeoutMs: cfg.watchIdleTimeoutMs,
        onFailure,
        transform: (raw) => transform(raw) as T,
        onAdd: (_k, v) => v !== undefined && on.put(v),
        onUpdate: (_k, v) => v !== undefined && on.put(v),
        onDelete: (_k, v) => v !== undefined && on.gone(v),
        onSynced: done,
      }) as Watch<unknown>,
    );
  };

  for (const ns of cfg.fluxNamespaces) {
    for (const r of [...appliers, ...sources]) {
      const ok = await readable(kc, path(r, ns), abort.signal);
      if (ok !== true) {
        log.warn({ namespace: ns, resource: r.plural, err: ok }, 'cannot list Flux resources; not watched');
        continue;
      }
      if (appliers.includes(r)) {
        watchedAppliers.add(`${r.plural}/${ns}`);
        watch<Applier>(r, ns, (raw) => applierFromObject(r.kind as ApplierKind, raw), {
          put: (a) => gate.observe(a),
          gone: (a) => gate.applierDeleted(a.key),
        });
      } else {
        watch(r, ns, (raw) => sourceFromObject(r.kind, raw), {
          put: (s) => gate.observeSource(s.key, s.revision),
          gone: (s) => gate.sourceDeleted(s.key),
        });
      }
    }
  }
  log.info(
    {
      watched,
      dependsOnAsOne: cfg.fluxDependsOnAsOne,
      onFailedApply: cfg.fluxOnFailedApply,
      webhook: cfg.fluxWebhookTokenFile !== undefined,
    },
    'Flux integration configured',
  );
  return {
    gate,
    synced: Promise.all(synced).then(() => undefined),
    watched,
    router,
    stop: async () => {
      abort.abort(new Error('the service is stopping'));
      gate.stop();
      await Promise.all(watches.map((w) => w.stop()));
    },
  };
}
