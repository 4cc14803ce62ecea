// The handful of API calls the service makes besides watches, over raw HTTP (watch-http.ts). The
// method names and argument shapes are those of @kubernetes/client-node's typed APIs, so code and
// tests read the same either way and a client-node API object fits these interfaces; only the types
// are imported from it, which costs nothing at run time (see access.ts for why that matters).
// Answers are the API server's plain JSON: timestamps are strings, never Dates. Failures are
// KubeHttpError, with `code` like client-node's ApiException. Patches are JSON merge patches.
import type {
  CoreV1Event,
  V1ConfigMap,
  V1ConfigMapList,
  V1CronJob,
  V1Eviction,
  V1Job,
  V1JobList,
  V1Lease,
  V1Namespace,
  V1Pod,
  V1PodList,
  V1ReplicaSetList,
  V1Secret,
  V1SecretList,
} from '@kubernetes/client-node';
import type { ClusterAccess } from './access.ts';
import { requestJson } from './watch-http.ts';
import { listUrl } from './watch-logic.ts';

const TIMEOUT_MS = 30_000;

type Named = { name: string; namespace: string };
type InNamespace = { namespace: string };
type Selected = { labelSelector?: string; fieldSelector?: string; limit?: number; _continue?: string };

export interface CoreApi {
  readNamespacedSecret(a: Named): Promise<V1Secret>;
  listNamespacedSecret(a: InNamespace & Selected): Promise<V1SecretList>;
  readNamespacedConfigMap(a: Named): Promise<V1ConfigMap>;
  listNamespacedConfigMap(a: InNamespace & Selected): Promise<V1ConfigMapList>;
  /**
   * Writes take `{ signal }` as options (RequestOptions; `unknown` so that a client-node API, whose
   * options are another type, still fits): it ends the request, and the wait for its turn under the
   * write rate limit (access.ts, writeGatedAccess).
   */
  createNamespacedConfigMap(a: InNamespace & { body: V1ConfigMap }, options?: unknown): Promise<V1ConfigMap>;
  deleteNamespacedConfigMap(a: Named, options?: unknown): Promise<unknown>;
  createNamespacedSecret(a: InNamespace & { body: V1Secret }): Promise<V1Secret>;
  /** A JSON merge patch (whatever options a client-node caller would add). */
  patchNamespacedConfigMap(a: Named & { body: object }, options?: unknown): Promise<V1ConfigMap>;
  createNamespacedEvent(a: InNamespace & { body: CoreV1Event }): Promise<CoreV1Event>;
  readNamespacedPod(a: Named): Promise<V1Pod>;
  /** The start-up catch-up reads a namespace's creation (catch-up.ts); a namespaced install may not. */
  readNamespace(a: { name: string }): Promise<V1Namespace>;
  listNamespacedPod(a: InNamespace & Selected): Promise<V1PodList>;
  listPodForAllNamespaces(a: Selected): Promise<V1PodList>;
  deleteNamespacedPod(a: Named, options?: unknown): Promise<unknown>;
  createNamespacedPodEviction(a: Named & { body: V1Eviction }, options?: unknown): Promise<unknown>;
}

export interface AppsApi {
  listNamespacedReplicaSet(a: InNamespace & Selected): Promise<V1ReplicaSetList>;
  patchNamespacedDeployment(a: Named & { body: object }, options?: unknown): Promise<unknown>;
  patchNamespacedStatefulSet(a: Named & { body: object }, options?: unknown): Promise<unknown>;
  patchNamespacedDaemonSet(a: Named & { body: object }, options?: unknown): Promise<unknown>;
}

export interface BatchApi {
  patchNamespacedCronJob(a: Named & { body: object }, options?: unknown): Promise<unknown>;
  readNamespacedCronJob(a: Named): Promise<V1CronJob>;
  readNamespacedJob(a: Named): Promise<V1Job>;
  listNamespacedJob(a: InNamespace & Selected): Promise<V1JobList>;
  createNamespacedJob(a: InNamespace & { body: V1Job }): Promise<V1Job>;
  /** DeleteOptions as the body: propagationPolicy, preconditions. */
  deleteNamespacedJob(a: Named & { body?: object }): Promise<unknown>;
}

