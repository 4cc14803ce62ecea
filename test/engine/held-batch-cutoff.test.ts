// The cutoff of a reload planned by a batch that did not observe the change it reloads (core/batcher.ts
// batchCutoffMs), against the real control plane with the real service process. The unit tests of the
// rule are in service/core/batcher.test.ts; the engine simulation found it (seeds 7270, 8616).
import type { V1ConfigMap } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { effectiveCutoff } from '../../service/core/cutoff.ts';
import { it, type Kube } from '../support/kube.ts';
import { type PodView, waitReadyPods, waitRolledOut } from '../support/observe.ts';
import { hashKeyFile, killAll, type LogLine, serviceArgs, startService } from '../support/service.ts';
import { pastTheSecondOf, pending, waitFor } from '../support/wait-for.ts';
import { scaleUpOne } from '../support/web-app.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const hhmm = (ms: number) => new Date(ms).toISOString().slice(11, 16);

/** When the API server stamped an object's latest write (whole seconds, its clock). */
const writtenAt = (o: V1ConfigMap) =>
  Math.max(...(o.metadata?.managedFields ?? []).map((f) => new Date(f.time ?? 0).getTime()));

/** One sample of the service's /metrics, 0 when absent. */
async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(url)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

/**
 * web (two pods, reading app and db) with a restart window that is closed for hours. The web pods'
 * template carries `note` (changing it rolls the Deployment).
 */
const heldWeb = (closedFrom: number, note: string) =>
  deployment('web', {
    replicas: 2,
    annotations: {
      'reloader.stakater.com/auto': 'true',
      'gitops-reloader.io/restart-window': `${hhmm(closedFrom)}-${hhmm(closedFrom + 3_600_000)} UTC`,
    },
    podAnnotations: { 'example.com/note': note },
    container: { envFrom: ['app', 'db'].map((name) => ({ configMapRef: { name } })) },
  });

/**
 * app's data changes outside web's restart window: reload A is held (the ledger keeps the old digest).
 * `newer` then makes pods past A's cutoff: they read the new data. Then only an annotation of db,
 * another config web reads, is edited: its batch finds app's digest changed and plans the reload again,
 * though it observed only db. The window opens (its annotation goes) and the held reload runs, once.
 */
async function replannedWhileHeld(
  kube: Kube,
  namespace: string,
  shape: {
    /** Makes the pods past A's cutoff; resolves with all of web's pods then. */
    newer: (before: PodView[], body: (note: string) => ReturnType<typeof heldWeb>) => Promise<PodView[]>;
    /** What the reload must have kept and replaced. */
    expectPods: (p: { before: PodView[]; made: PodView[]; after: PodView[] }) => void;
    /** The config whose annotation is edited (data unchanged): db by default, or app itself. */
    edited?: 'app' | 'db';
  },
): Promise<void> {
  const closed = Date.now() + 6 * 3_600_000;
  const body = (note: string) => heldWeb(closed, note);
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('db', { u: 'x' }) });
  await kube.apps.createNamespacedDeployment({ namespace, body: body('1') });
  const before = await waitReadyPods(kube, namespace, 'web', 2);
  const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  const url = `${String(svc.logs.find((l) => l.msg === 'http listening')?.url)}/metrics`;
  const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
  const started = () => svc.logs.filter((l) => web(l) && l.msg === 'reload started');
  const seen = async (what: string, name: string, from: number) => {
    const line = await svc.waitForLog(
      what,
      (l: LogLine) =>
        svc.logs.indexOf(l) >= from &&
        l.msg === 'config changed' &&
        l.config === `ConfigMap/${namespace}/${name}`,
    );
    // Logged just after the service took the observation's time: no earlier than it.
    return Date.parse(String(line.time));
  };

  let mark = svc.logs.length;
  const written = await kube.core.replaceNamespacedConfigMap({
    name: 'app',
    namespace,
    body: configMap('app', { k: '2' }),
  });
  const dataSeen = await seen('the data change observed', 'app', mark);
  await svc.waitForLog('A held', (l) => web(l) && l.msg === 'reload held until its window opens');
  const planned = await metric(url, 'reloader_workqueue_adds_total');
  await pastTheSecondOf(dataSeen + 1000);
  const made = await shape.newer(before, body);

  mark = svc.logs.length;
  // An annotation the service reads on a config (the simulation's metadata edit), data unchanged.
  const edited = shape.edited ?? 'db';
  const data: Record<string, string> = edited === 'app' ? { k: '2' } : { u: 'x' };
  await kube.core.replaceNamespacedConfigMap({
    name: edited,
    namespace,
    body: configMap(edited, data, { 'argocd.argoproj.io/sync-wave': '1' }),
  });
  const editSeen = await seen('the edit observed', edited, mark);
  // Its batch planned the reload again (queued, and taken from the queue: held with the new plan).
  await waitFor(
    async () => {
      const adds = await metric(url, 'reloader_workqueue_adds_total');
      const depth = await metric(url, 'reloader_workqueue_depth');
      return adds > planned && depth === 0 ? true : pending({ adds, depth });
    },
    { describe: "the edit's batch planned and held", timeout: 20_000 },
  );
  expect(started()).toEqual([]);

  mark = svc.logs.length;
  await kube.apps.patchNamespacedDeployment({
    name: 'web',
    namespace,
    body: [{ op: 'remove', path: '/metadata/annotations/gitops-reloader.io~1restart-window' }],
  });
  const reload = await svc.waitForLog(
    'the reload started',
    (l) => svc.logs.indexOf(l) >= mark && web(l) && l.msg === 'reload started',
  );
  await svc.waitForLog('the reload complete', (l) => web(l) && l.msg === 'reload complete', 90_000);
  const after = await waitReadyPods(kube, namespace, 'web', made.length);
  shape.expectPods({ before, made, after });
  expect(started()).toHaveLength(1);
  // The cutoff is app's write's (the earlier bound of its change; A's too), before the edit's.
  const cutoff = Date.parse(String(reload.cutoff));
  expect(cutoff).toBe(effectiveCutoff(writtenAt(written)));
  expect(cutoff).toBeLessThanOrEqual(effectiveCutoff(dataSeen));
  expect(cutoff).toBeLessThan(effectiveCutoff(editSeen));
}

