// The start-up catch-up of one workload with no reload pending: gathers what core/catch-up.ts decides
// by (the ledger entry, the configs' newest writes, the creation times of the pods a reload would
// replace), and reports new objects of old names. The rule is in docs/catch-up.md.

import {
  type CatchUp,
  type ConfigFacts,
  decide,
  type KeyState,
  needsPods,
  recreated,
} from './core/catch-up.ts';
import type { LedgerEntry } from './core/ledger-entry.ts';
import type { VerdictOptions } from './core/plan.ts';
import { selectorString } from './core/records.ts';
import { configId } from './core/types.ts';
import type { CoreApi } from './kube/api.ts';
import type { Identify } from './kube/ledger.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { ClusterState, TrackedWorkload } from './state.ts';

export interface CatchUpDeps {
  core: CoreApi;
  /**
   * The creationTimestamp (ms) of a namespace, or undefined when it cannot be read (an install with
   * namespaced roles may not read namespaces): then a same-second tie stays "before".
   */
  namespaceCreated?(namespace: string): Promise<number | undefined>;
  state: ClusterState;
  log: Logger;
  metrics?: Metrics;
}

/** What one workload needs after the service was down: a reload of `changed`, a new record, or nothing. */
export async function catchUp(
  d: CatchUpDeps,
  t: TrackedWorkload,
  set: Record<string, string>,
  entry: LedgerEntry | undefined,
  key: KeyState,
  opts: VerdictOptions = {},
  ledgerWrittenMs?: number,
): Promise<CatchUp> {
  const ref = t.rec.ref;
  const where = { workload: `${ref.kind}/${ref.name}`, namespace: ref.namespace };
  const config = (id: string): ConfigFacts | undefined => {
    const rec = d.state.configs.get(id);
    if (!rec) return undefined;
    const uses = t.rec.uses.filter((u) => configId(u.config) === id);
    const required = uses.length > 0 && uses.every((u) => !u.optional);
    return {
      uid: rec.uid,
      writtenAtMs: rec.writtenAtMs,
      ...(rec.onlyCreated ? { onlyCreated: true } : {}),
      ...(required ? { required: true } : {}),
    };
  };
  const again = recreated({ uid: ref.uid, entry, config });
  if (again.workload) {
    d.metrics?.recreated('workload');
    d.log.info(
      where,
      'the workload is a new object of a recorded name (recreated while the service was down)',
    );
  }
  if (again.configs.length > 0) {
    d.metrics?.recreated('config', again.configs.length);
    d.log.info(
      { ...where, configs: again.configs },
      'configs are new objects of recorded names (recreated while the service was down)',
    );
  }
  const firstSeen = {
    ...(t.rec.createdMs !== undefined ? { createdMs: t.rec.createdMs } : {}),
    ...(ledgerWrittenMs !== undefined ? { ledgerWrittenMs } : {}),
  };
  const podsCreatedMs = needsPods(ref.kind, set, entry, opts, firstSeen) ? await podTimes(d, t) : undefined;
  // Asked only when the pods decide, and only where a same-second tie is possible at all.
  const namespaceCreatedMs =
    podsCreatedMs && podsCreatedMs.length > 0 && ledgerWrittenMs !== undefined
      ? await d.namespaceCreated?.(ref.namespace)
      : undefined;
  const c = decide({
    kind: ref.kind,
    uid: ref.uid,
    set,
    entry,
    key,
    config,
    podsCreatedMs,
    opts,
    ...firstSeen,
    ...(namespaceCreatedMs !== undefined ? { namespaceCreatedMs } : {}),
  });
  if (c.kind === 'reload' || c.kind === 'current') d.metrics?.caughtUp(c.kind);
  if (c.kind === 'current') {
    d.log.info(
      { ...where, configs: c.differing, pods: podsCreatedMs?.length ?? 0 },
      'configs differ from the ledger, but every pod is newer than their last write: recorded, not reloaded',
    );
  }
  return c;
}

/**
 * The creation times of the pods a restart would replace: those its selector matches, as a restart picks
 * them (so pods orphaned and not yet adopted count too). Undefined without a selector: nothing to judge by.
 */
async function podTimes(d: CatchUpDeps, t: TrackedWorkload): Promise<number[] | undefined> {
  const labelSelector = selectorString(t.rec.selector);
  if (labelSelector === '') return undefined;
  const list = await d.core.listNamespacedPod({ namespace: t.rec.ref.namespace, labelSelector });
  return list.items
    .filter((p) => !p.metadata?.deletionTimestamp)
    .map((p) => new Date(p.metadata?.creationTimestamp ?? 0).getTime())
    .filter((ms) => Number.isFinite(ms));
}

/** Ledger#identifyWith for the cluster as the caches see it: the uids of a workload and its configs. */
export function identities(state: ClusterState): Identify {
  return (workloadId, configIds) => {
    const w = state.workloads.get(workloadId);
    const configUids: Record<string, string> = {};
    for (const id of configIds) {
      const uid = state.configs.get(id)?.uid;
      if (uid) configUids[id] = uid;
    }
    return { ...(w?.rec.ref.uid ? { uid: w.rec.ref.uid } : {}), configUids };
  };
}

/**
 * CatchUpDeps.namespaceCreated over the API, read once per namespace per start-up (one start-up judges
 * every workload of a namespace). A namespace that cannot be read (forbidden, gone) is unknown.
 */
export function namespaceCreation(
  core: CoreApi,
  log: Logger,
): (namespace: string) => Promise<number | undefined> {
  const seen = new Map<string, Promise<number | undefined>>();
  return (namespace) => {
    let p = seen.get(namespace);
    if (!p) {
      p = core.readNamespace({ name: namespace }).then(
        (ns) => {
          const ms = Date.parse(String(ns.metadata?.creationTimestamp ?? ''));
          return Number.isFinite(ms) ? ms : undefined;
        },
        (err: Error) => {
          log.debug(
            { namespace, err: err.message },
            'could not read the namespace; a same-second tie counts as before',
          );
          return undefined;
        },
      );
      seen.set(namespace, p);
    }
    return p;
  };
}
