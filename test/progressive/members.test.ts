// Every wave member has a deadline (issue 34, finding 2), on the real control plane: a good shared
// change must not wait for ever behind one first-wave member that never stalls. A CronJob under
// `concurrencyPolicy: Forbid` whose Job runs on (kwok holds its pod) answers "waiting" on every try;
// a Deployment whose surge pod a ResourceQuota refuses fails within a second on every try. Before
// the fix neither was ever judged: the member stayed running and every other reader waited (`why:
// wave`), with no halt, no Event, no alert. Now the first is excused at once and the second at
// --reload-deadline after its admission; the next workload takes the place, and the change reaches
// every other reader. Measured: 37 s.
import { SchedulingV1Api, type V1CronJob } from '@kubernetes/client-node';
import { afterEach, describe, expect, onTestFinished } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, type PodView, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const REPLICAS = 2;
const READERS = ['b-api', 'c-api'];
const envFrom = [{ configMapRef: { name: 'shared' } }];

/** The shared ConfigMap and the healthy readers, Ready. */
async function readers(kube: Kube, namespace: string): Promise<Map<string, PodView[]>> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
  for (const app of READERS)
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment(app, { replicas: REPLICAS, annotations: AUTO, container: { envFrom } }),
    });
  const before = new Map<string, PodView[]>();
  for (const app of READERS) before.set(app, await waitReadyPods(kube, namespace, app, REPLICAS));
  return before;
}

function start(namespace: string, key: string): RunningService {
  return startService(
    serviceArgs(namespace, key, ['--debounce=500ms', '--progressive-gather=2s', '--reload-deadline=8s']),
  );
}

/** A good change: the readers all reload once, and nothing is halted. */
async function goodChangeReachesReaders(
  kube: Kube,
  namespace: string,
  svc: RunningService,
  before: Map<string, PodView[]>,
) {
  for (const app of READERS) await waitAllReplaced(kube, namespace, app, before.get(app) ?? [], REPLICAS);
  for (const app of READERS) {
    await waitForEvent(kube, namespace, 'Reloaded', app);
    expect(await events(kube, namespace, 'Reloaded', app)).toHaveLength(1);
  }
  expect(await events(kube, namespace, 'ReloadHalted')).toEqual([]);
  const started = svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload);
  expect(started.filter((w) => w !== undefined && READERS.includes(String(w).split('/')[1] ?? ''))).toEqual(
    READERS.map((r) => `Deployment/${r}`),
  );
}

describe('every wave member has a deadline', () => {
  it('a CronJob under Forbid whose Job runs on is excused at once: the change reaches the other readers', async ({
    kube,
    namespace,
  }) => {
    const before = await readers(kube, namespace);
    const pod = (annotations?: Record<string, string>) => ({
      metadata: annotations ? { annotations } : {},
      spec: {
        restartPolicy: 'Never',
        containers: [{ name: 'task', image: 'registry.invalid/t:1', envFrom }],
      },
    });
    const cj: V1CronJob = await kube.batch.createNamespacedCronJob({
      namespace,
      body: {
        metadata: { name: 'a-report', annotations: AUTO },
        spec: {
          // Once a year at a time no test runs: the only Jobs are the test's and the reload's.
          schedule: '0 0 1 1 *',
          concurrencyPolicy: 'Forbid',
          jobTemplate: { spec: { backoffLimit: 0, template: pod() } },
        },
      },
    });
    // Its Job, as the CronJob controller would run it, kept running by kwok (for hours, in life).
    await kube.batch.createNamespacedJob({
      namespace,
      body: {
        metadata: {
          name: 'a-report-running',
          ownerReferences: [
            {
              apiVersion: 'batch/v1',
              kind: 'CronJob',
              name: 'a-report',
              uid: cj.metadata?.uid as string,
              controller: true,
            },
          ],
        },
        spec: { backoffLimit: 0, template: pod({ 'kwok.gitops-reloader.io/hold': 'true' }) },
      },
    });
    await waitFor(
      async () => {
        const pods = await kube.core.listNamespacedPod({
          namespace,
          labelSelector: 'batch.kubernetes.io/job-name=a-report-running',
        });
        const phases = pods.items.map((p) => p.status?.phase);
        return phases.includes('Running') ? true : pending(phases);
      },
      { describe: 'a running pod of the CronJob’s Job', timeout: 30_000 },
    );
    const svc = start(namespace, await hashKeyFile());
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await kube.core.replaceNamespacedConfigMap({
      name: 'shared',
      namespace,
      body: configMap('shared', { v: '2' }),
    });

    const deferred = await waitForEvent(kube, namespace, 'ReloadDeferred', 'a-report');
    expect(deferred.message).toMatch(/concurrencyPolicy is Forbid/);
    await svc.waitForLog(
      'the CronJob excused',
      (l) =>
        l.msg === 'progressive reload: it waits for something else; not judged now, and it holds no wave' &&
        l.workload === 'CronJob/a-report',
    );
    await goodChangeReachesReaders(kube, namespace, svc, before);
  });

  it('a Deployment whose surge pods a ResourceQuota refuses is judged at --reload-deadline: healthy, it is excused, and the change reaches the other readers', async ({
    kube,
    namespace,
  }) => {
    const before = await readers(kube, namespace);
    // A quota on this Deployment's pods alone (a PriorityClass scope), full: a surge pod is refused.
    const scheduling = kube.kc.makeApiClient(SchedulingV1Api);
    const pc = `gr-quota-${namespace}`;
    await scheduling.createPriorityClass({ body: { metadata: { name: pc }, value: 1000 } });
    onTestFinished(async () => {
      await scheduling.deletePriorityClass({ name: pc });
    });
    const quoted = deployment('a-quota', { replicas: REPLICAS, annotations: AUTO, container: { envFrom } });
    if (quoted.spec?.template.spec) quoted.spec.template.spec.priorityClassName = pc;
    await kube.apps.createNamespacedDeployment({ namespace, body: quoted });
    const quotaPods = await waitReadyPods(kube, namespace, 'a-quota', REPLICAS);
    await kube.core.createNamespacedResourceQuota({
      namespace,
      body: {
        metadata: { name: 'a-quota-pods' },
        spec: {
          hard: { pods: String(REPLICAS) },
          scopeSelector: { matchExpressions: [{ scopeName: 'PriorityClass', operator: 'In', values: [pc] }] },
        },
      },
    });
    await waitFor(
      async () => {
        const q = await kube.core.readNamespacedResourceQuota({ name: 'a-quota-pods', namespace });
        return q.status?.used?.pods === String(REPLICAS) ? true : pending(q.status);
      },
      { describe: 'the quota counting the pods', timeout: 30_000 },
    );
    const svc = start(namespace, await hashKeyFile());
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await kube.core.replaceNamespacedConfigMap({
      name: 'shared',
      namespace,
      body: configMap('shared', { v: '2' }),
    });

    const failed = await waitForEvent(kube, namespace, 'ReloadFailed', 'a-quota');
    expect(failed.message).toMatch(/exceeded quota/);
    await svc.waitForLog(
      'a-quota judged and excused',
      (l) =>
        l.msg ===
          'progressive reload: no progress, but its pods are healthy; not a failed wave, and it holds no wave' &&
        l.workload === 'Deployment/a-quota',
      60_000,
    );
    await goodChangeReachesReaders(kube, namespace, svc, before);
    // Its own pods are untouched: the quota let nothing through.
    expect((await waitReadyPods(kube, namespace, 'a-quota', REPLICAS)).map((p) => p.uid).sort()).toEqual(
      quotaPods.map((p) => p.uid).sort(),
    );
  });
});
