// The API resources gitops-reloader reads: their group, version and plural, and the collection
// path to LIST or WATCH them (in one namespace, or in all).
import type { ConfigKind, WorkloadKind } from '../core/types.ts';
import type { ClusterAccess } from './access.ts';
import { getJson } from './watch-http.ts';

export interface Resource<K extends string> {
  kind: K;
  /** '' for the core group. */
  group: string;
  version: string;
  plural: string;
}

export const CONFIG_RESOURCES: readonly Resource<Exclude<ConfigKind, 'SecretProviderClass'>>[] = [
  { kind: 'ConfigMap', group: '', version: 'v1', plural: 'configmaps' },
  { kind: 'Secret', group: '', version: 'v1', plural: 'secrets' },
];

export const WORKLOAD_RESOURCES: readonly Resource<WorkloadKind>[] = [
  { kind: 'Deployment', group: 'apps', version: 'v1', plural: 'deployments' },
  { kind: 'StatefulSet', group: 'apps', version: 'v1', plural: 'statefulsets' },
  { kind: 'DaemonSet', group: 'apps', version: 'v1', plural: 'daemonsets' },
  { kind: 'CronJob', group: 'batch', version: 'v1', plural: 'cronjobs' },
  { kind: 'Job', group: 'batch', version: 'v1', plural: 'jobs' },
  { kind: 'Rollout', group: 'argoproj.io', version: 'v1alpha1', plural: 'rollouts' },
];

export function collectionPath(r: Resource<string>, namespace?: string): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  return namespace ? `${base}/namespaces/${namespace}/${r.plural}` : `${base}/${r.plural}`;
}

/** True when the API server serves this resource (Argo Rollouts or the CSI driver may not be installed). */
export async function served(kc: ClusterAccess, r: Resource<string>): Promise<boolean> {
  try {
    const list = (await getJson(
      kc,
      `/apis/${r.group}/${r.version}`,
      new AbortController().signal,
      10_000,
    )) as {
      resources?: Array<{ name: string }>;
    };
    return Boolean(list.resources?.some((x) => x.name === r.plural));
  } catch {
    return false;
  }
}
