// Two replicas as the chart runs them (helm template | kubectl apply, the Deployment's args, the
// chart's ServiceAccount): an Argo CD notification sent to any replica, at any moment of a leader
// change, is never refused, never acted on by a replica that does not lead, and takes effect exactly
// once, on the leader. The app is one the service cannot read (Argo CD elsewhere), so the
// notifications alone say when its sync runs and ends.
import { CoordinationV1Api } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { WEBHOOK_PATH } from '../../service/argocd/webhook.ts';
import { it, type Kube } from '../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  leaderAndStandby,
  nonLeaderWrites,
  type Replica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const TOKEN = 'ha-webhook-token-0123456789abcdef';
const { releases, replicas } = stoppedAfterEach();

async function notify(r: Replica, namespace: string, phase: string, startedAt: string) {
  const res = await fetch(`${r.url}${WEBHOOK_PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      version: 1,
      app: { namespace: 'argocd', name: 'shop' },
      phase,
      startedAt,
      resources: [{ group: '', version: 'v1', kind: 'ConfigMap', namespace, name: 'app', status: 'Synced' }],
    }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A Deployment using a ConfigMap that the Argo CD app argocd/shop tracks. */
async function trackedApp(kube: Kube, namespace: string) {
  const tracking = { 'argocd.argoproj.io/tracking-id': `shop:/ConfigMap:${namespace}/app` };
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }, tracking) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      replicas: 2,
      maxUnavailable: 1,
      maxSurge: 0,
      annotations: { 'reloader.stakater.com/auto': 'true' },
      container: { envFrom: [{ configMapRef: { name: 'app' } }] },
    }),
  });
  const before = await waitReadyPods(kube, namespace, 'web', 2);
  const change = (v: string) =>
    kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: v }, tracking),
    });
  return { before, change };
}

async function twoReplicas(kube: Kube, namespace: string): Promise<[Replica, Replica]> {
  const release = await installRelease(namespace, {
    watch: [namespace],
    webhookToken: TOKEN,
    // Argo CD's Applications are not readable here: notifications are the only word on syncs.
    set: ['argocd.enabled=false'],
    extraArgs: [...FAST_LEASE, '--debounce=0s', '--min-reload-interval=0s'],
  });
  releases.push(release);
  return leaderAndStandby(kube, release, replicas);
}

/** The leader held the config change for the sync (it knows the sync is running). */
function heldBy(r: Replica) {
  return r.svc.waitForLog(
    `${r.identity} holds the change`,
    (l) => l.msg === 'config change held until the Argo CD sync ends',
    30_000,
  );
}

describe('notifications with two replicas', () => {
  it('a notification sent to the standby takes effect once, on the leader', async ({ kube, namespace }) => {
    const { before, change } = await trackedApp(kube, namespace);
    const [leader, standby] = await twoReplicas(kube, namespace);
    expect(await waitForLeader([leader, standby])).toBe(leader);
    const tracker = await PodTracker.start(kube, namespace, 'web');

    const run = await notify(standby, namespace, 'Running', '2026-12-03T10:00:00Z');
    expect(run.status).toBe(202);
    await leader.svc.waitForLog(
      'the leader takes it',
      (l) => l.msg === 'Argo CD notification taken from the inbox',
    );
    await change('2');
    await heldBy(leader);
    expect((await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items).toHaveLength(
      2,
    );

    const end = await notify(standby, namespace, 'Succeeded', '2026-12-03T10:00:00Z');
    expect(end.status).toBe(202);
    await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    tracker.stop();
    expect(tracker.newSince(before), 'each pod replaced once').toHaveLength(2);
    expect(standby.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    expect(nonLeaderWrites([leader, standby])).toEqual([]);
  });

  it('a notification sent to a just-demoted leader takes effect once, on the new leader', async ({
    kube,
    namespace,
  }) => {
    const { before, change } = await trackedApp(kube, namespace);
    const [a, b] = await twoReplicas(kube, namespace);
    expect(await waitForLeader([a, b])).toBe(a);
    // Hand the Lease to b behind a's back: a learns it at its next renewal and steps down.
    const coordination = kube.kc.makeApiClient(CoordinationV1Api);
    const name = `${releases[0]?.fullname}-leader`;
    await waitFor(
      async () => {
        const lease = await coordination.readNamespacedLease({ name, namespace });
        try {
          await coordination.replaceNamespacedLease({
            name,
            namespace,
            body: { ...lease, spec: { ...lease.spec, holderIdentity: 'replica-b' } },
          });
          return true;
        } catch (err) {
          // a renewed the Lease between our read and write (409): read it again.
          if ((err as { code?: number }).code === 409) return pending('conflict');
          throw err;
        }
      },
      { describe: 'the Lease handed to b', interval: 50 },
    );
    await a.svc.waitForLog('a demoted', (l) => l.msg === 'stopped leading; no longer acting');
    expect(await waitForLeader([a, b])).toBe(b);
    const tracker = await PodTracker.start(kube, namespace, 'web');

    expect((await notify(a, namespace, 'Running', '2026-12-03T11:00:00Z')).status).toBe(202);
    await b.svc.waitForLog('b takes it', (l) => l.msg === 'Argo CD notification taken from the inbox');
    await change('2');
    await heldBy(b);
    expect((await notify(a, namespace, 'Succeeded', '2026-12-03T11:00:00Z')).status).toBe(202);
    await waitFor(() => b.svc.logs.some((l) => l.msg === 'reload complete') || pending('no reload yet'), {
      describe: 'b completes the reload',
      timeout: 60_000,
    });
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    tracker.stop();
    expect(tracker.newSince(before), 'each pod replaced once').toHaveLength(2);
    expect(a.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    expect(nonLeaderWrites([a, b])).toEqual([]);
  });

  it('a notification sent during a failover is kept for the next leader', async ({ kube, namespace }) => {
    const { before, change } = await trackedApp(kube, namespace);
    const [a, b] = await twoReplicas(kube, namespace);
    expect(await waitForLeader([a, b])).toBe(a);
    const tracker = await PodTracker.start(kube, namespace, 'web');

    expect((await notify(a, namespace, 'Running', '2026-12-03T12:00:00Z')).status).toBe(202);
    await change('2');
    await heldBy(a);
    await a.svc.kill();
    // b does not lead yet (a's lease has not expired): it must keep the end of the sync for itself.
    const end = await notify(b, namespace, 'Succeeded', '2026-12-03T12:00:00Z');
    expect(end.status).toBe(202);
    expect(b.svc.logs.some((l) => l.msg === 'ready')).toBe(false);

    await b.svc.waitForLog('b leads', (l) => l.msg === 'ready', 30_000);
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    await waitFor(
      () =>
        b.svc.logs.some((l) => l.msg === 'Argo CD notification taken from the inbox') || pending('not yet'),
      { describe: 'b takes the recorded end of the sync' },
    );
    tracker.stop();
    expect(tracker.newSince(before), 'each pod replaced once').toHaveLength(2);
    expect(nonLeaderWrites([a, b])).toEqual([]);
  });
});
