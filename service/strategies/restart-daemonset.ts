// The drift-free restart of a DaemonSet: evict the pods created before the cutoff T node by node,
// within maxUnavailable (default 1), and let the DaemonSet controller recreate each on its node.
// The DaemonSet object is never written (invariant I1). We do not surge: a DaemonSet that asks for
// maxUnavailable 0 still has each node briefly without its pod, and the summary says so.
import type { V1Pod } from '@kubernetes/client-node';
import { selectorString } from '../core/records.ts';
import {
  isDaemonSetRolloutInProgress,
  type NodePod,
  planDaemonSetRestartStep,
  resolveDaemonSetBudget,
} from '../core/rolling-daemonset.ts';
import { evictPod } from '../kube/eviction.ts';
import { controlledBy, readiness } from './restart-statefulset.ts';
import { pause, type ReloadRequest, type StrategyContext, type StrategyResult } from './types.ts';

const POLL_MS = 250;

// The API server bumps this annotation on each template change; the controller stamps the value on
// the pods it creates as the pod-template-generation label.
const TEMPLATE_GENERATION = 'deprecated.daemonset.template.generation';

/**
 * The pod as the planner sees it. A pod of `freshGeneration` (the template rolled out after the
 * config change) sees the change, so it counts as created at the cutoff, whatever its whole-second
 * creationTimestamp says.
 */
function toNodePod(p: V1Pod, cutoffMs: number, freshGeneration?: string): NodePod {
  const fresh =
    freshGeneration !== undefined && p.metadata?.labels?.['pod-template-generation'] === freshGeneration;
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(fresh ? cutoffMs : (p.metadata?.creationTimestamp ?? 0)).toISOString(),
    terminating: Boolean(p.metadata?.deletionTimestamp),
    node: p.spec?.nodeName || undefined,
    ...readiness(p),
  };
}

export async function restartDaemonSet(ctx: StrategyContext, req: ReloadRequest): Promise<StrategyResult> {
  const { namespace, name } = req.workload.ref;
  const workload = `DaemonSet/${name}`;
  const evicted = new Set<string>();
  const nodesDone = new Set<string>();
  let surgeIgnored = false;
  let blockedSince: number | undefined;
  let stalled = false;
  // A refused eviction (429: a PodDisruptionBudget) is retried with backoff, 1 s doubling to 16 s.
  let backoffMs = 0;
  const noteBlocked = (why: string) => {
    blockedSince ??= Date.now();
    if (!stalled && Date.now() - blockedSince >= ctx.stallAfterMs) {
      stalled = true;
      ctx.onStall(why);
    }
  };

  for (;;) {
    ctx.signal.throwIfAborted();
    const ds = await ctx.apps.readNamespacedDaemonSet({ name, namespace });
    const uid = ds.metadata?.uid;
    if (!uid || uid !== req.workload.ref.uid) throw new Error(`DaemonSet ${namespace}/${name} was replaced`);
    const labelSelector = selectorString(ds.spec?.selector);
    const pods = (await ctx.core.listNamespacedPod({ namespace, labelSelector })).items.filter((p) =>
      controlledBy(p, uid),
    );
    const freshGeneration = req.templateChangedSince()
      ? ds.metadata?.annotations?.[TEMPLATE_GENERATION]
      : undefined;
    const desired = ds.status?.desiredNumberScheduled ?? 0;
    const strategy = ds.spec?.updateStrategy;
    const maxUnavailable =
      strategy?.type === 'OnDelete' ? undefined : strategy?.rollingUpdate?.maxUnavailable;
    surgeIgnored ||= resolveDaemonSetBudget(maxUnavailable, desired).surgeIgnored;
    const step = planDaemonSetRestartStep({
      desired,
      maxUnavailable,
      minReadySeconds: ds.spec?.minReadySeconds,
      cutoffMs: req.cutoffMs,
      rolloutInProgress: isDaemonSetRolloutInProgress({
        generation: ds.metadata?.generation,
        observedGeneration: ds.status?.observedGeneration,
        updateStrategy: strategy?.type,
        desiredNumberScheduled: ds.status?.desiredNumberScheduled,
        updatedNumberScheduled: ds.status?.updatedNumberScheduled,
      }),
      pods: pods.map((p) => toNodePod(p, req.cutoffMs, freshGeneration)),
      nowMs: Date.now(),
    });

    switch (step.kind) {
      case 'done': {
        const n = evicted.size;
        const note = surgeIgnored
          ? ' (maxUnavailable 0 asks for surge, which gitops-reloader does not do for DaemonSets: each node was briefly without its pod)'
          : '';
        return {
          replaced: n,
          summary:
            n === 0
              ? 'every pod was already newer than the change'
              : `replaced ${n} pod${n === 1 ? '' : 's'} on ${nodesDone.size} node${nodesDone.size === 1 ? '' : 's'}, node by node${note}`,
        };
      }
      case 'evict': {
        const byName = new Map(pods.map((p) => [p.metadata?.name, p]));
        for (const podName of step.pods) {
          const p = byName.get(podName);
          if (!p?.metadata?.uid) continue;
          const r = await evictPod(ctx.core, namespace, podName, { uid: p.metadata.uid, signal: ctx.signal });
          if (r.outcome === 'blocked') {
            noteBlocked(`eviction of pod ${podName} refused: ${r.last.message}`);
            backoffMs = Math.min(Math.max(backoffMs * 2, 1000), 16_000);
            break;
          }
          backoffMs = 0;
          blockedSince = undefined;
          if (r.outcome === 'evicted') {
            evicted.add(p.metadata.uid);
            if (p.spec?.nodeName) nodesDone.add(p.spec.nodeName);
            ctx.log.debug({ workload, namespace, pod: podName, node: p.spec?.nodeName }, 'pod evicted');
          }
        }
        await pause(Math.max(POLL_MS, backoffMs), ctx.signal);
        continue;
      }
      case 'wait': {
        const retry = step.reason === 'rollout-in-progress' ? undefined : step.retryAfterMs;
        // Waiting out the cutoff or a pod's minReadySeconds is progress, not a block.
        if (retry === undefined) noteBlocked(`waiting: ${step.reason}`);
        await pause(
          retry !== undefined ? Math.max(50, Math.min(retry, 5_000)) : Math.max(POLL_MS, backoffMs),
          ctx.signal,
        );
        continue;
      }
    }
  }
}
