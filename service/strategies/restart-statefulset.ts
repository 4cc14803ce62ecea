// The drift-free restart of a StatefulSet: evict every pod created before the cutoff T, highest
// ordinal first, within maxUnavailable (default 1), and let the StatefulSet controller recreate each
// under the same name. The StatefulSet object is never written (invariant I1), so this works the
// same for the RollingUpdate and OnDelete update strategies.

import type { V1Pod, V1StatefulSet } from '@kubernetes/client-node';
import { isBeforeCutoff } from '../core/cutoff.ts';
import {
  isStatefulSetRolloutInProgress,
  type OrdinalPod,
  planStatefulSetRestartStep,
  podOrdinal,
} from '../core/rolling-statefulset.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import { controlledBy, type PodEvictor, readiness } from './evictor.ts';
import type { RestartSession } from './restart-session.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

/**
 * The pod as the planner sees it. A pod already on `freshRevision` (the template rolled out after
 * the config change) sees the change, so it counts as created at the cutoff, whatever its
 * whole-second creationTimestamp says.
 */
function toOrdinalPod(
  setName: string,
  p: V1Pod,
  cutoffMs: number,
  evicted: ReadonlySet<string>,
  freshRevision?: string,
): OrdinalPod {
  const name = p.metadata?.name ?? '';
  const fresh =
    freshRevision !== undefined && p.metadata?.labels?.['controller-revision-hash'] === freshRevision;
  return {
    name,
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(fresh ? cutoffMs : (p.metadata?.creationTimestamp ?? 0)).toISOString(),
    // A pod this reload evicted counts as terminating before the watch shows it.
    terminating: Boolean(p.metadata?.deletionTimestamp) || evicted.has(p.metadata?.uid ?? ''),
    ordinal: podOrdinal(setName, name, p.metadata?.labels),
    ...readiness(p),
  };
}

/** Runs inside RestartSession.run, which opens the views, makes the evictor and closes both. */
export async function restartStatefulSet(
  session: RestartSession<V1StatefulSet>,
  evictor: PodEvictor,
  ctx: StrategyContext,
  req: ReloadRequest,
): Promise<StrategyResult> {
  const { name } = req.workload.ref;

  for (;;) {
    ctx.signal.throwIfAborted();
    const s = session.workload();
    const uid = s.metadata?.uid as string;
    const pods = session.pods().filter((p) => controlledBy(p, uid));
    // Pods carry their revision in the controller-revision-hash label; status.updateRevision is its name.
    const freshRevision = (await req.templateChangedSince(s as unknown as RawObject))
      ? s.status?.updateRevision
      : undefined;
    const replicas = s.spec?.replicas ?? 1;
    const rolling = s.spec?.updateStrategy?.rollingUpdate;
    const view = pods.map((p) => toOrdinalPod(name, p, req.cutoffMs, evictor.evicted, freshRevision));
    const start = s.spec?.ordinals?.start ?? 0;
    const targets = await session.targets(() =>
      view
        .filter(
          (p) =>
            !p.terminating &&
            p.ordinal !== undefined &&
            p.ordinal >= start &&
            p.ordinal < start + replicas &&
            isBeforeCutoff(p.createdAt, req.cutoffMs),
        )
        .map((p) => p.uid),
    );
    const step = planStatefulSetRestartStep({
      replicas,
      ...(req.canary ? { canary: true } : {}),
      ordinalStart: s.spec?.ordinals?.start,
      maxUnavailable: rolling?.maxUnavailable,
      minReadySeconds: s.spec?.minReadySeconds,
      cutoffMs: req.cutoffMs,
      ...(targets ? { targets } : {}),
      rolloutInProgress: isStatefulSetRolloutInProgress({
        generation: s.metadata?.generation,
        observedGeneration: s.status?.observedGeneration,
        updateStrategy: s.spec?.updateStrategy?.type,
        partition: rolling?.partition,
        replicas,
        currentRevision: s.status?.currentRevision,
        updateRevision: s.status?.updateRevision,
        updatedReplicas: s.status?.updatedReplicas,
      }),
      pods: view,
      nowMs: Date.now(),
    });

    switch (step.kind) {
      case 'done': {
        const n = evictor.evicted.size;
        return {
          replaced: n,
          ...(n === 0 ? { notNeeded: true } : {}),
          summary:
            n === 0
              ? 'every pod was already newer than the change'
              : `replaced ${n} pod${n === 1 ? '' : 's'}, highest ordinal first`,
        };
      }
      case 'evict': {
        await evictor.evictNamedAndPace(step.pods, pods);
        continue;
      }
      case 'wait':
        await evictor.wait(step);
        continue;
    }
  }
}
