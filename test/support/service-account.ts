// Credentials of a ServiceAccount, for tests that act as the service does (its RBAC, its admission
// policy): a one-hour token on the admin's cluster, as a KubeConfig or written to a file.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig, type V1PolicyRule } from '@kubernetes/client-node';
import type { Kube } from './kube.ts';

/** A KubeConfig that authenticates as `serviceAccount` (in `namespace`, also its default namespace). */
export async function kubeConfigAs(
  kube: Kube,
  namespace: string,
  serviceAccount: string,
): Promise<KubeConfig> {
  const tr = await kube.core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  const cluster = kube.kc.getCurrentCluster();
  if (!cluster || !tr.status?.token) throw new Error('no cluster in the admin kubeconfig, or no token');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name: serviceAccount, token: tr.status.token }],
    contexts: [{ name: serviceAccount, cluster: cluster.name, user: serviceAccount, namespace }],
    currentContext: serviceAccount,
  });
  return kc;
}

/** Writes `kc` to `<dir>/kubeconfig` (mode 0600), for a service run as a child process; returns the path. */
export async function writeKubeConfig(kc: KubeConfig, dir: string): Promise<string> {
  const file = path.join(dir, 'kubeconfig');
  await writeFile(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}

/** A ServiceAccount bound to a Role of `rules` in `namespace` only; a KubeConfig that authenticates as it. */
export async function serviceAccountWithRole(
  kube: Kube,
  namespace: string,
  name: string,
  rules: V1PolicyRule[],
): Promise<KubeConfig> {
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await kube.rbac.createNamespacedRole({ namespace, body: { metadata: { name }, rules } });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  return kubeConfigAs(kube, namespace, name);
}
