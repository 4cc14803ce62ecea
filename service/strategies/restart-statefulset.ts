// The drift-free restart of a StatefulSet: evict every pod created before the cutoff T, highest
// ordinal first, within maxUnavailable (default 1), and let the StatefulSet controller recreate each
// under the same name. The StatefulSet object is never written (invariant I1), so this works the
// same for the RollingUpdate and OnDelete update strategies.
import type { V1Pod } from '@kubernetes/client-node';
import { selectorString } from '../core/records.ts';
import {
  isStatefulSetRolloutInProgress,
  type OrdinalPod,
  planStatefulSetRestartStep,
  podOrdinal,
} from '../core/rolling-statefulset.ts';
import { controlledBy, PodEvictor, readiness } from './evictor.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

/**
 * The pod as the planner sees it. A pod already on `freshRevision` (the template rolled out after
 * the config change) sees the change, so it counts as created at the cutoff, whatever its
 * whole-second creationTimestamp says.
 */
function toOrdinalPod(setName: string, p: V1Pod, cutoffMs: number, freshRevision?: string): OrdinalPod {
  const name = p.metadata?.name ?? '';
  const fresh =
    freshRevision !== undefined && p.metadata?.labels?.['controller-revision-hash'] === freshRevision;
  return {
    name,
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(fresh ? cutoffMs : (p.metadata?.creationTimestamp ?? 0)).toISOString(),
    terminating: Boolean(p.metadata?.deletionTimestamp),
    ordinal: podOrdinal(setName, name, p.metadata?.labels),
    ...readiness(p),
  };
}

export async function restartStatefulSet(ctx: StrategyContext, req: ReloadRequest): Promise<StrategyResult> {
  const { namespace, name } = req.workload.ref;
  const evictor = new PodEvictor(ctx, namespace, `StatefulSet/${name}`);

  for (;;) {
    ctx.signal.throwIfAborted();
    const s = await ctx.apps.readNamespacedStatefulSet({ name, namespace });
    const uid = s.metadata?.uid;
    if (!uid || uid !== req.workload.ref.uid)
      throw new Error(`StatefulSet ${namespace}/${name} was replaced`);
    const labelSelector = selectorString(s.spec?.selector);
    const pods = (await ctx.core.listNamespacedPod({ namespace, labelSelector })).items.filter((p) =>
      controlledBy(p, uid),
    );
    // Pods carry their revision in the controller-revision-hash label; status.updateRevision is its name.
    const freshRevision = req.templateChangedSince() ? s.status?.updateRevision : undefined;
    const replicas = s.spec?.replicas ?? 1;
    const rolling = s.spec?.updateStrategy?.rollingUpdate;
    const step = planStatefulSetRestartStep({
      replicas,
      ordinalStart: s.spec?.ordinals?.start,
      maxUnavailable: rolling?.maxUnavailable,
      minReadySeconds: s.spec?.minReadySeconds,
      cutoffMs: req.cutoffMs,
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
      pods: pods.map((p) => toOrdinalPod(name, p, req.cutoffMs, freshRevision)),
      nowMs: Date.now(),
    });

    switch (step.kind) {
      case 'done': {
        const n = evictor.evicted.size;
        return {
          replaced: n,
          summary:
            n === 0
              ? 'every pod was already newer than the change'
              : `replaced ${n} pod${n === 1 ? '' : 's'}, highest ordinal first`,
        };
      }
      case 'evict': {
        await evictor.evictNamed(step.pods, pods);
        await evictor.next();
        continue;
      }
      case 'wait':
        await evictor.wait(step);
        continue;
    }
  }
}
