// Two replicas with leader election: only the leader acts; when it dies mid-reload the standby
// takes over within the lease duration and finishes without recycling any pod twice.
import { afterEach, describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { events, livePods, PodTracker, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const LEASE = [
  '--lease-duration=4s',
  '--lease-renew-deadline=3s',
  '--lease-retry-period=500ms',
  '--debounce=0s',
];

describe('leader election', () => {
  it('lets the standby finish a reload when the leader is killed mid-way, with no double restarts', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 3,
        maxUnavailable: 1,
        maxSurge: 0,
        annotations: { 'reloader.stakater.com/auto': 'true' },
        podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '2s' },
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 3);
    const key = await hashKeyFile();
    const a = startService(serviceArgs(namespace, key, [...LEASE, '--leader-identity=replica-a']));
    await a.waitForLog('a leads', (l) => l.msg === 'ready');
    const b = startService(serviceArgs(namespace, key, [...LEASE, '--leader-identity=replica-b']));
    await b.waitForLog('b watches', (l) => l.msg === 'caches synced');
    await b.waitForLog('b sees a', (l) => l.msg === 'leader observed' && l.leader === 'replica-a');

    // Killing the standby changes nothing.
    await b.kill();
    const b2 = startService(serviceArgs(namespace, key, [...LEASE, '--leader-identity=replica-b']));
    await b2.waitForLog('b2 watches', (l) => l.msg === 'caches synced');

    const tracker = await PodTracker.start(kube, namespace, 'web');
    const t0 = Date.now();
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await a.waitForLog('a evicting', (l) => l.msg === 'reload started');
    await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        return pods.length < 3 || pods.some((p) => !p.ready) ? pods : pending(pods);
      },
      { describe: 'the first eviction' },
    );
    const killedAt = Date.now();
    await a.kill();

    const took = await b2.waitForLog(
      'b2 resumes',
      (l) => l.msg === 'reload started' && l.resumed === true,
      30_000,
    );
    expect(Date.parse(String(took.time)) - killedAt).toBeLessThan(4000 + 2000);
    expect(b2.logs.some((l) => l.msg === 'reload started' && l.resumed !== true)).toBe(false);
    await waitForEvent(kube, namespace, 'Reloaded', 'web', 90_000);
    const old = new Set(before.map((p) => p.uid));
    const after = await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        return pods.length === 3 && pods.every((p) => p.ready && !old.has(p.uid)) ? pods : pending(pods);
      },
      { describe: 'all pods replaced', timeout: 90_000 },
    );
    tracker.stop();
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(Math.floor(t0 / 1000) * 1000);
    expect(tracker.newSince(before)).toHaveLength(3);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
  });
});
