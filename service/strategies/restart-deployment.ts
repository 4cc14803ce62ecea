// The drift-free restart of a Deployment: replace every pod created before the cutoff T by
// evicting it (the Eviction API honours PodDisruptionBudgets) and letting the ReplicaSet recreate
// it. The Deployment object is never written (invariant I1). When the rollout budget allows no
// eviction (maxUnavailable 0, or one replica), a temporary surge pod, a copy of the pod template
// that no ReplicaSet adopts, keeps the Ready count up while the old pod goes (invariant I4).
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { selectorString } from '../core/records.ts';
import { isRolloutInProgress, planDeploymentRestartStep, type RestartPod } from '../core/rolling.ts';
import { evictPod } from '../kube/eviction.ts';
import { pause, type ReloadRequest, type StrategyContext, type StrategyResult } from './types.ts';

export const SURGE_LABEL = 'gitops-reloader.io/surge';
const POLL_MS = 250;

function toRestartPod(p: V1Pod, freshHash?: string, cutoffMs?: number): RestartPod {
  // A pod of a template rolled out after the config change sees the change: count it as new.
  const fresh = freshHash !== undefined && p.metadata?.labels?.['pod-template-hash'] === freshHash;
  const created = fresh && cutoffMs !== undefined ? cutoffMs : (p.metadata?.creationTimestamp ?? 0);
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(created).toISOString(),
    ready: Boolean(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
    terminating: Boolean(p.metadata?.deletionTimestamp),
  };
}

export function surgePod(d: V1Deployment): V1Pod {
  const name = d.metadata?.name as string;
  const labels: Record<string, string> = {
    ...d.spec?.template.metadata?.labels,
    [SURGE_LABEL]: d.metadata?.uid as string,
  };
  delete labels['pod-template-hash'];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `${name}-surge-`,
      namespace: d.metadata?.namespace,
      labels,
      annotations: d.spec?.template.metadata?.annotations,
      // controller: true lets the disruption controller find the pod's scale (the Deployment), so a
      // PDB with maxUnavailable or a percentage can count it (docs/adr/0004).
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'Deployment', name, uid: d.metadata?.uid as string, controller: true },
      ],
    },
    spec: d.spec?.template.spec,
  };
}

/** The pod-template-hash of the Deployment's current ReplicaSet (the one at its revision). */
async function currentTemplateHash(ctx: StrategyContext, d: V1Deployment): Promise<string | undefined> {
  const revision = d.metadata?.annotations?.['deployment.kubernetes.io/revision'];
  const namespace = d.metadata?.namespace as string;
  const sets = await ctx.apps.listNamespacedReplicaSet({
    namespace,
    labelSelector: selectorString(d.spec?.selector),
  });
  const current = sets.items.find(
    (rs) =>
      rs.metadata?.ownerReferences?.some((o) => o.uid === d.metadata?.uid) &&
      rs.metadata?.annotations?.['deployment.kubernetes.io/revision'] === revision,
  );
  return current?.metadata?.labels?.['pod-template-hash'];
}