/** The pod scaled up after the change is kept; every pod from before the change is replaced. */
function keepsTheScaledUpPod({
  before,
  made,
  after,
}: {
  before: PodView[];
  made: PodView[];
  after: PodView[];
}) {
  const added = made.filter((p) => !before.some((q) => q.uid === p.uid));
  expect(added).toHaveLength(1);
  expect(after.map((p) => p.uid)).toContain(added[0]?.uid);
  expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
}

// Before the fix (607eb45) the replanned reload was dated by its batch's latest observation, the
// edit's, after the pods `newer` made, which were replaced needlessly once the window opened (I3).
describe('a batch that plans the reload of a held change it did not observe', () => {
  it('seeds 7270, 8616: dates it by the config write: a pod scaled up after it is kept, the older ones replaced', async ({
    kube,
    namespace,
  }) => {
    await replannedWhileHeld(kube, namespace, {
      newer: async (pods) => (await scaleUpOne(kube, namespace, pods)).scaled,
      expectPods: keepsTheScaledUpPod,
    });
  });

  it('a metadata edit of the changed config itself, in a later batch, does not date the change either', async ({
    kube,
    namespace,
  }) => {
    // The edit moves app's newest write past the pod scaled up after the data change: the write time
    // is no bound of the data change here, and the reload planned when the data change was seen is.
    await replannedWhileHeld(kube, namespace, {
      edited: 'app',
      newer: async (pods) => (await scaleUpOne(kube, namespace, pods)).scaled,
      expectPods: keepsTheScaledUpPod,
    });
  });

  it('seeds 7270, 8616: dates it by the config write: the pods a template rollout made after it are kept', async ({
    kube,
    namespace,
  }) => {
    // The task's own shape. Its pods are kept by a second rule too: a Deployment's pods of a template
    // rolled out after the config change count as new whatever the cutoff (strategies/template-change.ts),
    // so without the fix what fails here is the cutoff, not the pods (the scale-up above shows those).
    await replannedWhileHeld(kube, namespace, {
      newer: async (_pods, body) => {
        await kube.apps.replaceNamespacedDeployment({ name: 'web', namespace, body: body('2') });
        await waitRolledOut(kube, namespace, 'web', 2);
        return waitReadyPods(kube, namespace, 'web', 2);
      },
      expectPods: ({ before, made, after }) => {
        expect(made.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
        expect(after.map((p) => p.uid).sort()).toEqual(made.map((p) => p.uid).sort());
      },
    });
  });
});
