// A ServiceAccount for gitops-reloader that may do everything the service needs in one namespace,
// but nothing else: in particular it cannot read Argo CD Applications, as when Argo CD runs in
// another cluster. Returns a KubeConfig that authenticates as it.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Kube } from './kube.ts';
import { serviceAccountWithRole, writeKubeConfig } from './service-account.ts';

export async function restrictedKubeConfig(kube: Kube, namespace: string): Promise<KubeConfig> {
  return serviceAccountWithRole(kube, namespace, 'gitops-reloader', [
    {
      apiGroups: ['', 'apps', 'batch', 'policy', 'events.k8s.io', 'coordination.k8s.io'],
      resources: ['*'],
      verbs: ['*'],
    },
    { apiGroups: ['argoproj.io'], resources: ['rollouts', 'rollouts/status'], verbs: ['*'] },
  ]);
}

/** The same, written to `<dir>/kubeconfig` for a service run as a child process. */
export async function restrictedKubeConfigFile(kube: Kube, namespace: string, dir: string): Promise<string> {
  return writeKubeConfig(await restrictedKubeConfig(kube, namespace), dir);
}
