// Deleting a ConfigMap that workloads use (issue 20, finding 3), against the real control plane.
// A deletion reloads nothing by default (--reload-on-delete=false, Reloader's default). Whatever
// the flag, pods are never replaced while a config they need (not optional) is missing: the reload
// is held, with a ReloadHeld Warning Event naming the config, until the config exists again.
import type { V1Deployment } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, livePods, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };

async function serve(namespace: string, extra: string[] = []): Promise<RunningService> {
  const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', ...extra]));
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  return svc;
}

/** The service judged a change for this workload: it found nothing to do, held it, or started it. */
const judged = (svc: RunningService, workload: string, after = 0) =>
  svc.waitForLog(`a decision on ${workload}`, (l) => {
    if (l.workload !== workload || svc.logs.indexOf(l) < after) return false;
    return ['no reload needed', 'reload held: a config the pods need is missing', 'reload started'].includes(
      l.msg,
    );
  });

const uids = async (kube: Kube, namespace: string, app: string) =>
  (await livePods(kube, namespace, app)).map((p) => p.uid).sort();

function recreateStrategy(d: V1Deployment): V1Deployment {
  return { ...d, spec: { ...(d.spec as NonNullable<V1Deployment['spec']>), strategy: { type: 'Recreate' } } };
}

describe('a deleted config', () => {
  it('reloads nothing by default, and a re-created config with the content the pods run reloads nothing either', async ({
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
    await waitReadyPods(kube, namespace, 'web', 2);
    const before = await uids(kube, namespace, 'web');
    const svc = await serve(namespace);

    await kube.core.deleteNamespacedConfigMap({ name: 'app', namespace });
    const deleted = await judged(svc, 'Deployment/web');
    expect(deleted.msg).toBe('no reload needed');
    expect(deleted.deleted).toEqual([`ConfigMap/${namespace}/app`]);

    const mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    expect((await judged(svc, 'Deployment/web', mark)).msg).toBe('no reload needed');
    expect(await uids(kube, namespace, 'web')).toEqual(before);
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
  });

  it('with --reload-on-delete=true holds the reload of pods that need it, naming it, and reloads those that do not', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    for (const [name, optional] of [
      ['web', false],
      ['tolerant', true],
    ] as const) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(name, {
          annotations: AUTO,
          container: { envFrom: [{ configMapRef: { name: 'app', optional } }] },
        }),
      });
    }
    await waitReadyPods(kube, namespace, 'web', 1);
    const tolerant = await waitReadyPods(kube, namespace, 'tolerant', 1);
    const before = await uids(kube, namespace, 'web');
    const svc = await serve(namespace, ['--reload-on-delete=true']);

    await kube.core.deleteNamespacedConfigMap({ name: 'app', namespace });
    const held = await waitForEvent(kube, namespace, 'ReloadHeld', 'web');
    expect(held.type).toBe('Warning');
    expect(held.message).toContain('ConfigMap/app does not exist and the pods need it');
    // The optional reference starts without it: that reload runs.
    await waitForEvent(kube, namespace, 'Reloaded', 'tolerant');
    await waitAllReplaced(kube, namespace, 'tolerant', tolerant, 1);
    expect(await uids(kube, namespace, 'web')).toEqual(before);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toEqual([]);
    expect(svc.logs.some((l) => l.msg === 'reload started' && l.workload === 'Deployment/web')).toBe(false);

    // Back with other content: the held reload runs as usual.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '2' }) });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(
      kube,
      namespace,
      'web',
      before.map((uid) => ({ uid })),
      1,
    );
  });

  it('holds any reload while a config the pods need is missing, and runs it when the config is back', async ({
    kube,
    namespace,
  }) => {
    for (const n of ['app', 'other']) {
      await kube.core.createNamespacedConfigMap({ namespace, body: configMap(n, { k: '1' }) });
    }
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }, { configMapRef: { name: 'other' } }] },
      }),
    });
    await waitReadyPods(kube, namespace, 'web', 1);
    const before = await uids(kube, namespace, 'web');
    const svc = await serve(namespace);

    await kube.core.deleteNamespacedConfigMap({ name: 'app', namespace });
    await judged(svc, 'Deployment/web');
    await kube.core.replaceNamespacedConfigMap({
      name: 'other',
      namespace,
      body: configMap('other', { k: '2' }),
    });
    const held = await waitForEvent(kube, namespace, 'ReloadHeld', 'web');
    expect(held.message).toMatch(/^ConfigMap\/other changed; reload held: ConfigMap\/app does not exist/);
    expect(await uids(kube, namespace, 'web')).toEqual(before);

    // The same content as before: only the change to `other` is left to apply, and it is.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(reloaded.message).toMatch(/^ConfigMap\/other changed;/);
  });

  it('never evicts the one pod of a Recreate Deployment into a missing config', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: recreateStrategy(
        deployment('single', {
          annotations: AUTO,
          volumes: [{ name: 'conf', configMap: { name: 'app' } }],
          container: { volumeMounts: [{ name: 'conf', mountPath: '/etc/app' }] },
        }),
      ),
    });
    await waitReadyPods(kube, namespace, 'single', 1);
    const before = await uids(kube, namespace, 'single');
    const svc = await serve(namespace, ['--reload-on-delete=true']);

    await kube.core.deleteNamespacedConfigMap({ name: 'app', namespace });
    const decision = await judged(svc, 'Deployment/single');
    expect(decision.msg).toBe('reload held: a config the pods need is missing');
    await waitForEvent(kube, namespace, 'ReloadHeld', 'single');
    expect(await uids(kube, namespace, 'single')).toEqual(before);
  });

  it('with --resource-label-selector looks a needed config up by name before holding: one outside the selector exists', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: { ...configMap('app', { k: '1' }), metadata: { name: 'app', labels: { reload: 'yes' } } },
    });
    // Not labelled: never in the service's cache, yet it exists and the pods need it.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('plain', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }, { configMapRef: { name: 'plain' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    await serve(namespace, ['--resource-label-selector=reload=yes']);
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: { ...configMap('app', { k: '2' }), metadata: { name: 'app', labels: { reload: 'yes' } } },
    });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(kube, namespace, 'web', before, 1);
    expect(await events(kube, namespace, 'ReloadHeld', 'web')).toEqual([]);
  });
});
