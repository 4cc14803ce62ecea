// Drift-free restarts of Deployments: availability (I4), PodDisruptionBudgets, surge pods, stalls,
// and a template change arriving together with a config change.
import { PatchStrategy, setHeaderOptions, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import {
  events,
  livePods,
  PodTracker,
  ReadyMonitor,
  waitForEvent,
  waitReadyPods,
} from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, type DeploymentOptions, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

interface Setup {
  before: Awaited<ReturnType<typeof waitReadyPods>>;
  generation: number | undefined;
}

async function setUp(
  kube: Kube,
  namespace: string,
  opts: DeploymentOptions,
  extra: string[] = [],
): Promise<Setup> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', { annotations: AUTO, container: USES, ...opts }),
  });
  const before = await waitReadyPods(kube, namespace, 'web', opts.replicas ?? 1);
  const debounce = extra.some((a) => a.startsWith('--debounce=')) ? [] : ['--debounce=0s'];
  const svc = startService(serviceArgs(namespace, await hashKeyFile(), [...debounce, ...extra]));
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
  return { before, generation: d.metadata?.generation };
}

async function changeConfig(kube: Kube, namespace: string, value: string) {
  await kube.core.replaceNamespacedConfigMap({
    name: 'app',
    namespace,
    body: configMap('app', { k: value }),
  });
}

async function waitReloaded(kube: Kube, namespace: string, s: Setup, replicas: number, since: number) {
  await waitForEvent(kube, namespace, 'Reloaded', 'web', 90_000);
  const old = new Set(s.before.map((p) => p.uid));
  return waitFor(
    async () => {
      const pods = await livePods(kube, namespace, 'web');
      const ok = pods.length === replicas && pods.every((p) => p.ready && !old.has(p.uid) && !p.surge);
      return ok ? pods : pending(pods);
    },
    { describe: 'every pod replaced, Ready, and no surge pod left', timeout: 60_000 },
  ).then((pods) => {
    for (const p of pods) expect(p.createdAt).toBeGreaterThanOrEqual(Math.floor(since / 1000) * 1000);
    return pods;
  });
}

async function generationOf(kube: Kube, namespace: string) {
  return (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata?.generation;
}

/**
 * What tells two pods of one ReplicaSet apart when nothing should: the metadata and spec with the
 * name's random suffix (and the token volume's), uid, timestamps, resourceVersion, managedFields (who
 * wrote what: an audit record, kept true) and the node the scheduler chose set aside.
 */
function lookOf(p: V1Pod) {
  const { name, uid, creationTimestamp, resourceVersion, managedFields, ...rest } = p.metadata ?? {};
  const { nodeName, ...spec } = p.spec ?? ({} as NonNullable<V1Pod['spec']>);
  return {
    metadataKeys: Object.keys(p.metadata ?? {}).sort(),
    nameWithoutSuffix: name?.replace(/[bcdfghjklmnpqrstvwxz2456789]{5}$/, '<suffix>'),
    ...rest,
    // The service-account token volume is named per pod by admission, with a random suffix too.
    spec: JSON.parse(
      JSON.stringify(spec).replace(
        /kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}/g,
        'kube-api-access-<suffix>',
      ),
    ),
  };
}

