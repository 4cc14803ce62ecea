// Surge pods no reload needs: left by a crash, or by a reload that was dropped (its workload opted out
// or became invalid, or its namespace left the service's scope). The leader deletes them at start,
// every --surge-sweep-interval, and when it drops a reload; in --dry-run it only reports them. A
// Deployment with a pending reload in scope keeps its surge pods: the reload is resumed, and its
// strategy reuses and then removes them.
import type { CoreApi } from '../kube/api.ts';
import type { Logger } from '../log.ts';
import { SURGE_LABEL } from './restart-deployment.ts';

export interface SurgeSweepDeps {
  core: CoreApi;
  /** Watched namespaces; empty: all. */
  namespaces: readonly string[];
  /**
   * Namespaces outside `namespaces` where this release may have left surge pods: those of the
   * workloads in its ledger (the namespace list changed since they were reloaded).
   */
  formerNamespaces: readonly string[];
  inScope(namespace: string): boolean;
  /**
   * Is the Deployment `namespace/name` one this release reloads or reloaded (it is in the ledger)?
   * Out of scope, only those Deployments' surge pods are ours: another release may reload the rest.
   */
  reloaded(namespace: string, name: string): boolean;
  /** Uids of in-scope Deployments with a pending or running reload, read after the LIST (see sweepSurgePods). */
  pendingOwners(): Set<string>;
  /** Report what would be deleted; delete nothing. */
  dryRun: boolean;
  /** Told of every surge pod deleted (or, in a dry run, that would be). */
  onSwept?(): void;
  signal: AbortSignal;
  log: Logger;
}

const notFoundIsFine = (err: { code?: number }) => {
  if (err.code !== 404) throw err;
};

type Pod = Awaited<ReturnType<CoreApi['listPodForAllNamespaces']>>['items'][number];

/** The namespaces of the Deployments among ledger ids (`Kind/namespace/name`): where surge pods of ours can be. */
export function surgeNamespacesOf(ledgerIds: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const id of ledgerIds) {
    const [kind, namespace] = id.split('/');
    if (kind === 'Deployment' && namespace) out.add(namespace);
  }
  return [...out].sort();
}

/** Is this surge pod one the sweep may remove: ours, and needed by no reload? */
export function sweepable(
  pod: { namespace: string; owner: string | undefined; ownerName: string | undefined },
  d: Pick<SurgeSweepDeps, 'inScope' | 'reloaded'>,
  pending: ReadonlySet<string>,
): boolean {
  if (!pod.owner || pending.has(pod.owner)) return false;
  if (d.inScope(pod.namespace)) return true;
  // Out of scope (the namespace left it): ours only if we reloaded its Deployment.
  return pod.ownerName !== undefined && d.reloaded(pod.namespace, pod.ownerName);
}

/** The surge pods in the namespaces to look at; a namespace we may not list is reported and skipped. */
async function listSurgePods(d: SurgeSweepDeps): Promise<Pod[]> {
  const forbidden = (namespace: string | undefined) => (err: unknown) => {
    // Without the restart strategy's RBAC (rbac.restart=false) there are no surge pods of ours, and no
    // right to list pods; a namespace that left reload.namespaces lost its Role with it.
    if ((err as { code?: number }).code !== 403) throw err;
    d.log.info(
      { namespace, err: (err as Error).message.slice(0, 300) },
      namespace && !d.namespaces.includes(namespace)
        ? 'not allowed to list pods in a namespace that left the scope; its surge pods, if any, stay (kubectl delete pod -l gitops-reloader.io/surge)'
        : 'not allowed to list pods; surge-pod clean-up skipped (the restart strategy is not granted)',
    );
    return { items: [] as Pod[] };
  };
  if (d.namespaces.length === 0) {
    return (await d.core.listPodForAllNamespaces({ labelSelector: SURGE_LABEL }).catch(forbidden(undefined)))
      .items;
  }
  const all = [...new Set([...d.namespaces, ...d.formerNamespaces])];
  const lists = await Promise.all(
    all.map((namespace) =>
      d.core.listNamespacedPod({ namespace, labelSelector: SURGE_LABEL }).catch(forbidden(namespace)),
    ),
  );
  return lists.flatMap((l) => l.items);
}

/** Deletes (in a dry run: reports) every surge pod of ours whose Deployment has no pending reload. */
export async function sweepSurgePods(d: SurgeSweepDeps): Promise<void> {
  const found = await listSurgePods(d);
  // Judged after the LIST: a reload that begins meanwhile is running in this process by the time it
  // creates a surge pod (possibly before its pending write lands, ADR 0008's amendment), and the
  // owners of running reloads count as pending, so a pod in the list whose reload runs is kept.
  const pending = d.pendingOwners();
  for (const pod of found) {
    const namespace = pod.metadata?.namespace as string;
    const owner = pod.metadata?.labels?.[SURGE_LABEL];
    const ownerName = pod.metadata?.ownerReferences?.find(
      (o) => o.kind === 'Deployment' && o.uid === owner,
    )?.name;
    if (!sweepable({ namespace, owner, ownerName }, d, pending)) continue;
    if (d.signal.aborted) return;
    const name = pod.metadata?.name as string;
    const fields = { pod: name, namespace, inScope: d.inScope(namespace) };
    if (d.dryRun) {
      d.log.info(fields, 'would delete a surge pod no reload needs (dry run)');
    } else {
      await d.core.deleteNamespacedPod({ name, namespace }).catch(notFoundIsFine);
      d.log.info(fields, 'deleted a surge pod no reload needs');
    }
    d.onSwept?.();
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
