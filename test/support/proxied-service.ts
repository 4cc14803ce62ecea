// The service's arguments for a process that reaches the API server only through an ApiProxy: a
// ServiceAccount with the service's rights in the test namespace, a kubeconfig pointing at the proxy.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ApiProxy } from './api-proxy.ts';
import type { Kube } from './kube.ts';
import { hashKeyFile, serviceArgs } from './service.ts';
import { serviceAccountWithRole, writeKubeConfig } from './service-account.ts';

export async function proxiedServiceArgs(
  kube: Kube,
  namespace: string,
  proxy: ApiProxy,
  extra: string[],
): Promise<string[]> {
  const direct = await serviceAccountWithRole(kube, namespace, 'gitops-reloader', [
    {
      apiGroups: ['', 'apps', 'batch', 'policy', 'coordination.k8s.io', 'events.k8s.io'],
      resources: ['*'],
      verbs: ['*'],
    },
    { apiGroups: ['argoproj.io'], resources: ['rollouts', 'rollouts/status'], verbs: ['*'] },
  ]);
  const kc = await proxy.kubeConfigFor(direct);
  const file = await writeKubeConfig(kc, await mkdtemp(path.join(tmpdir(), 'gr-proxied-')));
  return serviceArgs(namespace, await hashKeyFile(), extra).map((a) =>
    a.startsWith('--kubeconfig=') ? `--kubeconfig=${file}` : a,
  );
}
