// When a reload may start: maintenance windows (gitops-reloader.io/restart-window) and Reloader's
// pause-period read as a batch window, against the real control plane. The window test uses a window
// that opens at the next whole minute, and waits for Events and pods, never for the clock.
import { afterEach, describe, expect, inject } from 'vitest';
import { plan } from '../../service/plan-command.ts';
import { idle } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

async function setCm(kube: Kube, namespace: string, value: string) {
  await kube.core.replaceNamespacedConfigMap({
    name: 'app',
    namespace,
    body: configMap('app', { k: value }),
  });
}

/**
 * Pods the Deployment's ReplicaSet has created, by its SuccessfulCreate Events: a pod recycled twice
 * would show as one more. (Events, not a pod watch: the client's watch gives up after 30 s idle, and
 * this test waits longer than that for its window.)
 */
async function podsCreated(kube: Kube, namespace: string): Promise<number> {
  const list = await kube.core.listNamespacedEvent({ namespace });
  return list.items
    .filter((e) => e.reason === 'SuccessfulCreate' && e.involvedObject.kind === 'ReplicaSet')
    .reduce((n, e) => n + (e.count ?? 1), 0);
}

/** Names of the pods the ReplicaSets created (their SuccessfulCreate Events say "Created pod: NAME"). */
async function podsCreatedNames(kube: Kube, namespace: string): Promise<Set<string>> {
  const list = await kube.core.listNamespacedEvent({ namespace });
  return new Set(
    list.items
      .filter((e) => e.reason === 'SuccessfulCreate' && e.involvedObject.kind === 'ReplicaSet')
      .map((e) => /Created pod: (\S+)/.exec(e.message ?? '')?.[1] ?? ''),
  );
}

const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);

/** The ledger's stored value for a workload in the release namespace (here, the test namespace). */
async function ledgerValue(
  kube: Kube,
  namespace: string,
  id: string,
): Promise<Record<string, unknown> | undefined> {
  const key = id.replaceAll('/', '_2F');
  const shards = await kube.core.listNamespacedConfigMap({
    namespace,
    labelSelector: 'app.kubernetes.io/component=ledger',
  });
  for (const cm of shards.items) {
    const v = cm.data?.[key];
    if (v) return JSON.parse(v) as Record<string, unknown>;
  }
  return undefined;
}

describe('maintenance windows and batch windows', () => {
  it('holds a change outside the window in the ledger, across a restart, and reloads once when it opens', async ({
    kube,
    namespace,
  }) => {
    // A window that opens at a whole minute at least 30 s away, so the hold is observable first.
    const opensAt = Math.ceil((Date.now() + 30_000) / 60_000) * 60_000;
    const window = `${hhmm(opensAt)}-${hhmm(opensAt + 10 * 60_000)} UTC`;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        annotations: { ...AUTO, 'gitops-reloader.io/restart-window': window },
        container: USES,
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const key = await hashKeyFile();
    const first = startService(serviceArgs(namespace, key, ['--debounce=0s']));
    await first.waitForLog('ready', (l) => l.msg === 'ready');
    expect(await podsCreated(kube, namespace)).toBe(2);

    await setCm(kube, namespace, '2');
    const deferred = await waitForEvent(kube, namespace, 'ReloadDeferred', 'web');
    expect(deferred.message).toContain(`reload held until ${new Date(opensAt).toISOString()}`);
    expect(deferred.message).toContain('ConfigMap/app changed');
    const held = await ledgerValue(kube, namespace, `Deployment/${namespace}/web`);
    expect(held?.p).toMatchObject({ ch: [`ConfigMap/${namespace}/app`] });

    // `plan` says the same, without writing anything.
    let out = '';
    await plan(
      [`--kubeconfig=${inject('kubeconfig')}`, `--namespace=${namespace}`, '--configmap=app'],
      {},
      (s) => {
        out += s;
      },
    );
    expect(out).toMatch(new RegExp(`web +restart .*held until ${new Date(opensAt).toISOString()}`));

    // A crash while held: the next process finds the held reload in the ledger and holds it too.
    await first.kill();
    const second = startService(serviceArgs(namespace, key, ['--debounce=0s']));
    await second.waitForLog(
      'held again after the restart',
      (l) => l.msg === 'reload held until its window opens',
    );
    expect(Date.now()).toBeLessThan(opensAt);
    expect(await podsCreated(kube, namespace)).toBe(2);
    // Another change while held joins the same reload.
    await setCm(kube, namespace, '3');

    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'web', 120_000);
    expect(new Date(reloaded.firstTimestamp ?? 0).getTime()).toBeGreaterThanOrEqual(opensAt);
    const after = await waitAllReplaced(kube, namespace, 'web', before, 2);
    // Each pod replaced once: a replacement the ReplicaSet created, or a surge pod it adopted (ADR 0019;
    // named as the ReplicaSet's own pods, so told apart by the ReplicaSet's SuccessfulCreate Events).
    const createdByReplicaSet = await podsCreatedNames(kube, namespace);
    const adopted = after.filter((p) => !createdByReplicaSet.has(p.name)).length;
    expect((await podsCreated(kube, namespace)) + adopted).toBe(4);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
    const done = await ledgerValue(kube, namespace, `Deployment/${namespace}/web`);
    expect(done?.p).toBeUndefined();
  });

  it('reads pause-period as a trailing batch window: two changes 5 s apart roll out once, after the window (issue 37)', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: { ...AUTO, 'deployment.reloader.stakater.com/pause-period': '12s' },
        container: USES,
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const mapped = await waitForEvent(kube, namespace, 'ReloadAnnotationMapped', 'web');
    expect(mapped.message).toMatch(/pause-period=12s is read as a batch window/);
    const generation = (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata
      ?.generation;

    // The first change waits for the window; the second, 5 s later (as Reloader's users make them),
    // joins it.
    await setCm(kube, namespace, '2');
    const opened = await svc.waitForLog(
      'the batch window opened',
      (l) => l.msg === 'reload waits for its batch window (pause-period)',
    );
    await waitFor(() => (Date.now() - Date.parse(opened.time as string) >= 5_000 ? true : pending('5 s')), {
      describe: 'the second change 5 s after the first',
      timeout: 10_000,
    });
    await setCm(kube, namespace, '3');
    await svc.waitForLog(
      'the change joined',
      (l) => l.msg === 'change joins the open batch window (pause-period)',
    );
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);

    const started = await svc.waitForLog('the reload', (l) => l.msg === 'reload started', 60_000);
    expect(Date.parse(started.time as string)).toBeGreaterThanOrEqual(Date.parse(opened.until as string));
    const after = await waitAllReplaced(kube, namespace, 'web', before, 1);
    await svc.waitForLog('reload complete', (l) => l.msg === 'reload complete');
    // One rollout for both changes: nothing more under way, one reload started, its pod still there.
    await idle(svc, `Deployment/${namespace}/web`);
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    expect((await waitReadyPods(kube, namespace, 'web', 1)).map((p) => p.uid)).toEqual(
      after.map((p) => p.uid),
    );
    // Said once; the Deployment was never paused or otherwise written.
    expect(await events(kube, namespace, 'ReloadAnnotationMapped', 'web')).toHaveLength(1);
    const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(d.metadata?.generation).toBe(generation);
    expect(d.spec?.paused).toBeFalsy();
  });
});
