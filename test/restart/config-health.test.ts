// The harness the progressive-reload tests stand on (test/support/app-health.ts): pods created while
// their ConfigMap holds a bad value start but never become Ready, as an app that reads its config at
// start; pods created before, or after the fix, are Ready. Real admission, real kwok, no service.
import { describe, expect, onTestFinished } from 'vitest';
import {
  type AppHealth,
  health,
  podHealth,
  readsConfigAtStart,
  UNREADY,
  waitStarted,
} from '../support/app-health.ts';
import { it, type Kube } from '../support/kube.ts';
import { waitReadyPods } from '../support/observe.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const READS = { key: 'reads-config', value: 'shared' };

async function setConfig(kube: Kube, namespace: string, value: string) {
  await kube.core.replaceNamespacedConfigMap({
    name: 'shared',
    namespace,
    body: configMap('shared', { health: value }),
  });
}

async function install(kube: Kube, namespace: string): Promise<AppHealth> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { health: 'good' }) });
  const h = await readsConfigAtStart(kube, namespace, {
    config: 'shared',
    key: 'health',
    bad: 'bad',
    podLabel: READS,
  });
  onTestFinished(h.remove);
  return h;
}

/** Deletes `pod` and returns the name of the live pod of `app` that is not among `others`. */
async function replace(kube: Kube, namespace: string, app: string, pod: string, others: string[]) {
  await kube.core.deleteNamespacedPod({ name: pod, namespace });
  return waitFor(
    async () => {
      const pods = await podHealth(kube, namespace, `app=${app}`);
      const fresh = pods.filter((p) => p.name !== pod && !others.includes(p.name));
      return fresh.length === 1 ? (fresh[0]?.name as string) : pending(pods);
    },
    { describe: `a replacement for ${pod}`, timeout: 30_000 },
  );
}

async function readyReplicas(kube: Kube, namespace: string, name: string, want: number) {
  return waitFor(
    async () => {
      const s = (await kube.apps.readNamespacedDeployment({ name, namespace })).status;
      return (s?.readyReplicas ?? 0) === want && s?.replicas === 3 ? s : pending(s);
    },
    { describe: `Deployment ${name} with ${want} ready replicas`, timeout: 30_000 },
  );
}

describe('an app that reads its config at start (test harness)', () => {
  it('fails readiness only in pods created while the config is bad', async ({ kube, namespace }) => {
    const h = await install(kube, namespace);
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', { replicas: 3, labels: { [READS.key]: READS.value } }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 3);
    await readyReplicas(kube, namespace, 'web', 3);

    await setConfig(kube, namespace, 'bad');
    await h.seesCurrentConfig();
    const [first, second, third] = before.map((p) => p.name) as [string, string, string];
    const bad = await replace(kube, namespace, 'web', first, [second, third]);
    const started = await waitStarted(kube, namespace, bad);
    expect(started.metadata?.annotations?.[UNREADY]).toBe('true');
    expect(health(started)).toBe('unready');
    expect(started.status?.containerStatuses?.map((c) => [c.started, c.ready, c.restartCount])).toEqual([
      [true, false, 0],
    ]);
    // The pods created before the change are untouched by it.
    expect(await podHealth(kube, namespace, 'app=web')).toEqual(
      expect.arrayContaining([
        { name: second, health: 'ready' },
        { name: third, health: 'ready' },
        { name: bad, health: 'unready' },
      ]),
    );
    await readyReplicas(kube, namespace, 'web', 2);

    // Not Ready for good, not just late: a pod created after it (without the label, so unaffected by
    // the bad value) goes through kwok to Ready, and the bad one is still where it was.
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('other') });
    const [other] = await waitReadyPods(kube, namespace, 'other', 1);
    expect(other?.createdAt).toBeGreaterThanOrEqual(
      new Date(started.metadata?.creationTimestamp ?? 0).getTime(),
    );
    expect(health(await kube.core.readNamespacedPod({ name: bad, namespace }))).toBe('unready');
    expect((await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).status?.readyReplicas).toBe(
      2,
    );

    // The fix: a pod created after it is Ready again.
    await setConfig(kube, namespace, 'good');
    await h.seesCurrentConfig();
    const fixed = await replace(kube, namespace, 'web', bad, [second, third]);
    const after = await waitStarted(kube, namespace, fixed);
    expect(after.metadata?.annotations?.[UNREADY]).toBeUndefined();
    expect(health(after)).toBe('ready');
    await readyReplicas(kube, namespace, 'web', 3);
  });

  it('leaves pods without the label alone while the config is bad', async ({ kube, namespace }) => {
    const h = await install(kube, namespace);
    await setConfig(kube, namespace, 'bad');
    await h.seesCurrentConfig();
    const pod = (name: string, labels: Record<string, string>) => ({
      metadata: { name, labels },
      spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    });
    await kube.core.createNamespacedPod({ namespace, body: pod('unlabelled', { app: 'x' }) });
    await kube.core.createNamespacedPod({ namespace, body: pod('labelled', { [READS.key]: READS.value }) });
    const unlabelled = await waitStarted(kube, namespace, 'unlabelled');
    const labelled = await waitStarted(kube, namespace, 'labelled');
    expect(unlabelled.metadata?.annotations?.[UNREADY]).toBeUndefined();
    expect(health(unlabelled)).toBe('ready');
    expect(health(labelled)).toBe('unready');
  });
});
