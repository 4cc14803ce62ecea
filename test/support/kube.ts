// Test access to the shared control plane: the admin kubeconfig from global setup, API clients,
// and a fresh namespace per test so suites can run in parallel on one cluster.
import {
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PolicyV1Api,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { test as base, inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    kubeconfig: string;
  }
}

export function adminKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(inject('kubeconfig'));
  return kc;
}

export interface Kube {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  batch: BatchV1Api;
  policy: PolicyV1Api;
  rbac: RbacAuthorizationV1Api;
  custom: CustomObjectsApi;
}

export function clients(kc: KubeConfig): Kube {
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    batch: kc.makeApiClient(BatchV1Api),
    policy: kc.makeApiClient(PolicyV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
}

/** HTTP status of a failed client-node call (ApiException.code), or undefined for other errors. */
export { statusOf } from './status.ts';

/** `it` with two fixtures: `kube` (admin clients) and `namespace` (created for the test, deleted after). */
export const it = base.extend<{ kube: Kube; namespace: string }>({
  // biome-ignore lint/correctness/noEmptyPattern: vitest fixtures take their dependencies by destructuring
  kube: async ({}, use) => {
    await use(clients(adminKubeConfig()));
  },
  namespace: async ({ kube, task }, use) => {
    const prefix = `t-${task.name
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .slice(0, 40)}`.replace(/-+$/, '');
    const ns = await kube.core.createNamespace({ body: { metadata: { generateName: `${prefix}-` } } });
    const name = ns.metadata?.name;
    if (!name) throw new Error('the API server returned a namespace without a name');
    await use(name);
    await kube.core.deleteNamespace({ name });
  },
});
