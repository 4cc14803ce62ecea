// Surge pods no reload needs: left by a crash, or by a reload that was dropped (its workload opted out
// or became invalid). The leader deletes them at start, every --surge-sweep-interval, and when it drops
// a reload. A Deployment with a pending reload keeps its surge pods: the reload is resumed, and its
// strategy reuses and then removes them.
import type { CoreApi } from '../kube/api.ts';
import type { Logger } from '../log.ts';
import { SURGE_LABEL } from './restart-deployment.ts';

export interface SurgeSweepDeps {
  core: CoreApi;
  /** Watched namespaces; empty: all. */
  namespaces: readonly string[];
  inScope(namespace: string): boolean;
  /** Uids of Deployments with a pending or running reload, read after the LIST (see sweepSurgePods). */
  pendingOwners(): Set<string>;
  signal: AbortSignal;
  log: Logger;
}

const notFoundIsFine = (err: { code?: number }) => {
  if (err.code !== 404) throw err;
};

/** Deletes every surge pod whose Deployment has no pending reload. */
export async function sweepSurgePods(d: SurgeSweepDeps): Promise<void> {
  const lists =
    d.namespaces.length > 0
      ? d.namespaces.map((namespace) => d.core.listNamespacedPod({ namespace, labelSelector: SURGE_LABEL }))
      : [d.core.listPodForAllNamespaces({ labelSelector: SURGE_LABEL })];
  let found: Awaited<(typeof lists)[number]>[];
  try {
    found = await Promise.all(lists);
  } catch (err) {
    // Without the restart strategy's RBAC (rbac.restart=false) there are no surge pods of ours, and no
    // right to list pods: skip the step instead of failing the start.
    if ((err as { code?: number }).code !== 403) throw err;
    d.log.info(
      { err: (err as Error).message.slice(0, 300) },
      'not allowed to list pods; surge-pod clean-up skipped (the restart strategy is not granted)',
    );
    return;
  }
  // Judged after the LIST: a reload that begins meanwhile is running in this process by the time it
  // creates a surge pod (possibly before its pending write lands, ADR 0008's amendment), and the
  // owners of running reloads count as pending, so a pod in the list whose reload runs is kept.
  const pending = d.pendingOwners();
  for (const list of found) {
    for (const pod of list.items) {
      const owner = pod.metadata?.labels?.[SURGE_LABEL];
      const namespace = pod.metadata?.namespace as string;
      if (!owner || pending.has(owner) || !d.inScope(namespace)) continue;
      if (d.signal.aborted) return;
      const name = pod.metadata?.name as string;
      await d.core.deleteNamespacedPod({ name, namespace }).catch(notFoundIsFine);
      d.log.info({ pod: name, namespace }, 'deleted a surge pod no reload needs');
    }
  }
}

/** Deletes the surge pods of one Deployment (its reload was dropped). */
export async function deleteSurgePodsOf(
  core: CoreApi,
  namespace: string,
  deploymentUid: string,
  signal: AbortSignal,
  log: Logger,
  fields: Record<string, unknown>,
): Promise<void> {
  const pods = await core.listNamespacedPod({ namespace, labelSelector: `${SURGE_LABEL}=${deploymentUid}` });
  for (const pod of pods.items) {
    if (signal.aborted) return;
    const name = pod.metadata?.name as string;
    await core.deleteNamespacedPod({ name, namespace }).catch(notFoundIsFine);
    log.info({ ...fields, pod: name }, 'deleted the surge pod of a dropped reload');
  }
}