describe('restart strategy for Deployments', () => {
  it("leaves an adopted surge pod indistinguishable from the ReplicaSet's own pods, apart from its creation time", async ({
    kube,
    namespace,
  }) => {
    const s = await setUp(kube, namespace, { replicas: 1 });
    const tracker = await PodTracker.start(kube, namespace, 'web');
    await changeConfig(kube, namespace, '2');
    await waitReloaded(kube, namespace, s, 1, Date.now() - 1000);
    tracker.stop();
    const [handed] = tracker.handedOver();
    expect(handed).toBeDefined();
    // A pod the ReplicaSet makes itself, to compare with: scale up by one.
    await kube.apps.patchNamespacedDeploymentScale(
      { name: 'web', namespace, body: { spec: { replicas: 2 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const pods = await waitReadyPods(kube, namespace, 'web', 2);
    const own = pods.find((p) => p.uid !== handed?.uid);
    const read = (name: string) => kube.core.readNamespacedPod({ name, namespace });
    const adopted = await read(handed?.name as string);
    const native = await read(own?.name as string);
    // Named as the ReplicaSet names its pods: <replicaset>-<5 characters of the API server's alphabet>.
    const rs = native.metadata?.ownerReferences?.[0]?.name as string;
    expect(adopted.metadata?.name).toMatch(new RegExp(`^${rs}-[bcdfghjklmnpqrstvwxz2456789]{5}$`));
    expect(lookOf(adopted)).toEqual(lookOf(native));
    // Nothing of ours is left on it.
    expect(JSON.stringify({ ...adopted.metadata, managedFields: undefined })).not.toContain(
      'gitops-reloader',
    );
  });

  it('restarts a single-replica Deployment without ever having 0 Ready pods', async ({ kube, namespace }) => {
    const s = await setUp(kube, namespace, { replicas: 1 });
    const monitor = await ReadyMonitor.start(kube, namespace, 'web');
    const tracker = await PodTracker.start(kube, namespace, 'web');
    const t0 = Date.now();
    await changeConfig(kube, namespace, '2');
    await waitReloaded(kube, namespace, s, 1, t0);
    monitor.stop();
    tracker.stop();
    expect(monitor.min).toBeGreaterThanOrEqual(1);
    expect(tracker.surgePods().length).toBeGreaterThanOrEqual(1);
    expect(tracker.newSince(s.before)).toHaveLength(1);
    // ADR 0019: one pod started in all, the surge pod, which the ReplicaSet adopted in place of the old
    // pod; the ReplicaSet started no replacement of its own.
    const [handed] = tracker.handedOver();
    expect(tracker.newSince(s.before)).toEqual([handed]);
    const live = await kube.core.readNamespacedPod({ name: handed?.name as string, namespace });
    expect(live.metadata?.ownerReferences?.map((o) => `${o.kind}/${o.controller}`)).toEqual([
      'ReplicaSet/true',
    ]);
    expect(live.metadata?.labels?.['gitops-reloader.io/surge']).toBeUndefined();
    const [reloaded] = await events(kube, namespace, 'Reloaded', 'web');
    expect(reloaded?.message).toMatch(/replaced 1 pod \(1 by handing a surge pod to the ReplicaSet\)/);
    expect(await generationOf(kube, namespace)).toBe(s.generation);
  });

  it('keeps at least replicas − maxUnavailable Ready pods (4 replicas, maxUnavailable 1)', async ({
    kube,
    namespace,
  }) => {
    const s = await setUp(kube, namespace, { replicas: 4, maxUnavailable: 1, maxSurge: 0 });
    const monitor = await ReadyMonitor.start(kube, namespace, 'web');
    const tracker = await PodTracker.start(kube, namespace, 'web');
    const t0 = Date.now();
    await changeConfig(kube, namespace, '2');
    await waitReloaded(kube, namespace, s, 4, t0);
    monitor.stop();
    tracker.stop();
    expect(monitor.min).toBeGreaterThanOrEqual(3);
    expect(tracker.newSince(s.before)).toHaveLength(4);
    expect(tracker.surgePods()).toHaveLength(0);
    expect(await generationOf(kube, namespace)).toBe(s.generation);
  });

  it('stalls on a PodDisruptionBudget that forbids every eviction, says so, and finishes once it is relaxed', async ({
    kube,
    namespace,
  }) => {
    const s = await setUp(kube, namespace, { replicas: 3, maxUnavailable: 1, maxSurge: 0 }, [
      '--stall-after=2s',
    ]);
    await kube.policy.createNamespacedPodDisruptionBudget({
      namespace,
      body: {
        metadata: { name: 'web' },
        spec: { minAvailable: 3, selector: { matchLabels: { app: 'web' } } },
      },
    });
    await waitFor(
      async () => {
        const p = await kube.policy.readNamespacedPodDisruptionBudget({ name: 'web', namespace });
        return p.status?.currentHealthy === 3 ? p : pending(p.status);
      },
      { describe: 'the PDB to see 3 healthy pods' },
    );
    const t0 = Date.now();
    await changeConfig(kube, namespace, '2');
    const stalled = await waitForEvent(kube, namespace, 'ReloadStalled', 'web');
    expect(stalled.type).toBe('Warning');
    expect(stalled.message).toMatch(/disruption budget|refused/i);
    // Nothing was evicted while the budget forbade it.
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid).sort()).toEqual(
      s.before.map((p) => p.uid).sort(),
    );
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);

    await kube.policy.patchNamespacedPodDisruptionBudget({
      name: 'web',
      namespace,
      body: [{ op: 'replace', path: '/spec/minAvailable', value: 2 }],
    });
    await waitReloaded(kube, namespace, s, 3, t0);
  });

  for (const [label, spec] of [
    ['minAvailable: 1', { minAvailable: 1 }],
    ['maxUnavailable: 0%', { maxUnavailable: '0%' }],
  ] as const) {
    it(`lets a surge pod satisfy a PDB with ${label} on a single-replica Deployment`, async ({
      kube,
      namespace,
    }) => {
      await kube.policy.createNamespacedPodDisruptionBudget({
        namespace,
        body: { metadata: { name: 'web' }, spec: { ...spec, selector: { matchLabels: { app: 'web' } } } },
      });
      const s = await setUp(kube, namespace, { replicas: 1 }, ['--stall-after=60s']);
      const monitor = await ReadyMonitor.start(kube, namespace, 'web');
      const t0 = Date.now();
      await changeConfig(kube, namespace, '2');
      await waitReloaded(kube, namespace, s, 1, t0);
      monitor.stop();
      expect(monitor.min).toBeGreaterThanOrEqual(1);
      expect(await events(kube, namespace, 'ReloadStalled', 'web')).toHaveLength(0);
      expect(await generationOf(kube, namespace)).toBe(s.generation);
    });
  }

  it('costs zero restarts of its own when the template and a config change in the same apply', async ({
    kube,
    namespace,
  }) => {
    // One apply is two requests (the ConfigMap, then the Deployment); the debounce is what lets the
    // reload see both. With --debounce=0 it acts within milliseconds of the first.
    const s = await setUp(kube, namespace, { replicas: 2, maxUnavailable: 1 }, ['--debounce=1s']);
    const tracker = await PodTracker.start(kube, namespace, 'web');
    const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    const next: V1Deployment = JSON.parse(JSON.stringify(d));
    (next.spec?.template.spec?.containers[0] as { image: string }).image = 'registry.invalid/app:2';
    await changeConfig(kube, namespace, '2');
    await kube.apps.replaceNamespacedDeployment({ name: 'web', namespace, body: next });

    await waitForEvent(kube, namespace, 'ReloadNotNeeded', 'web', 90_000);
    await waitFor(
      async () => {
        const dep = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
        const pods = await livePods(kube, namespace, 'web');
        const done = dep.status?.updatedReplicas === 2 && pods.length === 2 && pods.every((p) => p.ready);
        return done ? pods : pending({ status: dep.status, pods });
      },
      { describe: 'the template rollout to finish', timeout: 60_000 },
    );
    tracker.stop();
    // Not a reload: its own reason, never a Reloaded Event.
    const notNeeded = await events(kube, namespace, 'ReloadNotNeeded', 'web');
    expect(notNeeded[0]?.message).toMatch(/already newer/);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
    // Only the template rollout created pods: one per replica.
    expect(tracker.newSince(s.before)).toHaveLength(2);
    expect(tracker.surgePods()).toHaveLength(0);
  });
});

// ADR 0017: surge pods within maxSurge from the first step, evictions within maxUnavailable, at once.
describe('restart strategy for Deployments: maxSurge and maxUnavailable at once', () => {
  for (const shape of [
    {
      label: 'maxSurge 25% / maxUnavailable 25%',
      maxSurge: '25%',
      maxUnavailable: '25%',
      surge: 3,
      floor: 8,
    },
    { label: 'maxSurge 1 / maxUnavailable 0', maxSurge: 1, maxUnavailable: 0, surge: 1, floor: 10 },
  ] as const) {
    it(`replaces each of 10 pods once with ${shape.label}: ≥ ${shape.floor} Ready, ≤ ${10 + shape.surge} pods`, async ({
      kube,
      namespace,
    }) => {
      const { maxSurge, maxUnavailable } = shape;
      const s = await setUp(kube, namespace, { replicas: 10, maxSurge, maxUnavailable });
      const monitor = await ReadyMonitor.start(kube, namespace, 'web');
      const tracker = await PodTracker.start(kube, namespace, 'web');
      const t0 = Date.now();
      await changeConfig(kube, namespace, '2');
      await waitReloaded(kube, namespace, s, 10, t0);
      monitor.stop();
      tracker.stop();
      expect(monitor.min).toBeGreaterThanOrEqual(shape.floor);
      expect(monitor.maxLive).toBeLessThanOrEqual(10 + shape.surge);
      // Each old pod replaced exactly once (I3): by a pod of the ReplicaSet, or by a surge pod handed
      // over to it (ADR 0019); every other surge pod is gone.
      expect(tracker.newSince(s.before)).toHaveLength(10);
      expect(tracker.handedOver().length).toBeGreaterThanOrEqual(shape.surge);
      expect((await livePods(kube, namespace, 'web')).filter((p) => p.surge)).toEqual([]);
      expect(await generationOf(kube, namespace)).toBe(s.generation);
    });
  }

  it('lets surge pods make the room a PDB as strict as replicas leaves none of (minAvailable 10 of 10)', async ({
    kube,
    namespace,
  }) => {
    await kube.policy.createNamespacedPodDisruptionBudget({
      namespace,
      body: {
        metadata: { name: 'web' },
        spec: { minAvailable: 10, selector: { matchLabels: { app: 'web' } } },
      },
    });
    const s = await setUp(kube, namespace, { replicas: 10, maxSurge: '25%', maxUnavailable: '25%' }, [
      '--stall-after=60s',
    ]);
    await waitFor(
      async () => {
        const p = await kube.policy.readNamespacedPodDisruptionBudget({ name: 'web', namespace });
        return p.status?.currentHealthy === 10 ? p : pending(p.status);
      },
      { describe: 'the PDB to see 10 healthy pods' },
    );
    const monitor = await ReadyMonitor.start(kube, namespace, 'web');
    const tracker = await PodTracker.start(kube, namespace, 'web');
    const t0 = Date.now();
    await changeConfig(kube, namespace, '2');
    await waitReloaded(kube, namespace, s, 10, t0);
    monitor.stop();
    tracker.stop();
    // The PDB held throughout: the Deployment's own floor (8) alone would have allowed fewer.
    expect(monitor.min).toBeGreaterThanOrEqual(10);
    expect(monitor.maxLive).toBeLessThanOrEqual(13);
    expect(tracker.surgePods().length).toBeGreaterThanOrEqual(3);
    expect(tracker.newSince(s.before)).toHaveLength(10);
    expect(await events(kube, namespace, 'ReloadStalled', 'web')).toHaveLength(0);
  });
});
