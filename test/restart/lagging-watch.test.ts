// A config change and a template change in one apply, while the service's own watch of Deployments
// lags behind (as on a loaded machine): the reload must still see that the template rollout's pods
// were created after the change and leave them alone (invariant I3). The lag is real: the service
// talks to the API server through a loopback proxy that delivers its Deployment watch 30 s late.
import type { V1Deployment } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { events, livePods, PodTracker, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { FAST_LEASE, installRelease, startReplica, stoppedAfterEach } from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const LAG_MS = 30_000;
/** The service's Deployment watch (cluster-wide or per namespace), not a restart's view of one Deployment. */
const deploymentWatch = (path: string) =>
  /\/apis\/apps\/v1\/(namespaces\/[^/]+\/)?deployments\?/.test(path) && !path.includes('fieldSelector');

describe('a lagging workload watch', () => {
  it('does not make a template rollout that follows the config change count as old pods', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        maxUnavailable: 1,
        annotations: { 'reloader.stakater.com/auto': 'true' },
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 2);

    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=1s', '--min-reload-interval=0s'],
    });
    releases.push(release);
    const replica = await startReplica(kube, release, 'replica-a', [], (proxy) =>
      proxy.lag(deploymentWatch, LAG_MS),
    );
    replicas.push(replica);
    await replica.svc.waitForLog(
      'the baseline of web',
      (l) => l.msg === 'baseline recorded' && String(l.workload ?? '').includes('web'),
      LAG_MS + 60_000,
    );
    await replica.svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const tracker = await PodTracker.start(kube, namespace, 'web');

    // One apply: the ConfigMap, then the Deployment with a new template.
    const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    const next: V1Deployment = JSON.parse(JSON.stringify(d));
    (next.spec?.template.spec?.containers[0] as { image: string }).image = 'registry.invalid/app:2';
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const applied = Date.now();
    await kube.apps.replaceNamespacedDeployment({ name: 'web', namespace, body: next });

    const decided = await replica.svc.waitForLog('the reload', (l) => l.msg === 'reload complete', 90_000);
    expect({ replaced: decided.replaced, notNeeded: decided.notNeeded }).toEqual({
      replaced: 0,
      notNeeded: true,
    });
    // It decided while the watch still lagged: on what the API server said, not on the watch.
    expect(Date.parse(String(decided.time)) - applied).toBeLessThan(LAG_MS);
    await waitForEvent(kube, namespace, 'ReloadNotNeeded', 'web', 30_000);
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
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
    // The service evicted nothing, and only the template rollout created pods: one per replica.
    const evictions = replica.proxy.requests.filter(
      (r) => r.method === 'POST' && r.path.endsWith('/eviction'),
    );
    expect(evictions).toEqual([]);
    expect(tracker.newSince(before)).toHaveLength(2);
    expect(tracker.surgePods()).toHaveLength(0);
  });
});
