// The drift-free restart of a Deployment: replace every pod created before the cutoff T by
// evicting it (the Eviction API honours PodDisruptionBudgets) and letting the ReplicaSet recreate
// it. The Deployment object is never written (invariant I1). When the rollout budget allows no
// eviction (maxUnavailable 0, or one replica), a temporary surge pod, a copy of the pod template
// that no ReplicaSet adopts, keeps the Ready count up while the old pod goes (invariant I4).
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { selectorString } from '../core/records.ts';
import { isRolloutInProgress, planDeploymentRestartStep, type RestartPod } from '../core/rolling.ts';
import { PodEvictor, plural } from './evictor.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

export const SURGE_LABEL = 'gitops-reloader.io/surge';

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
  const evictor = new PodEvictor(ctx, namespace, `Deployment/${name}`);
  let recreateNoted = false;

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
    const old = () => pods.map(view).filter((p) => !p.terminating && Date.parse(p.createdAt) < req.cutoffMs);

    switch (step.kind) {
      case 'done': {
        // Nothing old is left. Keep surge pods until the ReplicaSet's own pods are Ready again.
        const readyOwn = pods
          .filter((p) => !surge.includes(p))
          .map(view)
          .filter((p) => p.ready && !p.terminating);
        if (surge.length > 0 && readyOwn.length < replicas) {
          await evictor.next();
          continue;
        }
        for (const s of surge) {
          await ctx.core
            .deleteNamespacedPod({ name: s.metadata?.name as string, namespace })
            .catch((err: { code?: number }) => {
              if (err.code !== 404) throw err;
            });
        }
        const n = evictor.evicted.size;
        const summary =
          n === 0
            ? 'every pod was already newer than the change'
            : `replaced ${plural(n, 'pod')}${recreate ? ' (strategy Recreate: downtime accepted, no surge pod)' : ''}`;
        return { replaced: n, summary };
      }
      case 'evict': {
        const byName = new Map(pods.map((p) => [p.metadata?.name, view(p)]));
        await evictor.evict(step.pods.flatMap((n) => byName.get(n) ?? []));
        await evictor.next();
        continue;
      }
      case 'wait': {
        if (step.reason === 'needs-surge' && recreate) {
          // Recreate says two copies must never run at once: no surge pod; evict and accept downtime.
          if (!recreateNoted)
            ctx.log.warn(
              { workload: `Deployment/${name}`, namespace },
              'Recreate strategy: downtime accepted',
            );
          recreateNoted = true;
          await evictor.evict(old());
        } else if (step.reason === 'needs-surge') {
          const live = surge.filter((s) => !s.metadata?.deletionTimestamp);
          const want = Math.min(Math.max(1, step.maxSurge), old().length);
          for (let i = live.length; i < want; i++) {
            await ctx.core.createNamespacedPod({ namespace, body: surgePod(d) });
          }
        } else if (step.reason !== 'before-cutoff') {
          evictor.blocked(`waiting: ${step.reason}`);
        }
        await evictor.next(step.reason === 'before-cutoff' ? step.retryAfterMs : undefined);
        continue;
      }
    }
  }
}
