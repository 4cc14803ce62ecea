// A ServiceAccount for gitops-reloader that may do everything the service needs in one namespace,
// but nothing else: in particular it cannot read Argo CD Applications, as when Argo CD runs in
// another cluster. Returns a KubeConfig that authenticates as it.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Kube } from './kube.ts';

export async function restrictedKubeConfig(kube: Kube, namespace: string): Promise<KubeConfig> {
  const name = 'gitops-reloader';
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await kube.rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name },
      rules: [
        {
          apiGroups: ['', 'apps', 'batch', 'policy', 'events.k8s.io', 'coordination.k8s.io'],
          resources: ['*'],
          verbs: ['*'],
        },
        { apiGroups: ['argoproj.io'], resources: ['rollouts', 'rollouts/status'], verbs: ['*'] },
      ],
    },
  });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const tr = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { expirationSeconds: 3600, audiences: [] } },
  });
  const cluster = kube.kc.getCurrentCluster();
  if (!cluster || !tr.status?.token) throw new Error('no cluster or token');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: tr.status.token }],
    contexts: [{ name, cluster: cluster.name, user: name, namespace }],
    currentContext: name,
  });
  return kc;
}

/** The same, written to `<dir>/kubeconfig` for a service run as a child process. */
export async function restrictedKubeConfigFile(kube: Kube, namespace: string, dir: string): Promise<string> {
  const file = path.join(dir, 'kubeconfig');
  await writeFile(file, (await restrictedKubeConfig(kube, namespace)).exportConfig(), { mode: 0o600 });
  return file;
}
