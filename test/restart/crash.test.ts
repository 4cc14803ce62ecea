// Invariant I5: a crash at any point of a reload neither stops it from completing nor makes any
// pod be recycled twice for the same cutoff. The service is SIGKILLed mid-reload and started again.
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { livePods, PodTracker, ReadyMonitor, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, type DeploymentOptions, deployment, statefulSet } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
// Slow readiness keeps the reload mid-flight long enough to kill it at a chosen point.
const SLOW = { 'kwok.gitops-reloader.io/ready-after': '2s' };
// A killed leader cannot release its Lease; short timings let the next process take over quickly.
const FAST_LEASE = ['--lease-duration=3s', '--lease-renew-deadline=2s', '--lease-retry-period=500ms'];

async function scenario(
  kube: Kube,
  namespace: string,
  opts: DeploymentOptions,
  killWhen: (svc: RunningService) => Promise<unknown>,
) {
  const replicas = opts.replicas ?? 1;
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      annotations: AUTO,
      podAnnotations: SLOW,
      container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      ...opts,
    }),
  });
  const before = await waitReadyPods(kube, namespace, 'web', replicas);
  const generation = (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata
    ?.generation;
  const key = await hashKeyFile();
  const first = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
  await first.waitForLog('ready', (l) => l.msg === 'ready');
  const tracker = await PodTracker.start(kube, namespace, 'web');
  const monitor = await ReadyMonitor.start(kube, namespace, 'web');

  const t0 = Date.now();
  await kube.core.replaceNamespacedConfigMap({ name: 'app', namespace, body: configMap('app', { k: '2' }) });
  await killWhen(first);
  await first.kill();

  const second = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
  await second.waitForLog('resumed', (l) => l.msg === 'reload started' && l.resumed === true);
  await waitForEvent(kube, namespace, 'Reloaded', 'web', 90_000);
  const old = new Set(before.map((p) => p.uid));
  const after = await waitFor(
    async () => {
      const pods = await livePods(kube, namespace, 'web');
      const ok = pods.length === replicas && pods.every((p) => p.ready && !p.surge && !old.has(p.uid));
      return ok ? pods : pending(pods);
    },
    { describe: 'the resumed reload to finish', timeout: 90_000 },
  );
  tracker.stop();
  monitor.stop();
  for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(Math.floor(t0 / 1000) * 1000);
  // Each old pod was replaced exactly once: no replacement was recycled after the restart.
  expect(tracker.newSince(before)).toHaveLength(replicas);
  expect((await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata?.generation).toBe(
    generation,
  );
  return { surgePods: tracker.surgePods(), maxLive: monitor.maxLive, minReady: monitor.min };
}

describe('crash safety (I5)', () => {
  it('finishes a single-replica reload killed right after its surge pod was created', async ({
    kube,
    namespace,
  }) => {
    await scenario(kube, namespace, { replicas: 1 }, () =>
      waitFor(
        async () => {
          const pods = await livePods(kube, namespace, 'web');
          return pods.some((p) => p.surge) ? pods : pending(pods);
        },
        { describe: 'a surge pod to exist' },
      ),
    );
  });

  it('resumes a 25%/25% reload of 10 replicas killed after its 3 surge pods were created, reusing them', async ({
    kube,
    namespace,
  }) => {
    // Opted out of progressive reloads, whose first replacement goes alone: this is about resuming a
    // step that made all three surge pods at once.
    const opts = {
      replicas: 10,
      maxSurge: '25%',
      maxUnavailable: '25%',
      annotations: { ...AUTO, 'gitops-reloader.io/progressive': 'false' },
    };
    const r = await scenario(kube, namespace, opts, () =>
      waitFor(
        async () => {
          const pods = await livePods(kube, namespace, 'web');
          return pods.filter((p) => p.surge).length === 3 ? pods : pending(pods);
        },
        { describe: '3 surge pods to exist' },
      ),
    );
    // The next leader counted the surge pods it found against maxSurge: none more, ever ≤ 13 pods.
    expect(r.surgePods).toHaveLength(3);
    expect(r.maxLive).toBeLessThanOrEqual(13);
    expect(r.minReady).toBeGreaterThanOrEqual(8);
  });

  it('finishes a 3-replica reload killed right after its first eviction', async ({ kube, namespace }) => {
    await scenario(kube, namespace, { replicas: 3, maxUnavailable: 1, maxSurge: 0 }, async () => {
      const list = await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
      return waitFor(
        async () => {
          const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
          const gone = list.items.some(
            (p) =>
              !pods.items.some((q) => q.metadata?.uid === p.metadata?.uid && !q.metadata?.deletionTimestamp),
          );
          return gone ? pods : pending(pods.items.map((p) => p.metadata?.name));
        },
        { describe: 'the first eviction' },
      );
    });
  });

  it('deletes a surge pod left behind by an interrupted reload at start-up', async ({ kube, namespace }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const d = await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const [own] = await waitReadyPods(kube, namespace, 'web', 1);
    // Named as the ReplicaSet's pods, as surge pods are (ADR 0019, amendment): the surge label alone
    // marks it as ours.
    const replicaSet = (await kube.core.readNamespacedPod({ name: own?.name as string, namespace })).metadata
      ?.ownerReferences?.[0]?.name as string;
    const leftover = await kube.core.createNamespacedPod({
      namespace,
      body: {
        metadata: {
          generateName: `${replicaSet}-`,
          labels: { app: 'web', 'gitops-reloader.io/surge': d.metadata?.uid as string },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: 'web',
              uid: d.metadata?.uid as string,
              controller: true,
            },
          ],
        },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
    });
    const svc = startService(serviceArgs(namespace, await hashKeyFile()));
    await svc.waitForLog(
      'surge clean-up',
      (l) => l.msg === 'deleted a surge pod no reload needs' && l.pod === leftover.metadata?.name,
    );
    await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        return pods.some((p) => p.uid === leftover.metadata?.uid) ? pending(pods) : pods;
      },
      { describe: 'the leftover surge pod to be gone' },
    );
    expect(await livePods(kube, namespace, 'web')).toHaveLength(1);
  });

  it('finishes a StatefulSet reload killed mid-way, each ordinal replaced once', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedStatefulSet({
      namespace,
      body: statefulSet('db', 3, {
        annotations: AUTO,
        podAnnotations: SLOW,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'db', 3);
    const key = await hashKeyFile();
    const first = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
    await first.waitForLog('ready', (l) => l.msg === 'ready');
    const tracker = await PodTracker.start(kube, namespace, 'db');
    const t0 = Date.now();
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    // Kill once db-2 has been replaced and db-1 is on its way: the middle of the set.
    await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'db');
        const replaced = pods.filter((p) => !before.some((b) => b.uid === p.uid));
        return replaced.length >= 1 &&
          pods.some((p) => p.name === 'db-1' && !before.some((b) => b.uid === p.uid))
          ? pods
          : pending(pods.map((p) => `${p.name}:${p.ready}`));
      },
      { describe: 'db-2 replaced and db-1 evicted', timeout: 60_000 },
    );
    await first.kill();
    const second = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
    await second.waitForLog('resumed', (l) => l.msg === 'reload started' && l.resumed === true);
    await waitForEvent(kube, namespace, 'Reloaded', 'db', 90_000);
    const after = await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'db');
        const ok = pods.length === 3 && pods.every((p) => p.ready && !before.some((b) => b.uid === p.uid));
        return ok ? pods : pending(pods);
      },
      { describe: 'every ordinal replaced and Ready', timeout: 90_000 },
    );
    tracker.stop();
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(Math.floor(t0 / 1000) * 1000);
    expect(tracker.newSince(before)).toHaveLength(3);
  });
});
