// A Lease is never held by a replica that cannot act (docs/adr/0027). With the chart's two replicas:
// a leader frozen (SIGSTOP) past its lease in the middle of a reload, its writes queued under the
// write rate limit, sends none of them once it runs again after the standby took over: every write is
// checked against the clock immediately before it goes out. And a new leader whose caches cannot sync
// in bounded time gives the Lease up, and says so. A replica whose watch keeps failing turns unready,
// then not live; one that recovers is both again.
import { RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  leaderAndStandby,
  metric,
  nonLeaderWrites,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

describe('leadership fencing', () => {
  it('a leader stopped past its lease mid-reload sends none of its queued writes after the takeover', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    // Three reloads at once, each evicting its pods one after another: writes queue up behind the limit.
    const apps = ['web-1', 'web-2', 'web-3'];
    for (const name of apps) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(name, {
          replicas: 3,
          maxUnavailable: '100%',
          maxSurge: 0,
          annotations: { 'reloader.stakater.com/auto': 'true' },
          container: USES,
        }),
      });
    }
    for (const name of apps) await waitReadyPods(kube, namespace, name, 3);
    const release = await installRelease(namespace, {
      watch: [namespace],
      // One write a second: the reloads keep writes waiting for several seconds.
      extraArgs: [...FAST_LEASE, '--debounce=0s', '--api-write-qps=1', '--api-write-burst=1'],
    });
    releases.push(release);
    const [a, b] = await leaderAndStandby(kube, release, replicas);
    expect(await waitForLeader([a, b])).toBe(a);

    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const queued = await waitFor(
      async () => {
        const n = await metric(a, 'gitops_reloader_api_writes_waiting');
        return n >= 2 ? n : pending(n);
      },
      { describe: "the leader's reloads have writes queued", timeout: 30_000, interval: 50 },
    );
    // Frozen well past its lease (4 s): the standby takes over meanwhile.
    a.svc.proc.kill('SIGSTOP');
    try {
      await waitForLeader([b], 30_000);
      await b.svc.waitForLog('b resumes the reload', (l) => l.msg === 'reload started', 30_000);
    } finally {
      a.svc.proc.kill('SIGCONT');
    }
    await a.svc.waitForLog('a sees its term ended', (l) => l.msg === 'stopped leading; no longer acting');
    // Every write that was queued has had its turn (and been refused) by now.
    await waitFor(
      async () => {
        const n = await metric(a, 'gitops_reloader_api_writes_waiting');
        return n === 0 ? true : pending(n);
      },
      { describe: "the old leader's queue drained", timeout: 30_000 },
    );
    expect(queued).toBeGreaterThanOrEqual(2);
    // What the API server received: nothing from a after b held the Lease.
    expect(nonLeaderWrites([a, b]).map((w) => `${w.replica} ${w.request.method} ${w.request.path}`)).toEqual(
      [],
    );
  });

  it('a new leader whose caches do not sync in time releases the Lease, and says why', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--leader-cache-sync-timeout=5s'],
    });
    releases.push(release);
    // a's lists and watches of Secrets answer a minute late: it wins the Lease but cannot sync.
    const a = await startReplica(kube, release, 'replica-a', [], (proxy) =>
      proxy.lag((path) => /\/secrets\?/.test(path), 60_000),
    );
    replicas.push(a);
    await a.svc.waitForLog('a wins the lease', (l) => l.msg === 'became the leader', 30_000);
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(b);

    const gaveUp = await a.svc.waitForLog(
      'a gives the lease up',
      (l) => l.msg === 'could not start acting as leader; releasing the lease',
      30_000,
    );
    expect(gaveUp.reason).toBe('cache-sync-timeout');
    expect(String(gaveUp.err)).toMatch(/secrets/);
    // b acts long before a's caches could have synced.
    expect(await waitForLeader([b], 30_000)).toBe(b);
    const event = await waitForEvent(kube, namespace, 'LeaseReleased', `${release.fullname}-leader`, 30_000);
    expect(event.involvedObject.kind).toBe('Lease');
    expect(event.message).toMatch(/replica-a .*caches not synced/);
    expect(
      await metric(a, 'gitops_reloader_leader_start_failures_total', { reason: 'cache-sync-timeout' }),
    ).toBe(1);
    expect(a.svc.logs.filter((l) => l.msg === 'ready')).toEqual([]);
  });

  it('a watch that keeps failing makes the replica unready, then not live, and both recover with it', async ({
    kube,
    namespace,
  }) => {
    const release = await installRelease(namespace, {
      watch: [namespace],
      // A relist every 5 s: the stuck limit (liveness) is 2 × 5 s + 60 s.
      extraArgs: [...FAST_LEASE, '--relist-interval=5s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await a.svc.waitForLog('a acts', (l) => l.msg === 'ready', 60_000);
    const probe = async (path: string) => (await fetch(`${a.url}${path}`)).status;
    expect([await probe('/readyz'), await probe('/healthz')]).toEqual([200, 200]);

    // Secrets may no longer be listed or watched in the namespace: every relist of them fails.
    const rbac = kube.kc.makeApiClient(RbacAuthorizationV1Api);
    const name = `${release.fullname}-reload`;
    const role = await rbac.readNamespacedRole({ name, namespace });
    await rbac.replaceNamespacedRole({
      name,
      namespace,
      body: {
        ...role,
        rules: (role.rules ?? []).map((r) =>
          r.resources?.includes('secrets')
            ? { ...r, resources: r.resources.filter((x) => x !== 'secrets') }
            : r,
        ),
      },
    });
    await a.svc.waitForLog('a secrets list refused', (l) => l.msg !== undefined && l.status === 403, 30_000);
    const unready = await waitFor(
      async () => {
        const res = await fetch(`${a.url}/readyz`);
        const body = (await res.json()) as { status: string };
        return res.status === 503 ? body : pending(res.status);
      },
      { describe: 'readiness fails', timeout: 120_000, interval: 1_000 },
    );
    expect(unready.status).toMatch(/watches failing.*secrets/);
    await waitFor(async () => ((await probe('/healthz')) === 503 ? true : pending('live')), {
      describe: 'liveness fails',
      timeout: 120_000,
      interval: 1_000,
    });

    const fixed = await rbac.readNamespacedRole({ name, namespace });
    await rbac.replaceNamespacedRole({ name, namespace, body: { ...role, metadata: fixed.metadata } });
    await waitFor(
      async () => {
        const both = [await probe('/readyz'), await probe('/healthz')];
        return both[0] === 200 && both[1] === 200 ? true : pending(both);
      },
      { describe: 'ready and live again', timeout: 60_000, interval: 1_000 },
    );
  }, 360_000);
});
