// The drift-free restart of a Deployment: replace every pod created before the cutoff T by
// evicting it (the Eviction API honours PodDisruptionBudgets) and letting the ReplicaSet recreate
// it. The Deployment object is never written (invariant I1). Like the Deployment's own rolling
// update it uses maxUnavailable and maxSurge at once (docs/adr/0017): temporary surge pods, copies
// of the pod template, up to maxSurge of them, raise the Ready count so that more old pods may go
// while it stays ≥ replicas − maxUnavailable (invariant I4). A Ready surge pod is then handed to the
// ReplicaSet in place of an old pod, which the ReplicaSet deletes (docs/adr/0019): no replacement
// has to start after that old pod goes.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { isBeforeCutoff } from '../core/cutoff.ts';
import { selectorString } from '../core/records.ts';
import { isRolloutInProgress, planDeploymentRestartStep, type RestartPod } from '../core/rolling.ts';
import { evictPod } from '../kube/eviction.ts';
import { requestJson } from '../kube/watch-http.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import { budgetSlot, type PodEvictor, plural } from './evictor.ts';
import type { RestartSession } from './restart-session.ts';
import { pause, type ReloadRequest, type StrategyContext, type StrategyResult } from './types.ts';

export const SURGE_LABEL = 'gitops-reloader.io/surge';
/** On a surge pod: the cutoff of the reload that made it (ISO 8601). */
export const SURGE_CUTOFF = 'gitops-reloader.io/surge-cutoff';
/** Read by the ReplicaSet controller when it scales down: the lowest cost goes first. */
export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';
const LOWEST_COST = String(-(2 ** 31));
/** How long a handover may take before its old pod is evicted the usual way instead. */
const HANDOVER_WAIT_MS = 10_000;
const REVISION = 'deployment.kubernetes.io/revision';

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

/**
 * The generateName the ReplicaSet controller gives its pods: the ReplicaSet's name and a dash, or the
 * name alone when the dash would make it too long for a pod name (k8s.io/kubernetes
 * pkg/controller/controller_utils.go getPodsPrefix, v1.36.3). The API server then appends the same
 * 5 random characters (bcdfghjklmnpqrstvwxz2456789) to either, truncating a long base the same way.
 */
export function replicaSetPodPrefix(replicaSet: string): string {
  return replicaSet.length + 1 <= 253 ? `${replicaSet}-` : replicaSet;
}

/**
 * A surge pod: a copy of the pod template, owned by the Deployment until it is handed over. It is
 * named as `replicaSet` would name its pods (docs/adr/0019, amendment), so that once adopted it looks
 * like any pod of that ReplicaSet; without one (not found: it will not be handed over), `<name>-surge-`.
 * Until the handover, the surge label (the Deployment's uid) marks it as ours, for the sweep after a
 * crash (surge-sweep.ts); the handover removes the label and the owner reference in one patch.
 */
export function surgePod(d: V1Deployment, replicaSet?: string, cutoffMs?: number): V1Pod {
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
      generateName: replicaSet ? replicaSetPodPrefix(replicaSet) : `${name}-surge-`,
      namespace: d.metadata?.namespace,
      labels,
      // The reload it was made for (its cutoff): a later reload of the workload tells its own surge
      // pods, resumed after a crash, from those a stopped reload of older content left behind.
      annotations: {
        ...d.spec?.template.metadata?.annotations,
        ...(cutoffMs !== undefined ? { [SURGE_CUTOFF]: new Date(cutoffMs).toISOString() } : {}),
      },
      // controller: true lets the disruption controller find the pod's scale (the Deployment), so a
      // PDB with maxUnavailable or a percentage can count it (docs/adr/0004).
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'Deployment', name, uid: d.metadata?.uid as string, controller: true },
      ],
    },
    spec: d.spec?.template.spec,
  };
}

/** The Deployment's current ReplicaSet (the one at its revision): its name and pod-template-hash. */
async function currentReplicaSet(
  ctx: StrategyContext,
  d: V1Deployment,
): Promise<{ name: string | undefined; hash: string | undefined } | undefined> {
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
  return current && { name: current.metadata?.name, hash: current.metadata?.labels?.['pod-template-hash'] };
}

/**
 * Creates one surge pod and waits to see it in the pod view: the next step must count it, or it
 * would create another.
 */
