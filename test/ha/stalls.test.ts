// A PodDisruptionBudget that never allows an eviction blocks the reloads of one namespace; reloads
// elsewhere still proceed (no namespace holds every slot), and each blocked attempt gives its slot back
// at the reload deadline and says so, every time, with a ReloadStalled Event and a metric.
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { events, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  metric,
  nonLeaderWrites,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

describe('stalled reloads', () => {
  it('a PDB that never allows eviction in one namespace does not stop reloads in another', async ({
    kube,
    namespace: stuck,
  }) => {
    const other = (await kube.core.createNamespace({ body: { metadata: { generateName: 'ha-other-' } } }))
      .metadata?.name as string;
    try {
      for (const ns of [stuck, other]) {
        await kube.core.createNamespacedConfigMap({ namespace: ns, body: configMap('app', { k: '1' }) });
      }
      // Two workloads in the tenant's namespace, each behind a PDB that allows no disruption.
      for (const name of ['one', 'two']) {
        await kube.apps.createNamespacedDeployment({
          namespace: stuck,
          body: deployment(name, {
            replicas: 2,
            maxUnavailable: 1,
            maxSurge: 0,
            annotations: AUTO,
            container: USES,
          }),
        });
        await kube.policy.createNamespacedPodDisruptionBudget({
          namespace: stuck,
          body: { metadata: { name }, spec: { maxUnavailable: 0, selector: { matchLabels: { app: name } } } },
        });
      }
      await kube.apps.createNamespacedDeployment({
        namespace: other,
        body: deployment('web', {
          replicas: 2,
          maxUnavailable: 1,
          maxSurge: 0,
          annotations: AUTO,
          container: USES,
        }),
      });
      for (const name of ['one', 'two']) await waitReadyPods(kube, stuck, name, 2);
      const before = await waitReadyPods(kube, other, 'web', 2);

      const release = await installRelease(stuck, {
        watch: [stuck, other],
        set: ['reload.maxConcurrentReloads=2', 'reload.stallAfter=1s', 'reload.deadline=4s'],
        extraArgs: [...FAST_LEASE, '--debounce=0s', '--min-reload-interval=0s'],
      });
      releases.push(release);
      const a = await startReplica(kube, release, 'replica-a');
      const b = await startReplica(kube, release, 'replica-b');
      replicas.push(a, b);
      const leader = await waitForLeader([a, b], 60_000);

      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: stuck,
        body: configMap('app', { k: '2' }),
      });
      await waitFor(
        () =>
          leader.svc.logs.filter((l) => l.msg === 'reload started' && l.namespace === stuck).length >= 1 ||
          pending('no reload started in the stuck namespace'),
        { describe: 'the stuck reloads start' },
      );
      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: other,
        body: configMap('app', { k: '2' }),
      });
      await waitForEvent(kube, other, 'Reloaded', 'web', 60_000);
      await waitAllReplaced(kube, other, 'web', before, 2);

      // Every blocked attempt says so: the second attempt has its own Event, and the metric counts both.
      await waitFor(
        async () => {
          const stalled = (await events(kube, stuck, 'ReloadStalled')).filter((e) =>
            /attempt 2 /.test(e.message ?? ''),
          );
          return stalled.length >= 1
            ? stalled
            : pending((await events(kube, stuck, 'ReloadStalled')).map((e) => e.message));
        },
        { describe: 'a ReloadStalled Event for the second attempt', timeout: 60_000 },
      );
      expect(
        await metric(leader, 'gitops_reloader_reload_stalls_total', { why: 'deadline' }),
      ).toBeGreaterThanOrEqual(2);
      // Nothing was evicted in the stuck namespace.
      for (const name of ['one', 'two']) {
        expect(
          (await kube.core.listNamespacedPod({ namespace: stuck, labelSelector: `app=${name}` })).items,
        ).toHaveLength(2);
      }
      expect(nonLeaderWrites([a, b])).toEqual([]);
    } finally {
      await kube.core.deleteNamespace({ name: other }).catch(() => undefined);
    }
  });
});
