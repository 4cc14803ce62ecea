// A change made while no replica acted (docs/catch-up.md) is reloaded with the config's newest write
// as its cutoff, not the moment the service starts: a pod created after the write already reads the
// change and is not replaced a second time (I3). Found by the execution-level simulation
// (test/sim/exec-sim.test.ts: a new leader replaced the pods of a template rollout made after the
// change); before the fix, the cutoff was the start, and every pod was replaced.
import { afterEach, describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { livePods, PodTracker, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };

describe('catch-up cutoff', () => {
  it('replaces only the pods created before the config was written while the service was down', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const key = await hashKeyFile();
    const first = startService(serviceArgs(namespace, key, ['--debounce=0s']));
    await first.waitForLog('baseline', (l) => l.msg === 'baseline recorded');
    await first.stop();

    // While no replica acts: the config changes, then one pod is replaced (a node drain, a rollout),
    // in a later whole second, so it reads the new data.
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const cm = await kube.core.readNamespacedConfigMap({ name: 'app', namespace });
    const writtenAt = Math.max(
      ...(cm.metadata?.managedFields ?? []).map((f) => new Date(f.time ?? 0).getTime()),
    );
    await waitFor(() => (Date.now() >= writtenAt + 2_000 ? true : pending(Date.now() - writtenAt)), {
      describe: 'a later second than the write',
    });
    const [stale, toReplace] = before;
    await kube.core.deleteNamespacedPod({ name: toReplace?.name as string, namespace });
    const fresh = await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        const added = pods.filter((p) => !before.some((b) => b.uid === p.uid) && p.ready);
        return added.length === 1 && pods.length === 2 ? added[0] : pending(pods);
      },
      { describe: 'the deleted pod replaced by a Ready pod', timeout: 60_000 },
    );
    expect(fresh?.createdAt).toBeGreaterThan(writtenAt);

    const tracker = await PodTracker.start(kube, namespace, 'web');
    startService(serviceArgs(namespace, key, ['--debounce=0s']));
    await waitForEvent(kube, namespace, 'Reloaded', 'web', 90_000);
    const after = await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        const ok = pods.length === 2 && pods.every((p) => p.ready && !p.surge && p.uid !== stale?.uid);
        return ok ? pods : pending(pods);
      },
      { describe: 'the pod older than the write replaced', timeout: 90_000 },
    );
    tracker.stop();
    // The pod created after the write is still there; only the older one was replaced.
    expect(after.map((p) => p.uid)).toContain(fresh?.uid);
    expect(tracker.newSince([...before, fresh as NonNullable<typeof fresh>])).toHaveLength(1);
  });
});