type Custom = { group: string; version: string; namespace: string; plural: string; name: string };

export interface CustomApi {
  getNamespacedCustomObject(a: Custom): Promise<object>;
  patchNamespacedCustomObject(a: Custom & { body: object }, options?: unknown): Promise<object>;
}

/** `signal` aborts the request (leader election bounds each one by its renew deadline). */
export type RequestOptions = { signal?: AbortSignal; [other: string]: unknown };

export interface CoordinationApi {
  readNamespacedLease(a: Named, options?: RequestOptions): Promise<V1Lease>;
  createNamespacedLease(a: InNamespace & { body: V1Lease }, options?: RequestOptions): Promise<V1Lease>;
  replaceNamespacedLease(a: Named & { body: V1Lease }, options?: RequestOptions): Promise<V1Lease>;
}

const seg = encodeURIComponent;

const NEVER = new AbortController().signal;

/** The caller's signal, when its options carry one (a client-node caller's options do not). */
function signalOf(options: unknown): AbortSignal {
  const s = (options as RequestOptions | undefined)?.signal;
  return s instanceof AbortSignal ? s : NEVER;
}

/** Sends one request, bounded by TIMEOUT_MS and by `signal` when given. */
function call<T>(
  access: ClusterAccess,
  method: 'GET' | 'POST' | 'DELETE' | 'PATCH' | 'PUT',
  path: string,
  body?: unknown,
  signal: AbortSignal = NEVER,
  verb?: string,
): Promise<T> {
  return requestJson(access, method, path, body, signal, TIMEOUT_MS, verb) as Promise<T>;
}

/**
 * A LIST, with the continue token also under `_continue`, the name client-node's V1ListMeta gives it
 * (its types are what callers read).
 */
async function list<T>(access: ClusterAccess, path: string, s: Selected): Promise<T> {
  const url = listUrl(path, s, s.limit ?? 0, s._continue);
  const page = await call<{ metadata?: { continue?: string; _continue?: string } }>(
    access,
    'GET',
    url,
    undefined,
    NEVER,
    'LIST',
  );
  if (page.metadata?.continue) page.metadata._continue = page.metadata.continue;
  return page as T;
}

const core = (ns: string, resource: string, name?: string) =>
  `/api/v1/namespaces/${seg(ns)}/${resource}${name !== undefined ? `/${seg(name)}` : ''}`;
const apps = (ns: string, resource: string, name?: string) =>
  `/apis/apps/v1/namespaces/${seg(ns)}/${resource}${name !== undefined ? `/${seg(name)}` : ''}`;

export function coreApi(access: ClusterAccess): CoreApi {
  return {
    readNamespacedSecret: (a) => call(access, 'GET', core(a.namespace, 'secrets', a.name)),
    listNamespacedSecret: (a) => list(access, core(a.namespace, 'secrets'), a),
    readNamespacedConfigMap: (a) => call(access, 'GET', core(a.namespace, 'configmaps', a.name)),
    listNamespacedConfigMap: (a) => list(access, core(a.namespace, 'configmaps'), a),
    createNamespacedConfigMap: (a, o) =>
      call(access, 'POST', core(a.namespace, 'configmaps'), a.body, signalOf(o)),
    patchNamespacedConfigMap: (a, o) =>
      call(access, 'PATCH', core(a.namespace, 'configmaps', a.name), a.body, signalOf(o)),
    deleteNamespacedConfigMap: (a, o) =>
      call(access, 'DELETE', core(a.namespace, 'configmaps', a.name), undefined, signalOf(o)),
    createNamespacedSecret: (a) => call(access, 'POST', core(a.namespace, 'secrets'), a.body),
    createNamespacedEvent: (a) => call(access, 'POST', core(a.namespace, 'events'), a.body),
    readNamespacedPod: (a) => call(access, 'GET', core(a.namespace, 'pods', a.name)),
    readNamespace: (a) => call(access, 'GET', `/api/v1/namespaces/${seg(a.name)}`),
    listNamespacedPod: (a) => list(access, core(a.namespace, 'pods'), a),
    listPodForAllNamespaces: (a) => list(access, '/api/v1/pods', a),
    deleteNamespacedPod: (a, o) =>
      call(access, 'DELETE', core(a.namespace, 'pods', a.name), undefined, signalOf(o)),
    createNamespacedPodEviction: (a, o) =>
      call(access, 'POST', `${core(a.namespace, 'pods', a.name)}/eviction`, a.body, signalOf(o)),
  };
}

