// Proves the test control plane is a real one: controllers reconcile, the Eviction API and
// PodDisruptionBudgets are enforced, and RBAC denies what a Role does not grant.
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { it, type Kube, statusOf } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { deployment, isReady } from '../support/workloads.ts';

async function readyPods(kube: Kube, namespace: string, app: string): Promise<V1Pod[]> {
  const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
  return pods.items.filter(isReady);
}

async function waitReady(kube: Kube, namespace: string, app: string, count: number): Promise<V1Pod[]> {
  return waitFor(
    async () => {
      const ready = await readyPods(kube, namespace, app);
      return ready.length === count
        ? ready
        : pending(`${ready.length} Ready: ${ready.map((p) => p.metadata?.name)}`);
    },
    { describe: `${count} Ready pods of ${namespace}/${app}`, timeout: 60_000 },
  );
}

describe('the test control plane', () => {
  it('runs a Deployment with 3 replicas to 3 Ready pods', async ({ kube, namespace }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 3 }) });
    const pods = await waitReady(kube, namespace, 'web', 3);
    expect(new Set(pods.map((p) => p.spec?.nodeName)).size).toBeGreaterThanOrEqual(1);
    expect(pods.every((p) => p.status?.phase === 'Running')).toBe(true);
    // The deployment controller sees them too (its status lags the pods a little).
    const d = await waitFor(
      async () => {
        const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
        return d.status?.readyReplicas === 3 ? d : pending(d.status);
      },
      { describe: 'deployment web to report 3 ready replicas' },
    );
    expect(d.status?.availableReplicas).toBe(3);
  });

  it('replaces a pod evicted through the Eviction API with a new Ready one', async ({ kube, namespace }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 3 }) });
    const before = await waitReady(kube, namespace, 'web', 3);
    const victim = before[0]?.metadata?.name as string;
    await kube.core.createNamespacedPodEviction({
      name: victim,
      namespace,
      body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: victim, namespace } },
    });
    const after = await waitFor(
      async () => {
        const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
        const names = pods.items.map((p) => p.metadata?.name);
        const ready = pods.items.filter(isReady);
        return !names.includes(victim) && ready.length === 3 ? ready : pending(names);
      },
      { describe: `${victim} gone and 3 Ready pods again`, timeout: 60_000 },
    );
    const beforeNames = before.map((p) => p.metadata?.name);
    const fresh = after.filter((p) => !beforeNames.includes(p.metadata?.name));
    expect(fresh).toHaveLength(1);
  });

  it('refuses an eviction with 429 when a PodDisruptionBudget forbids it', async ({ kube, namespace }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 3 }) });
    await kube.policy.createNamespacedPodDisruptionBudget({
      namespace,
      body: {
        metadata: { name: 'web' },
        spec: { minAvailable: 3, selector: { matchLabels: { app: 'web' } } },
      },
    });
    const pods = await waitReady(kube, namespace, 'web', 3);
    // The disruption controller must have computed the budget before the eviction is judged by it.
    await waitFor(
      async () => {
        const pdb = await kube.policy.readNamespacedPodDisruptionBudget({ name: 'web', namespace });
        return pdb.status?.currentHealthy === 3 && pdb.status.observedGeneration === pdb.metadata?.generation
          ? pdb
          : pending(pdb.status);
      },
      { describe: 'the PDB to count 3 healthy pods' },
    );
    const victim = pods[0]?.metadata?.name as string;
    const err = await kube.core
      .createNamespacedPodEviction({
        name: victim,
        namespace,
        body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: victim, namespace } },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(statusOf(err)).toBe(429);
    const still = await kube.core.readNamespacedPod({ name: victim, namespace });
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('enforces RBAC: a ServiceAccount that may only list pods gets 403 deleting one', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'lister' } } });
    await kube.rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name: 'pod-lister' },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
      },
    });
    await kube.rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'pod-lister' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-lister' },
        subjects: [{ kind: 'ServiceAccount', name: 'lister', namespace }],
      },
    });
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 1 }) });
    const [pod] = await waitReady(kube, namespace, 'web', 1);
    const token = await kube.core.createNamespacedServiceAccountToken({
      name: 'lister',
      namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });

    const admin = kube.kc.getCurrentCluster();
    if (!admin) throw new Error('admin kubeconfig has no cluster');
    const asLister = new KubeConfig();
    asLister.loadFromOptions({
      clusters: [admin],
      users: [{ name: 'lister', token: token.status?.token }],
      contexts: [{ name: 'lister', cluster: admin.name, user: 'lister' }],
      currentContext: 'lister',
    });
    const core = asLister.makeApiClient(CoreV1Api);

    // The token is valid (list works), so the 403 below is authorization, not authentication.
    const listed = await core.listNamespacedPod({ namespace });
    expect(listed.items.map((p) => p.metadata?.name)).toContain(pod?.metadata?.name);
    const err = await core.deleteNamespacedPod({ name: pod?.metadata?.name as string, namespace }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(statusOf(err)).toBe(403);
  });
});
