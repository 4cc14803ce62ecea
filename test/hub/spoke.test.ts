// The foundation of hub mode's test environment: the real Argo CD deploys to a spoke, a second
// control plane of test/cluster registered as a cluster Secret. An Application whose
// `spec.destination.name` is the spoke syncs a ConfigMap and a Deployment into a namespace of the
// spoke; its pods run on the spoke's kwok nodes, and nothing of it lands in the hub (main) plane.
import { expect } from 'vitest';
import { ArgoApp, GitRepo, type Manifest, toFiles } from '../support/argocd.ts';
import { it, statusOf } from '../support/kube.ts';
import { spoke } from '../support/spokes.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment, isReady } from '../support/workloads.ts';

const SPOKE = 'hub-b';
const REPLICAS = 2;

it('an Application with destination.name of a spoke deploys into the spoke and not into the hub', {
  timeout: 300_000,
}, async ({ kube, namespace, onTestFinished }) => {
  const b = await spoke(SPOKE);
  console.log(`[spoke ${SPOKE}] ${b.startSeconds ? `started in ${b.startSeconds.toFixed(1)}s` : 'reused'}`);
  // The same namespace name in the spoke: the hub's (from the fixture) must stay empty.
  await b.kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  onTestFinished(async () => {
    await b.kube.core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  const data = { greeting: `hello from the hub to ${SPOKE}` };
  const manifests = [
    configMap('spoke-config', data),
    deployment('spoke-web', {
      replicas: REPLICAS,
      container: { envFrom: [{ configMapRef: { name: 'spoke-config' } }] },
    }),
  ] as unknown as Manifest[];
  const repo = await GitRepo.create(namespace, toFiles(manifests));
  const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace, cluster: b.name });
  onTestFinished(() => app.delete());

  const synced = await app.waitSynced(await repo.head(), 180_000);
  expect(synced.spec.destination).toEqual({ name: SPOKE, namespace });
  expect(synced.status?.resources?.map((r) => `${r.kind}/${r.namespace}/${r.name}`).sort()).toEqual([
    `ConfigMap/${namespace}/spoke-config`,
    `Deployment/${namespace}/spoke-web`,
  ]);

  const nodes = new Set(
    (await b.kube.core.listNode()).items
      .filter((n) => n.metadata?.annotations?.['kwok.x-k8s.io/node'] === 'fake')
      .map((n) => n.metadata?.name),
  );
  const pods = await waitFor(
    async () => {
      const list = await b.kube.core.listNamespacedPod({ namespace, labelSelector: 'app=spoke-web' });
      const ready = list.items.filter(isReady);
      return ready.length === REPLICAS && list.items.length === REPLICAS
        ? ready
        : pending(
            list.items.map((p) => ({
              name: p.metadata?.name,
              node: p.spec?.nodeName,
              phase: p.status?.phase,
            })),
          );
    },
    { describe: `${REPLICAS} Ready pods of spoke-web in spoke ${SPOKE}`, timeout: 60_000, interval: 200 },
  );
  for (const p of pods)
    expect(nodes.has(p.spec?.nodeName), `${p.metadata?.name} on a kwok node of the spoke`).toBe(true);

  const cm = await b.kube.core.readNamespacedConfigMap({ name: 'spoke-config', namespace });
  expect(cm.data).toEqual(data);
  const d = await b.kube.apps.readNamespacedDeployment({ name: 'spoke-web', namespace });
  expect(d.status?.readyReplicas).toBe(REPLICAS);
  expect(
    d.metadata?.labels?.['app.kubernetes.io/instance'] ??
      d.metadata?.annotations?.['argocd.argoproj.io/tracking-id'],
  ).toBeTruthy();

  // The hub: the same namespace exists there (the fixture made it) and holds none of it.
  const missing = await kube.core.readNamespacedConfigMap({ name: 'spoke-config', namespace }).then(
    () => 200,
    (err: unknown) => statusOf(err),
  );
  expect(missing).toBe(404);
  expect((await kube.apps.listNamespacedDeployment({ namespace })).items).toEqual([]);
  expect((await kube.core.listNamespacedPod({ namespace })).items).toEqual([]);
});
