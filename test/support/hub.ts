// Hub mode without spokes: "many cluster Secrets, one API server" (issue 25). Each served cluster is
// the main control plane seen through its own ApiProxy (a distinct server URL, its own CA, and a link
// the test can cut), scoped by the Secret's `namespaces` to namespaces no other cluster Secret names.
// The cluster Secrets live in the test's namespace, which the release is told is Argo CD's
// (--argocd-namespaces), so the real Argo CD never sees them.
import { CoordinationV1Api } from '@kubernetes/client-node';
import { canonicalServerURL } from '../../service/core/repo-url.ts';
import { clusterId, HUB_SERVE_LABEL } from '../../service/hub/cluster-secret.ts';
import { replicaOf } from '../../service/hub/seat.ts';
import { ApiProxy } from './api-proxy.ts';
import type { Kube } from './kube.ts';
import { type PodView, waitReadyPods } from './observe.ts';
import { FAST_LEASE, installRelease, type Release } from './replicas.ts';
import { configMap, deployment } from './workloads.ts';

export interface ProxiedCluster {
  /** Its name in the cluster Secret (log field `cluster`). */
  name: string;
  proxy: ApiProxy;
  /** The namespace it is scoped to (in the main plane). */
  namespace: string;
  /** Its id in the hub (the Lease `<release>-<id>-leader`). */
  id: string;
  secret: string;
}

/** A ServiceAccount with cluster-admin (as `argocd cluster add` grants) and a one-hour token. */
export async function adminToken(kube: Kube, namespace: string, name = 'hub-manager'): Promise<string> {
  await kube.core
    .createNamespacedServiceAccount({ namespace, body: { metadata: { name } } })
    .catch(() => undefined);
  await kube.rbac
    .createClusterRoleBinding({
      body: {
        metadata: { name: `${namespace}-${name}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name, namespace }],
      },
    })
    .catch(() => undefined);
  const tr = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  if (!tr.status?.token) throw new Error('no token');
  return tr.status.token;
}

export async function removeAdminToken(kube: Kube, namespace: string, name = 'hub-manager'): Promise<void> {
  await kube.rbac.deleteClusterRoleBinding({ name: `${namespace}-${name}` }).catch(() => undefined);
}

/** The cluster Secret Argo CD would hold for a cluster (bearer token, CA), opted in to hub mode. */
export async function clusterSecret(
  kube: Kube,
  o: { namespace: string; name: string; server: string; caData: string; token: string; scope: string[] },
): Promise<string> {
  const secret = `cluster-${o.name}`;
  await kube.core.createNamespacedSecret({
    namespace: o.namespace,
    body: {
      metadata: {
        name: secret,
        labels: { 'argocd.argoproj.io/secret-type': 'cluster', [HUB_SERVE_LABEL]: 'true' },
      },
      stringData: {
        name: o.name,
        server: o.server,
        namespaces: o.scope.join(','),
        config: JSON.stringify({
          bearerToken: o.token,
          tlsClientConfig: { insecure: false, caData: o.caData },
        }),
      },
    },
  });
  return secret;
}

/** `n` clusters, each the main plane through its own proxy, scoped to its own new namespace. */
export async function proxiedClusters(
  kube: Kube,
  namespace: string,
  n: number,
  /** The bearer token of each cluster Secret (one for all, or one per cluster index). */
  token: string | ((i: number) => string),
  onTestFinished: (f: () => Promise<void>) => void,
): Promise<ProxiedCluster[]> {
  const out: ProxiedCluster[] = [];
  for (let i = 0; i < n; i++) {
    const name = `c${i}`;
    const ns = `${namespace}-${name}`.slice(0, 63);
    await kube.core.createNamespace({ body: { metadata: { name: ns } } });
    onTestFinished(async () => {
      await kube.core.deleteNamespace({ name: ns }).catch(() => undefined);
    });
    const proxy = await ApiProxy.start(kube.kc);
    onTestFinished(() => proxy.close());
    const caData = await proxy.caData();
    const secret = await clusterSecret(kube, {
      namespace,
      name,
      server: proxy.url,
      caData,
      token: typeof token === 'string' ? token : token(i),
      scope: [ns],
    });
    out.push({
      name,
      proxy,
      namespace: ns,
      secret,
      id: clusterId(canonicalServerURL(proxy.url) ?? proxy.url),
    });
  }
  return out;
}

/** The chart with hub values, its cluster Secrets (and "Argo CD's namespace") being `namespace`. */
export function hubRelease(namespace: string, set: string[] = []): Promise<Release> {
  return installRelease(namespace, {
    watch: [],
    set: ['argocd.enabled=true', `argocd.namespaces={${namespace}}`, 'hub.enabled=true', ...set],
    extraArgs: FAST_LEASE,
  });
}

/** Who holds each served cluster's Lease now: cluster id → the holder's replica identity ('' when free). */
export async function clusterLeaseHolders(kube: Kube, release: Release): Promise<Map<string, string>> {
  const leases = await kube.kc
    .makeApiClient(CoordinationV1Api)
    .listNamespacedLease({ namespace: release.namespace });
  const out = new Map<string, string>();
  const prefix = `${release.fullname}-`;
  for (const l of leases.items) {
    const name = l.metadata?.name ?? '';
    if (!name.startsWith(prefix) || !name.endsWith('-leader') || name === `${release.fullname}-leader`)
      continue;
    // A seat elects as `<replica>/<cluster id>`.
    out.set(name.slice(prefix.length, -'-leader'.length), replicaOf(l.spec?.holderIdentity ?? ''));
  }
  return out;
}

/** A ConfigMap `settings` and a Deployment `web` (opted in, `pods` replicas) that reads it, Ready. */
export async function settingsAndWeb(kube: Kube, namespace: string, pods: number): Promise<PodView[]> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('settings', { v: '1' }) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      replicas: pods,
      annotations: { 'reloader.stakater.com/auto': 'true' },
      container: { envFrom: [{ configMapRef: { name: 'settings' } }] },
    }),
  });
  return waitReadyPods(kube, namespace, 'web', pods);
}

/** Changes `settings` in `namespace` (a person's edit). */
export async function changeSettings(kube: Kube, namespace: string, v: string): Promise<void> {
  await kube.core.replaceNamespacedConfigMap({
    name: 'settings',
    namespace,
    body: configMap('settings', { v }),
  });
}
