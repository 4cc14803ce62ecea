// One workload object exactly as it was at a past resourceVersion: a LIST with resourceVersionMatch
// Exact, which the API server answers from that revision of its store (410 once etcd compacted it,
// five minutes by default).
import type { WorkloadRef } from '../core/types.ts';
import type { ClusterAccess } from './access.ts';
import { collectionPath, WORKLOAD_RESOURCES } from './resources.ts';
import { getJson } from './watch-http.ts';
import type { RawObject } from './watch-logic.ts';

/** The workload at `resourceVersion`, or undefined when it did not exist then. Throws on 410 and other errors. */
export async function readWorkloadAt(
  kc: ClusterAccess,
  ref: WorkloadRef & { uid: string },
  resourceVersion: string,
  signal: AbortSignal,
): Promise<RawObject | undefined> {
  const resource = WORKLOAD_RESOURCES.find((r) => r.kind === ref.kind);
  if (!resource) throw new Error(`no resource for kind ${ref.kind}`);
  const q = new URLSearchParams({
    fieldSelector: `metadata.name=${ref.name}`,
    resourceVersion,
    resourceVersionMatch: 'Exact',
  });
  const list = (await getJson(kc, `${collectionPath(resource, ref.namespace)}?${q}`, signal, 10_000)) as {
    items?: RawObject[];
  };
  return list.items?.find((o) => o.metadata?.uid === ref.uid);
}