export function appsApi(access: ClusterAccess): AppsApi {
  return {
    listNamespacedReplicaSet: (a) => list(access, apps(a.namespace, 'replicasets'), a),
    patchNamespacedDeployment: (a) => call(access, 'PATCH', apps(a.namespace, 'deployments', a.name), a.body),
    patchNamespacedStatefulSet: (a) =>
      call(access, 'PATCH', apps(a.namespace, 'statefulsets', a.name), a.body),
    patchNamespacedDaemonSet: (a) => call(access, 'PATCH', apps(a.namespace, 'daemonsets', a.name), a.body),
  };
}

const batch = (ns: string, resource: string, name?: string) =>
  `/apis/batch/v1/namespaces/${seg(ns)}/${resource}${name !== undefined ? `/${seg(name)}` : ''}`;

export function batchApi(access: ClusterAccess): BatchApi {
  return {
    patchNamespacedCronJob: (a) => call(access, 'PATCH', batch(a.namespace, 'cronjobs', a.name), a.body),
    readNamespacedCronJob: (a) => call(access, 'GET', batch(a.namespace, 'cronjobs', a.name)),
    readNamespacedJob: (a) => call(access, 'GET', batch(a.namespace, 'jobs', a.name)),
    listNamespacedJob: (a) => list(access, batch(a.namespace, 'jobs'), a),
    createNamespacedJob: (a) => call(access, 'POST', batch(a.namespace, 'jobs'), a.body),
    deleteNamespacedJob: (a) => call(access, 'DELETE', batch(a.namespace, 'jobs', a.name), a.body),
  };
}

const custom = (a: Custom) =>
  `/apis/${seg(a.group)}/${seg(a.version)}/namespaces/${seg(a.namespace)}/${seg(a.plural)}/${seg(a.name)}`;

export function customApi(access: ClusterAccess): CustomApi {
  return {
    getNamespacedCustomObject: (a) => call(access, 'GET', custom(a)),
    patchNamespacedCustomObject: (a) => call(access, 'PATCH', custom(a), a.body),
  };
}

const lease = (ns: string, name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${seg(ns)}/leases${name !== undefined ? `/${seg(name)}` : ''}`;

/** What hub mode's replica roster (service/hub/shares.ts) does with Leases, besides what election does. */
export interface LeaseRosterApi extends CoordinationApi {
  listNamespacedLease(a: InNamespace & { labelSelector: string }): Promise<{ items: V1Lease[] }>;
  deleteNamespacedLease(a: Named): Promise<unknown>;
}

export function leaseRosterApi(access: ClusterAccess): LeaseRosterApi {
  return {
    ...coordinationApi(access),
    listNamespacedLease: (a) =>
      call(access, 'GET', `${lease(a.namespace)}?labelSelector=${seg(a.labelSelector)}`),
    deleteNamespacedLease: (a) => call(access, 'DELETE', lease(a.namespace, a.name)),
  };
}

export function coordinationApi(access: ClusterAccess): CoordinationApi {
  return {
    readNamespacedLease: (a, o) => call(access, 'GET', lease(a.namespace, a.name), undefined, o?.signal),
    createNamespacedLease: (a, o) => call(access, 'POST', lease(a.namespace), a.body, o?.signal),
    replaceNamespacedLease: (a, o) => call(access, 'PUT', lease(a.namespace, a.name), a.body, o?.signal),
  };
}
