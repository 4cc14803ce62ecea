// The smallest opted-in workload many tests start from: ConfigMap `app` (k=1) read by Deployment `web`
// (reloader.stakater.com/auto) through envFrom, the write that changes it, and the one step that makes a
// pod newer than a change.
import { expect } from 'vitest';
import type { Kube } from './kube.ts';
import { type PodView, waitReadyPods } from './observe.ts';
import { configMap, deployment } from './workloads.ts';

/** Deployment `web`: opted in (reloader.stakater.com/auto), reading all of `app` through envFrom. */
export const webDeployment = (replicas = 1) =>
  deployment('web', {
    replicas,
    annotations: { 'reloader.stakater.com/auto': 'true' },
    container: { envFrom: [{ configMapRef: { name: 'app' } }] },
  });

/** Creates `app` and `web`; resolves with web's Ready pods. */
export async function webApp(kube: Kube, namespace: string, replicas = 1): Promise<PodView[]> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.apps.createNamespacedDeployment({ namespace, body: webDeployment(replicas) });
  return waitReadyPods(kube, namespace, 'web', replicas);
}

/** Writes `app` with k; resolves with the object as written (its resourceVersion, managedFields). */
export const setApp = (kube: Kube, namespace: string, k: string) =>
  kube.core.replaceNamespacedConfigMap({ name: 'app', namespace, body: configMap('app', { k }) });

/** Scales web up by one from `before`; resolves with all its Ready pods and the one new pod. */
export async function scaleUpOne(
  kube: Kube,
  namespace: string,
  before: readonly PodView[],
): Promise<{ scaled: PodView[]; added: PodView }> {
  const replicas = before.length + 1;
  await kube.apps.patchNamespacedDeployment({
    name: 'web',
    namespace,
    body: [{ op: 'replace', path: '/spec/replicas', value: replicas }],
  });
  const scaled = await waitReadyPods(kube, namespace, 'web', replicas);
  const newer = scaled.filter((p) => !before.some((q) => q.uid === p.uid));
  expect(newer).toHaveLength(1);
  return { scaled, added: newer[0] as PodView };
}