async function createSurgePod(
  session: RestartSession<V1Deployment>,
  ctx: StrategyContext,
  d: V1Deployment,
  namespace: string,
  mine: Map<string, string | undefined>,
  replicaSet: string | undefined,
  cutoffMs: number,
): Promise<void> {
  const created = (await requestJson(
    ctx.kc,
    'POST',
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
    surgePod(d, replicaSet, cutoffMs),
    ctx.signal,
    30_000,
  )) as V1Pod;
  const surgeName = created.metadata?.name as string;
  mine.set(surgeName, d.metadata?.annotations?.[REVISION]);
  ctx.progress();
  await session.untilPods((all) => all.has(surgeName), 30_000);
}

function patchPod(ctx: StrategyContext, namespace: string, name: string, metadata: Record<string, unknown>) {
  return requestJson(
    ctx.kc,
    'PATCH',
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`,
    { metadata },
    ctx.signal,
    30_000,
  );
}

/**
 * Hands a Ready surge pod to the ReplicaSet in place of an old pod (docs/adr/0019). First the
 * Eviction API is asked, as a dry run, whether the old pod may go now: PodDisruptionBudgets are
 * honoured exactly as for an eviction. Meanwhile the old pod gets the lowest deletion cost. Then, on
 * the dry run's yes, the surge pod takes the ReplicaSet's labels and loses its owner reference, so the
 * ReplicaSet adopts it, finds itself one pod over, and deletes the old one. The uid in each request is
 * a precondition: a pod recreated under the same name is never touched.
 */
async function handOver(
  ctx: StrategyContext,
  namespace: string,
  surge: V1Pod,
  old: V1Pod,
  templateHash: string,
): Promise<{ outcome: 'handed' | 'gone' } | { outcome: 'blocked'; why: string; pdb: boolean }> {
  // The dry run and the old pod's cost go out together (one round trip, not two): an old pod is to be
  // replaced anyway, so the cost left on it when the dry run refuses only makes it the first to go in
  // a scale-down. Only the adoption, which makes the ReplicaSet delete, waits for the dry run's yes.
  const [may, costed] = await Promise.all([
    evictPod(ctx.core, namespace, old.metadata?.name as string, {
      uid: old.metadata?.uid,
      dryRun: true,
      signal: ctx.signal,
    }),
    // Already set by an attempt a PDB refused: not sent again on every retry.
    (old.metadata?.annotations?.[DELETION_COST] === LOWEST_COST
      ? Promise.resolve()
      : patchPod(ctx, namespace, old.metadata?.name as string, {
          uid: old.metadata?.uid,
          annotations: { [DELETION_COST]: LOWEST_COST },
        })
    ).then(
      () => true,
      (err: unknown) => {
        // Gone, or another pod under its name now (the uid precondition fails): nothing to hand over.
        const code = (err as { code?: number }).code;
        if (code === 404 || code === 409) return false;
        throw err;
      },
    ),
  ]);
  if (may.outcome === 'gone' || !costed) return { outcome: 'gone' };
  if (may.outcome === 'blocked')
    return { outcome: 'blocked', why: may.last.message, pdb: may.last.cause === 'disruption-budget' };
  await patchPod(ctx, namespace, surge.metadata?.name as string, {
    uid: surge.metadata?.uid,
    labels: { 'pod-template-hash': templateHash, [SURGE_LABEL]: null },
    annotations: { [SURGE_CUTOFF]: null },
    ownerReferences: null,
  });
  return { outcome: 'handed' };
}

/** Deletes surge pods one by one, stopping when the term ends; one already gone is fine. */
async function deleteSurgePods(
  ctx: StrategyContext,
  namespace: string,
  pods: readonly V1Pod[],
): Promise<void> {
  for (const s of pods) {
    ctx.signal.throwIfAborted();
    await ctx.core
      .deleteNamespacedPod({ name: s.metadata?.name as string, namespace })
      .catch((err: { code?: number }) => {
        if (err.code !== 404) throw err;
      });
  }
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
  /** Surge pods this restart created, with the Deployment's revision when it did. */
  const mine = new Map<string, string | undefined>();
  /** Old pods handed over and not yet seen going, by uid, with the surge pod and when. */
  const handing = new Map<string, { name: string; surgeUid: string; at: number }>();
  let handed = 0;
  /** Set when the ReplicaSet deleted a handed-over surge pod instead (pod-deletion-cost disabled). */
  let handoverOff = false;
  let blockedBackoffMs = 0;
  /** The pod-template-hash of the ReplicaSet at `revision` (undefined: not found; no handover). */
  let current:
    | { revision: string | undefined; hash: string | undefined; name: string | undefined }
    | undefined;

  for (;;) {
    ctx.signal.throwIfAborted();
    const d = session.workload();
    const uid = d.metadata?.uid as string;
    const pods = session.pods();
    const surge = pods.filter((p) => p.metadata?.labels?.[SURGE_LABEL] === uid);
    // A surge pod made for another reload (another cutoff) holds older content: a reload the engine
    // stopped (superseded by a newer change, or halted) left it when its clean-up failed. This reload
    // needs none of it, and one never Ready (the bad content a fix supersedes) would hold this
    // reload's floor until its deadline judged the fix by it: it is removed first (issue 34, found by
    // the execution simulation's bad contents). Its own, resumed after a crash, carry its cutoff;
    // one from a release that did not mark them is kept, as before. Surge pods are beyond the
    // replicas: removing one lowers no floor.
    const own = new Date(req.cutoffMs).toISOString();
    const stale = surge.filter((p) => {
      const made = p.metadata?.annotations?.[SURGE_CUTOFF];
      return !p.metadata?.deletionTimestamp && made !== undefined && made !== own;
    });
    if (stale.length > 0) {
      await deleteSurgePods(ctx, namespace, stale);
      await evictor.next();
      continue;
    }
    const replicas = d.spec?.replicas ?? 1;
    if (!freshChecked && (await req.templateChangedSince(d as unknown as RawObject))) {
      freshHash = (await currentReplicaSet(ctx, d))?.hash;
      freshChecked = true;
    }
    // A handover ends when the ReplicaSet deletes the old pod; until then nothing else is planned, as
    // a pod that starts in between would rank lower and be deleted instead. If the ReplicaSet does
    // not act in time, the old pod is left to the planner, which evicts it the usual way.
    let awaiting = false;
    for (const [oldUid, h] of handing) {
      const p = pods.find((x) => x.metadata?.uid === oldUid);
      const s = pods.find((x) => x.metadata?.uid === h.surgeUid);
      if (!s || s.metadata?.deletionTimestamp) {
        // The ReplicaSet ranked the surge pod lowest: the cluster ignores pod-deletion-cost (the
        // PodDeletionCost feature gate is off). No more handovers; the old pod is evicted as usual.
        ctx.log.warn(
          { workload: `Deployment/${name}`, namespace, pod: h.name },
          'the ReplicaSet deleted the handed-over surge pod instead of the old one; handing over no more surge pods',
        );
        handoverOff = true;
        handing.delete(oldUid);
      } else if (!p || p.metadata?.deletionTimestamp) {
        evictor.evicted.add(oldUid);
        handing.delete(oldUid);
        handed++;
        ctx.progress();
      } else if (Date.now() - h.at > HANDOVER_WAIT_MS) {
        ctx.log.warn(
          { workload: `Deployment/${name}`, namespace, pod: h.name },
          'the ReplicaSet did not delete the handed-over pod in time; evicting it instead',
        );
        handing.delete(oldUid);
      } else awaiting = true;
    }
    if (awaiting) {
      await evictor.next(250);
      continue;
    }
    const revision = d.metadata?.annotations?.[REVISION];
    if (current !== undefined && current.revision !== revision) current = undefined;
    const handable = (p: V1Pod) =>
      !handoverOff &&
      current?.hash !== undefined &&
      current.revision === revision &&
      mine.has(p.metadata?.name as string) &&
      mine.get(p.metadata?.name as string) === revision;
    const view = (p: V1Pod) => toRestartPod(p, evictor.evicted, freshHash, req.cutoffMs);
    // The pods to replace: those the cutoff rule finds old in the first complete view.
    const targets = await session.targets(() =>
      pods
        .filter((p) => !surge.includes(p))
        .map(view)
        .filter((p) => !p.terminating && isBeforeCutoff(p.createdAt, req.cutoffMs))
        .map((p) => p.uid),
    );
    const recreate = d.spec?.strategy?.type === 'Recreate';
    const step = planDeploymentRestartStep({
      replicas,
      maxUnavailable: recreate ? '100%' : (d.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%'),
      maxSurge: recreate ? 0 : (d.spec?.strategy?.rollingUpdate?.maxSurge ?? '25%'),
      recreate,
      // Surge pods made now carry the current template, so they may join the current ReplicaSet,
      // unless that ReplicaSet could not be found.
      handover: !recreate && !handoverOff && (current === undefined || current.hash !== undefined),
      cutoffMs: req.cutoffMs,
      ...(req.canary ? { canary: true } : {}),
      ...(targets ? { targets } : {}),
      rolloutInProgress: isRolloutInProgress({
        generation: d.metadata?.generation,
        observedGeneration: d.status?.observedGeneration,
        replicas,
        updatedReplicas: d.status?.updatedReplicas,
        statusReplicas: d.status?.replicas,
        availableReplicas: d.status?.availableReplicas,
      }),
      pods: pods.map((p) => ({
        ...view(p),
        surge: surge.includes(p),
        handable: surge.includes(p) && handable(p),
      })),
      nowMs: Date.now(),
    });

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
        // A leader whose term ended leaves its surge pods to the next one (which reuses them).
        await deleteSurgePods(ctx, namespace, surge);
        const n = evictor.evicted.size;
        const how = recreate
          ? ' (strategy Recreate: downtime accepted, no surge pod)'
          : handed > 0
            ? ` (${handed} by handing a surge pod to the ReplicaSet)`
            : '';
        const summary =
          n === 0 ? 'every pod was already newer than the change' : `replaced ${plural(n, 'pod')}${how}`;
        return { replaced: n, summary, ...(n === 0 ? { notNeeded: true } : {}) };
      }
      case 'act': {
        if (step.downtime && !recreateNoted) {
          // Recreate says two copies must never run at once: no surge pod; evict and accept downtime.
          ctx.log.warn({ workload: `Deployment/${name}`, namespace }, 'Recreate strategy: downtime accepted');
          recreateNoted = true;
        }
        // The ReplicaSet surge pods made now would join, looked up before they are created, as they
        // are named as its own pods (ADR 0019, amendment); evictions do not wait for it. Not found: the
        // surge pods stay surge pods, evicted-for as before ADR 0019 (the planner is told handover: false).
        const lookup =
          step.surge > 0 && current === undefined
            ? currentReplicaSet(ctx, d).then((rs) => {
                current = { revision, hash: rs?.hash, name: rs?.name };
              })
            : Promise.resolve();
        const surgeFor = () =>
          current?.hash !== undefined && current.revision === revision ? current.name : undefined;
        // Surge pods and evictions go out together, as the Deployment controller scales both
        // ReplicaSets in one sync.
        await Promise.all([
          lookup.then(() =>
            Promise.all(
              Array.from({ length: step.surge }, () =>
                createSurgePod(session, ctx, d, namespace, mine, surgeFor(), req.cutoffMs),
              ),
            ),
          ),
          ...(step.evict.length > 0 ? [evictor.evictNamedAndPace(step.evict, pods)] : []),
        ]);
        continue;
      }
      case 'handover': {
        // The old pods go: the pending reload must be in the ledger first (ADR 0008).
        await session.durable();
        const byName = new Map(pods.map((p) => [p.metadata?.name as string, p]));
        const outcomes = await Promise.all(
          step.pairs.map(async ({ surge: s, old: o }) => {
            const sp = byName.get(s) as V1Pod;
            const op = byName.get(o) as V1Pod;
            // The old pod is replaced here, not evicted: it takes its slot of the restart budget too.
            const used = await budgetSlot(ctx, namespace);
            const r = await handOver(ctx, namespace, sp, op, current?.hash as string).finally(used);
            if (r.outcome === 'handed') {
              mine.delete(s);
              handing.set(op.metadata?.uid as string, {
                name: o,
                surgeUid: sp.metadata?.uid as string,
                at: Date.now(),
              });
            }
            return r;
          }),
        );
        const refused = outcomes.find((r) => r.outcome === 'blocked');
        if (refused && refused.outcome === 'blocked') {
          // A PodDisruptionBudget allows no disruption now: back off as after a refused eviction.
          evictor.blocked(`handover refused: ${refused.why}`);
          if (refused.pdb) evictor.refused(true);
          blockedBackoffMs = Math.min(Math.max(blockedBackoffMs * 2, 1000), 16_000);
          await pause(blockedBackoffMs, ctx.signal);
        } else {
          blockedBackoffMs = 0;
          evictor.refused(false);
        }
        continue;
      }
      case 'wait': {
        if (step.reason !== 'before-cutoff') evictor.blocked(`waiting: ${step.reason}`);
        await evictor.next(step.reason === 'before-cutoff' ? step.retryAfterMs : undefined);
        continue;
      }
    }
  }
}
