// The drift-free restart of a DaemonSet: evict the pods created before the cutoff T node by node,
// within maxUnavailable (default 1), and let the DaemonSet controller recreate each on its node.
// The DaemonSet object is never written (invariant I1). We do not surge: a DaemonSet that asks for
// maxUnavailable 0 still has each node briefly without its pod, and the summary says so.

import type { V1DaemonSet, V1Pod } from '@kubernetes/client-node';
import { isBeforeCutoff } from '../core/cutoff.ts';
import {
  isDaemonSetRolloutInProgress,
  type NodePod,
  planDaemonSetRestartStep,
  resolveDaemonSetBudget,
} from '../core/rolling-daemonset.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import { controlledBy, type PodEvictor, plural, readiness } from './evictor.ts';
import type { RestartSession } from './restart-session.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

// The API server bumps this annotation on each template change; the controller stamps the value on
// the pods it creates as the pod-template-generation label.
const TEMPLATE_GENERATION = 'deprecated.daemonset.template.generation';

/**
 * The pod as the planner sees it. A pod of `freshGeneration` (the template rolled out after the
 * config change) sees the change, so it counts as created at the cutoff, whatever its whole-second
 * creationTimestamp says.
 */
function toNodePod(
  p: V1Pod,
  cutoffMs: number,
  evicted: ReadonlySet<string>,
  freshGeneration?: string,
): NodePod {
  const fresh =
    freshGeneration !== undefined && p.metadata?.labels?.['pod-template-generation'] === freshGeneration;
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(fresh ? cutoffMs : (p.metadata?.creationTimestamp ?? 0)).toISOString(),
    // A pod this reload evicted counts as terminating before the watch shows it.
    terminating: Boolean(p.metadata?.deletionTimestamp) || evicted.has(p.metadata?.uid ?? ''),
    node: p.spec?.nodeName || undefined,
    ...readiness(p),
  };
}

/** Runs inside RestartSession.run, which opens the views, makes the evictor and closes both. */
export async function restartDaemonSet(
  session: RestartSession<V1DaemonSet>,
  evictor: PodEvictor,
  ctx: StrategyContext,
  req: ReloadRequest,
): Promise<StrategyResult> {
  const nodesDone = new Set<string>();
  let surgeIgnored = false;

  for (;;) {
    ctx.signal.throwIfAborted();
    const ds = session.workload();
    const uid = ds.metadata?.uid as string;
    const pods = session.pods().filter((p) => controlledBy(p, uid));
    const freshGeneration = (await req.templateChangedSince(ds as unknown as RawObject))
      ? ds.metadata?.annotations?.[TEMPLATE_GENERATION]
      : undefined;
    const desired = ds.status?.desiredNumberScheduled ?? 0;
    const strategy = ds.spec?.updateStrategy;
    const maxUnavailable =
      strategy?.type === 'OnDelete' ? undefined : strategy?.rollingUpdate?.maxUnavailable;
    surgeIgnored ||= resolveDaemonSetBudget(maxUnavailable, desired).surgeIgnored;
    const view = pods.map((p) => toNodePod(p, req.cutoffMs, evictor.evicted, freshGeneration));
    const targets = await session.targets(() =>
      view.filter((p) => !p.terminating && isBeforeCutoff(p.createdAt, req.cutoffMs)).map((p) => p.uid),
    );
    const step = planDaemonSetRestartStep({
      desired,
      ...(req.canary ? { canary: true } : {}),
      maxUnavailable,
      minReadySeconds: ds.spec?.minReadySeconds,
      cutoffMs: req.cutoffMs,
      ...(targets ? { targets } : {}),
      rolloutInProgress: isDaemonSetRolloutInProgress({
        generation: ds.metadata?.generation,
        observedGeneration: ds.status?.observedGeneration,
        updateStrategy: strategy?.type,
        desiredNumberScheduled: ds.status?.desiredNumberScheduled,
        updatedNumberScheduled: ds.status?.updatedNumberScheduled,
      }),
      pods: view,
      nowMs: Date.now(),
    });

    switch (step.kind) {
      case 'done': {
        const n = evictor.evicted.size;
        const note = surgeIgnored
          ? ' (maxUnavailable 0 asks for surge, which gitops-reloader does not do for DaemonSets: each node was briefly without its pod)'
          : '';
        return {
          replaced: n,
          ...(n === 0 ? { notNeeded: true } : {}),
          summary:
            n === 0
              ? 'every pod was already newer than the change'
              : `replaced ${plural(n, 'pod')} on ${plural(nodesDone.size, 'node')}, node by node${note}`,
        };
      }
      case 'evict': {
        await evictor.evictNamedAndPace(step.pods, pods);
        for (const p of pods) {
          if (p.spec?.nodeName && evictor.evicted.has(p.metadata?.uid ?? '')) nodesDone.add(p.spec.nodeName);
        }
        continue;
      }
      case 'wait':
        await evictor.wait(step);
        continue;
    }
  }
}
