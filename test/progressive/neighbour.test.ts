// The stuck neighbour (issue 34, finding 1), on the real control plane: 6 Deployments read one
// ConfigMap, and the first in line (`a-api`) already has every pod not Ready, as a crash-looping app
// has (kwok's pod-unready stage, test/cluster/kwok/stages.yaml). A good change of the ConfigMap must
// not be judged by `a-api`'s old fault: `a-api` is excused when the change reaches it (the status
// says why), the next workload takes its place in the first wave, and the change reaches the 5
// healthy ones with no ReloadHalted Warning. On main before the fix the change was halted at
// `a-api` and none of the 5 was reloaded. Measured: 14 s.
import { afterEach, describe, expect, onTestFinished } from 'vitest';
import type { ReloadStatus } from '../../service/engine/status.ts';
import { podHealth } from '../support/app-health.ts';
import { it } from '../support/kube.ts';
import { events, type livePods, PodTracker, waitAllReplaced, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const REPLICAS = 2;
const STUCK = 'a-api';
const HEALTHY = ['b-api', 'c-api', 'd-api', 'e-api', 'f-api'];

describe('progressive reloads judge only what the change did', () => {
  it('a good shared change reaches every healthy reader when the first in line was already not Ready: it is excused, not blamed', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    for (const app of [STUCK, ...HEALTHY])
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(app, {
          replicas: REPLICAS,
          annotations: { 'reloader.stakater.com/auto': 'true' },
          // A crash loop from before the change: its pods run and never pass readiness.
          ...(app === STUCK ? { podAnnotations: { 'kwok.gitops-reloader.io/unready': 'true' } } : {}),
          container: { envFrom: [{ configMapRef: { name: 'shared' } }] },
        }),
      });
    const before = new Map<string, Awaited<ReturnType<typeof livePods>>>();
    for (const app of HEALTHY) before.set(app, await waitReadyPods(kube, namespace, app, REPLICAS));
    // The stuck one: both pods started and not Ready, and its Deployment's status says so.
    await waitFor(
      async () => {
        const pods = await podHealth(kube, namespace, `app=${STUCK}`);
        const d = await kube.apps.readNamespacedDeployment({ name: STUCK, namespace });
        const stuck = pods.length === REPLICAS && pods.every((p) => p.health === 'unready');
        return stuck && d.status?.replicas === REPLICAS && (d.status.readyReplicas ?? 0) === 0
          ? true
          : pending({ pods, status: d.status });
      },
      { describe: `${STUCK} running and not Ready`, timeout: 30_000 },
    );
    const trackers = new Map<string, PodTracker>();
    for (const app of HEALTHY) trackers.set(app, await PodTracker.start(kube, namespace, app));
    onTestFinished(() => {
      for (const t of trackers.values()) t.stop();
    });

    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=500ms',
        '--progressive-gather=2s',
        '--progressive-settle=3s',
        '--reload-deadline=5s',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const url = `${(await svc.waitForLog('status url', (l) => l.msg === 'status listening')).url}/status`;

    // A good change: every pod created from now on is healthy (a-api's were not, before it).
    await kube.core.replaceNamespacedConfigMap({
      name: 'shared',
      namespace,
      body: configMap('shared', { v: '2' }),
    });
    const excused = await svc.waitForLog(
      `${STUCK} not judged`,
      (l) =>
        l.msg ===
          'progressive reload: not judged for this change; the next workload takes its place in the wave' &&
        l.workload === `Deployment/${STUCK}`,
    );
    expect(excused.why).toBe(`${REPLICAS} of ${REPLICAS} pods were not Ready before the change reached it`);
    // The status says why while the change is under way.
    const status = (await (await fetch(url)).json()) as ReloadStatus;
    expect(status.excused).toEqual([
      expect.objectContaining({
        workload: `Deployment/${namespace}/${STUCK}`,
        config: `ConfigMap/${namespace}/shared`,
        why: excused.why,
      }),
    ]);

    // The change reaches every healthy reader, each once, and ends: no halt.
    for (const app of HEALTHY) await waitAllReplaced(kube, namespace, app, before.get(app) ?? [], REPLICAS);
    await svc.waitForLog(
      'the change complete',
      (l) => l.msg === 'progressive reload: the change reached every workload that reads it',
      60_000,
    );
    expect(await events(kube, namespace, 'ReloadHalted')).toEqual([]);
    for (const app of HEALTHY) {
      expect({ app, replacements: trackers.get(app)?.newSince(before.get(app) ?? []).length }).toEqual({
        app,
        replacements: REPLICAS,
      });
      expect(await events(kube, namespace, 'Reloaded', app)).toHaveLength(1);
    }
    // b-api, the next in line, took a-api's place in the first wave: it started before the others.
    const started = svc.logs
      .filter((l) => l.msg === 'reload started')
      .map((l) => String(l.workload).split('/')[1]);
    expect(started.filter((w) => w !== STUCK)[0]).toBe('b-api');
  });
});