export async function restartDeployment(ctx: StrategyContext, req: ReloadRequest): Promise<StrategyResult> {
  const { namespace, name } = req.workload.ref;
  const evicted = new Set<string>();
  let blockedSince: number | undefined;
  let stalled = false;
  let recreateNoted = false;
  // A refused eviction (429: a PodDisruptionBudget) is retried with backoff, 1 s doubling to 16 s.
  let backoffMs = 0;
  const evict = async (p: RestartPod): Promise<boolean> => {
    const r = await evictPod(ctx.core, namespace, p.name, { uid: p.uid, signal: ctx.signal });
    if (r.outcome === 'blocked') {
      noteBlocked(`eviction of pod ${p.name} refused: ${r.last.message}`);
      backoffMs = Math.min(Math.max(backoffMs * 2, 1000), 16_000);
      return false;
    }
    backoffMs = 0;
    blockedSince = undefined;
    evicted.add(p.name);
    return true;
  };
  const noteBlocked = (why: string) => {
    blockedSince ??= Date.now();
    if (!stalled && Date.now() - blockedSince >= ctx.stallAfterMs) {
      stalled = true;
      ctx.onStall(why);
    }
  };

  for (;;) {
    ctx.signal.throwIfAborted();
    const d = await ctx.apps.readNamespacedDeployment({ name, namespace });
    if (d.metadata?.uid !== req.workload.ref.uid)
      throw new Error(`Deployment ${namespace}/${name} was replaced`);
    const labelSelector = selectorString(d.spec?.selector);
    const pods = (await ctx.core.listNamespacedPod({ namespace, labelSelector })).items;
    const surge = pods.filter((p) => p.metadata?.labels?.[SURGE_LABEL] === d.metadata?.uid);
    const replicas = d.spec?.replicas ?? 1;
    const freshHash = req.templateChangedSince() ? await currentTemplateHash(ctx, d) : undefined;
    const view = (p: V1Pod) => toRestartPod(p, freshHash, req.cutoffMs);
    const recreate = d.spec?.strategy?.type === 'Recreate';
    const step = planDeploymentRestartStep({
      replicas,
      maxUnavailable: recreate ? '100%' : (d.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%'),
      maxSurge: recreate ? 0 : (d.spec?.strategy?.rollingUpdate?.maxSurge ?? '25%'),
      cutoffMs: req.cutoffMs,
      rolloutInProgress: isRolloutInProgress({
        generation: d.metadata?.generation,
        observedGeneration: d.status?.observedGeneration,
        replicas,
        updatedReplicas: d.status?.updatedReplicas,
        statusReplicas: d.status?.replicas,
        availableReplicas: d.status?.availableReplicas,
      }),
      pods: pods.map(view),
      nowMs: Date.now(),
    });

    switch (step.kind) {
      case 'done': {
        // Nothing old is left. Keep surge pods until the ReplicaSet's own pods are Ready again.
        const own = pods.filter((p) => !surge.includes(p)).map(view);
        const readyOwn = own.filter((p) => p.ready && !p.terminating).length;
        if (surge.length > 0 && readyOwn < replicas) {
          await pause(POLL_MS, ctx.signal);
          continue;
        }
        for (const s of surge) {
          await ctx.core
            .deleteNamespacedPod({ name: s.metadata?.name as string, namespace })
            .catch((err: { code?: number }) => {
              if (err.code !== 404) throw err;
            });
        }
        const summary =
          evicted.size === 0
            ? 'every pod was already newer than the change'
            : `replaced ${evicted.size} pod${evicted.size === 1 ? '' : 's'}${recreate ? ' (strategy Recreate: downtime accepted, no surge pod)' : ''}`;
        return { replaced: evicted.size, summary };
      }
      case 'evict': {
        const byName = new Map(pods.map((p) => [p.metadata?.name, view(p)]));
        for (const name of step.pods) {
          const p = byName.get(name);
          if (p && !(await evict(p))) break;
        }
        await pause(Math.max(POLL_MS, backoffMs), ctx.signal);
        continue;
      }
      case 'wait': {
        if (step.reason === 'needs-surge') {
          if (recreate) {
            // Recreate says two copies must never run at once: no surge pod; evict and accept downtime.
            if (!recreateNoted)
              ctx.log.warn(
                { workload: `Deployment/${name}`, namespace },
                'Recreate strategy: downtime accepted',
              );
            recreateNoted = true;
            const old = pods
              .map(view)
              .filter((p) => !p.terminating && Date.parse(p.createdAt) < req.cutoffMs);
            for (const p of old) if (!(await evict(p))) break;
          } else {
            const live = surge.filter((s) => !s.metadata?.deletionTimestamp);
            const want = Math.max(1, step.maxSurge);
            for (let i = live.length; i < want; i++) {
              await ctx.core.createNamespacedPod({ namespace, body: surgePod(d) });
            }
          }
        } else if (step.reason !== 'before-cutoff') {
          noteBlocked(`waiting: ${step.reason}`);
        }
        await pause(
          step.reason === 'before-cutoff' ? Math.max(50, step.retryAfterMs) : Math.max(POLL_MS, backoffMs),
          ctx.signal,
        );
        continue;
      }
    }
  }
}
