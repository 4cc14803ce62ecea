// The drift-free restart of a Deployment: replace every pod created before the cutoff T by
// evicting it (the Eviction API honours PodDisruptionBudgets) and letting the ReplicaSet recreate
// it. The Deployment object is never written (invariant I1). When the rollout budget allows no
// eviction (maxUnavailable 0, or one replica), a temporary surge pod, a copy of the pod template
// that no ReplicaSet adopts, keeps the Ready count up while the old pod goes (invariant I4).
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { isBeforeCutoff } from '../core/cutoff.ts';
import { selectorString } from '../core/records.ts';
import { isRolloutInProgress, planDeploymentRestartStep, type RestartPod } from '../core/rolling.ts';
import { requestJson } from '../kube/watch-http.ts';
import { type PodEvictor, plural } from './evictor.ts';
import type { RestartSession } from './restart-session.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

export const SURGE_LABEL = 'gitops-reloader.io/surge';

/**
 * The pod as the planner sees it. `evicted` holds the uids this reload evicted: they count as
 * terminating before the watch shows their deletionTimestamp.
 */
function toRestartPod(
  p: V1Pod,
  evicted: ReadonlySet<string>,
  freshHash?: string,
  cutoffMs?: number,
): RestartPod {
  // A pod of a template rolled out after the config change sees the change: count it as new.
  const fresh = freshHash !== undefined && p.metadata?.labels?.['pod-template-hash'] === freshHash;
  const created = fresh && cutoffMs !== undefined ? cutoffMs : (p.metadata?.creationTimestamp ?? 0);
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(created).toISOString(),
    ready: Boolean(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
    terminating: Boolean(p.metadata?.deletionTimestamp) || evicted.has(p.metadata?.uid ?? ''),
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

/** Runs inside RestartSession.run, which opens the views, makes the evictor and closes both. */
export async function restartDeployment(
  session: RestartSession<V1Deployment>,
  evictor: PodEvictor,
  ctx: StrategyContext,
  req: ReloadRequest,
): Promise<StrategyResult> {
  const { namespace, name } = req.workload.ref;
  let recreateNoted = false;
  let freshHash: string | undefined;
  let freshChecked = false;

  for (;;) {
    ctx.signal.throwIfAborted();
    const d = session.workload();
    const uid = d.metadata?.uid as string;
    const pods = session.pods();
    const surge = pods.filter((p) => p.metadata?.labels?.[SURGE_LABEL] === uid);
    const replicas = d.spec?.replicas ?? 1;
    if (!freshChecked && req.templateChangedSince()) {
      freshHash = await currentTemplateHash(ctx, d);
      freshChecked = true;
    }
    const view = (p: V1Pod) => toRestartPod(p, evictor.evicted, freshHash, req.cutoffMs);
    // The pods to replace: those the cutoff rule finds old in the first complete view.
    const targets = await session.targets(() =>
      pods
        .filter((p) => !surge.includes(p))
        .map(view)
        .filter((p) => !p.terminating && isBeforeCutoff(p.createdAt, req.cutoffMs))
        .map((p) => p.uid),
    );
    const isOld = (p: RestartPod) =>
      !p.terminating && (targets ? targets.has(p.uid) : isBeforeCutoff(p.createdAt, req.cutoffMs));
    const recreate = d.spec?.strategy?.type === 'Recreate';
    const step = planDeploymentRestartStep({
      replicas,
      maxUnavailable: recreate ? '100%' : (d.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%'),
      maxSurge: recreate ? 0 : (d.spec?.strategy?.rollingUpdate?.maxSurge ?? '25%'),
      cutoffMs: req.cutoffMs,
      ...(targets ? { targets } : {}),
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
    const old = () => pods.map(view).filter(isOld);

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
          // A leader whose term ended leaves its surge pod to the next one (which reuses it).
          ctx.signal.throwIfAborted();
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
        return { replaced: n, summary, ...(n === 0 ? { notNeeded: true } : {}) };
      }
      case 'evict': {
        await evictor.evictNamedAndPace(step.pods, pods);
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
          await evictor.evictAndPace(old());
          continue;
        }
        if (step.reason === 'needs-surge') {
          const live = surge.filter((s) => !s.metadata?.deletionTimestamp);
          const want = Math.min(Math.max(1, step.maxSurge), old().length);
          for (let i = live.length; i < want; i++) {
            const created = (await requestJson(
              ctx.kc,
              'POST',
              `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
              surgePod(d),
              ctx.signal,
              30_000,
            )) as V1Pod;
            const surgeName = created.metadata?.name as string;
            // Read our own write before planning again, or the next step would create another.
            await session.untilPods((all) => all.has(surgeName), 30_000);
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
