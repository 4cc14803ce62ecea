// CronJob and Job reloads against the real control plane, with kwok completing the Job pods and the
// real CronJob and Job controllers: a CronJob reload runs one Job from its jobTemplate (suspend and
// concurrencyPolicy honoured), an annotated Job is run again; neither the CronJob nor a Job template
// is ever written.
import type { V1CronJob, V1Job, V1Pod } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, waitForEvent } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const HOLD = { 'kwok.gitops-reloader.io/hold': 'true' };
const container = {
  name: 'task',
  image: 'registry.invalid/task:1',
  envFrom: [{ configMapRef: { name: 'app' } }],
};

function podTemplate(annotations?: Record<string, string>) {
  return {
    metadata: annotations ? { annotations } : {},
    spec: { restartPolicy: 'Never', containers: [container] },
  };
}

function cronJob(
  name: string,
  o: {
    annotations?: Record<string, string>;
    podAnnotations?: Record<string, string>;
    concurrencyPolicy?: string;
    suspend?: boolean;
  } = {},
): V1CronJob {
  return {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      // Once a year at a time no test runs: every Job here is made by the test or by a reload.
      schedule: '0 0 1 1 *',
      ...(o.concurrencyPolicy ? { concurrencyPolicy: o.concurrencyPolicy } : {}),
      ...(o.suspend ? { suspend: true } : {}),
      jobTemplate: {
        metadata: { labels: { batch: name } },
        spec: { backoffLimit: 0, template: podTemplate(o.podAnnotations) },
      },
    },
  };
}

async function jobs(kube: Kube, namespace: string): Promise<V1Job[]> {
  return (await kube.batch.listNamespacedJob({ namespace })).items.filter(
    (j) => !j.metadata?.deletionTimestamp,
  );
}

const finished = (j: V1Job) =>
  (j.status?.conditions ?? []).some(
    (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
  );

async function waitJobComplete(kube: Kube, namespace: string, name: string): Promise<V1Job> {
  return waitFor(
    async () => {
      const j = await kube.batch.readNamespacedJob({ name, namespace });
      return (j.status?.succeeded ?? 0) >= 1 && finished(j) ? j : pending(j.status);
    },
    { describe: `Job ${name} complete`, timeout: 60_000 },
  );
}

async function podsOf(kube: Kube, namespace: string, job: string): Promise<V1Pod[]> {
  return (
    await kube.core.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${job}` })
  ).items;
}

/** A Job of the CronJob, as its controller would run it, kept running by kwok until released. */
async function runningJobOf(kube: Kube, namespace: string, cj: V1CronJob, name: string): Promise<V1Job> {
  const job = await kube.batch.createNamespacedJob({
    namespace,
    body: {
      metadata: {
        name,
        ownerReferences: [
          {
            apiVersion: 'batch/v1',
            kind: 'CronJob',
            name: cj.metadata?.name as string,
            uid: cj.metadata?.uid as string,
            controller: true,
          },
        ],
      },
      spec: { backoffLimit: 0, template: podTemplate(HOLD) },
    },
  });
  await waitFor(
    async () => {
      const pods = await podsOf(kube, namespace, name);
      return pods.some((p) => p.status?.phase === 'Running')
        ? true
        : pending(pods.map((p) => p.status?.phase));
    },
    { describe: `a running pod of Job ${name}`, timeout: 60_000 },
  );
  return job;
}

async function start(kube: Kube, namespace: string, flags: string[] = []) {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  return async () => {
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', ...flags]));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    return svc;
  };
}

async function setCm(kube: Kube, namespace: string, value: string) {
  await kube.core.replaceNamespacedConfigMap({
    name: 'app',
    namespace,
    body: configMap('app', { k: value }),
  });
}

describe('CronJob reloads', () => {
  it('runs one Job from the jobTemplate per reload, owned by the CronJob, and never writes the CronJob', async ({
    kube,
    namespace,
  }) => {
    const serve = await start(kube, namespace);
    // Opted in on the pod template: the Jobs it creates carry the same annotations, and are still
    // not reloaded themselves (their CronJob is).
    const cj = await kube.batch.createNamespacedCronJob({
      namespace,
      body: cronJob('nightly', { podAnnotations: AUTO }),
    });
    await serve();
    await setCm(kube, namespace, '2');
    const first = await waitForEvent(kube, namespace, 'Reloaded', 'nightly');
    expect(first.involvedObject.kind).toBe('CronJob');
    const [job, ...more] = await jobs(kube, namespace);
    expect(more).toEqual([]);
    expect(first.message).toContain(`created Job ${job?.metadata?.name} from the CronJob's jobTemplate`);
    expect(job?.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'CronJob', name: 'nightly', uid: cj.metadata?.uid, controller: true }),
    ]);
    expect(job?.metadata?.annotations).toMatchObject({
      'cronjob.kubernetes.io/instantiate': 'manual',
      'gitops-reloader.io/reloaded-for': 'ConfigMap/app',
    });
    expect(job?.metadata?.labels).toMatchObject({ batch: 'nightly' });
    expect(job?.spec?.template.spec?.containers).toEqual([expect.objectContaining(container)]);
    expect(job?.spec?.template.metadata?.annotations).toEqual(AUTO);
    const done = await waitJobComplete(kube, namespace, job?.metadata?.name as string);

    // A second change: one more Job; the finished one is left as it is.
    await setCm(kube, namespace, '3');
    await waitFor(
      async () => {
        const all = await jobs(kube, namespace);
        return all.length === 2 ? all : pending(all.map((j) => j.metadata?.name));
      },
      { describe: 'a second Job', timeout: 60_000 },
    );
    await waitFor(
      async () =>
        (await events(kube, namespace, 'Reloaded', 'nightly')).length === 2 ? true : pending('1 Event'),
      { describe: 'a second Reloaded Event', timeout: 30_000 },
    );
    const again = await kube.batch.readNamespacedJob({ name: job?.metadata?.name as string, namespace });
    expect(again.metadata?.uid).toBe(done.metadata?.uid);
    const after = await kube.batch.readNamespacedCronJob({ name: 'nightly', namespace });
    expect(after.metadata?.generation).toBe(cj.metadata?.generation);
    expect(after.spec?.jobTemplate).toEqual(cj.spec?.jobTemplate);
  });

  it('creates no Job for a suspended CronJob, and says so', async ({ kube, namespace }) => {
    const serve = await start(kube, namespace);
    await kube.batch.createNamespacedCronJob({
      namespace,
      body: cronJob('paused', { annotations: AUTO, suspend: true }),
    });
    await serve();
    await setCm(kube, namespace, '2');
    const skipped = await waitForEvent(kube, namespace, 'ReloadSkipped', 'paused');
    expect(skipped.message).toMatch(/the CronJob is suspended, so no Job was created/);
    expect(await jobs(kube, namespace)).toEqual([]);
  });

  it("with --run-suspended-cronjobs runs a suspended CronJob's Job, as Reloader does", async ({
    kube,
    namespace,
  }) => {
    const serve = await start(kube, namespace, ['--run-suspended-cronjobs']);
    await kube.batch.createNamespacedCronJob({
      namespace,
      body: cronJob('paused', { annotations: AUTO, suspend: true }),
    });
    await serve();
    await setCm(kube, namespace, '2');
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'paused');
    expect(reloaded.message).toMatch(/the CronJob is suspended, run anyway/);
    const made = await jobs(kube, namespace);
    expect(made.map((j) => j.metadata?.ownerReferences?.[0]?.name)).toEqual(['paused']);
    // Still suspended: the CronJob itself is never written.
    expect((await kube.batch.readNamespacedCronJob({ name: 'paused', namespace })).spec?.suspend).toBe(true);
  });

  it('under Forbid waits for the running Job to end, then runs one', async ({ kube, namespace }) => {
    const serve = await start(kube, namespace);
    const cj = await kube.batch.createNamespacedCronJob({
      namespace,
      body: cronJob('report', { annotations: AUTO, concurrencyPolicy: 'Forbid' }),
    });
    await runningJobOf(kube, namespace, cj, 'report-running');
    await serve();
    await setCm(kube, namespace, '2');
    const deferred = await waitForEvent(kube, namespace, 'ReloadDeferred', 'report');
    expect(deferred.message).toMatch(
      /Job report-running of the CronJob is still running and its concurrencyPolicy is Forbid/,
    );
    expect((await jobs(kube, namespace)).map((j) => j.metadata?.name)).toEqual(['report-running']);

    // The running Job ends (kwok completes its pod once released).
    for (const p of await podsOf(kube, namespace, 'report-running')) {
      await kube.core.patchNamespacedPod({
        name: p.metadata?.name as string,
        namespace,
        body: [{ op: 'remove', path: '/metadata/annotations/kwok.gitops-reloader.io~1hold' }],
      });
    }
    const ended = await waitJobComplete(kube, namespace, 'report-running');
    await waitForEvent(kube, namespace, 'Reloaded', 'report');
    const created = (await jobs(kube, namespace)).filter((j) => j.metadata?.name !== 'report-running');
    expect(created).toHaveLength(1);
    expect(new Date(created[0]?.metadata?.creationTimestamp ?? 0).getTime()).toBeGreaterThanOrEqual(
      Math.floor(new Date(ended.status?.completionTime ?? 0).getTime() / 1000) * 1000,
    );
    await waitJobComplete(kube, namespace, created[0]?.metadata?.name as string);
  });

  it('under Replace deletes the running Job and runs one', async ({ kube, namespace }) => {
    const serve = await start(kube, namespace);
    const cj = await kube.batch.createNamespacedCronJob({
      namespace,
      body: cronJob('sync', { annotations: AUTO, concurrencyPolicy: 'Replace' }),
    });
    await runningJobOf(kube, namespace, cj, 'sync-running');
    await serve();
    await setCm(kube, namespace, '2');
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'sync');
    expect(reloaded.message).toMatch(/concurrencyPolicy Replace, replacing running Job sync-running/);
    await waitFor(
      async () => {
        const names = (await kube.batch.listNamespacedJob({ namespace })).items.map((j) => j.metadata?.name);
        return names.length === 1 && names[0] !== 'sync-running' ? names : pending(names);
      },
      { describe: 'the running Job gone and one new Job', timeout: 60_000 },
    );
  });
});

describe('Job reloads', () => {
  it('runs an annotated Job again with the same spec once the old one is gone; leaves others alone', async ({
    kube,
    namespace,
  }) => {
    const serve = await start(kube, namespace);
    const spec = { backoffLimit: 0, template: podTemplate() };
    const opted = await kube.batch.createNamespacedJob({
      namespace,
      body: { metadata: { name: 'migrate', annotations: AUTO, labels: { team: 'db' } }, spec },
    });
    const plain = await kube.batch.createNamespacedJob({
      namespace,
      body: { metadata: { name: 'plain' }, spec },
    });
    await waitJobComplete(kube, namespace, 'migrate');
    await waitJobComplete(kube, namespace, 'plain');
    const oldPods = new Set((await podsOf(kube, namespace, 'migrate')).map((p) => p.metadata?.uid));
    const svc = await serve();

    await setCm(kube, namespace, '2');
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'migrate');
    const job = await kube.batch.readNamespacedJob({ name: 'migrate', namespace });
    expect(job.metadata?.uid).not.toBe(opted.metadata?.uid);
    expect(reloaded.involvedObject.uid).toBe(job.metadata?.uid);
    expect(job.metadata?.labels).toMatchObject({ team: 'db' });
    expect(job.metadata?.annotations).toMatchObject({
      ...AUTO,
      'gitops-reloader.io/reloaded-for': 'ConfigMap/app',
    });
    expect(job.spec?.template.spec?.containers).toEqual(opted.spec?.template.spec?.containers);
    expect(job.spec?.backoffLimit).toBe(0);
    await waitJobComplete(kube, namespace, 'migrate');
    // Run again once: the recreated Job appearing mid-reload is not a change of its own.
    await svc.waitForLog('the reload recorded', (l) => l.msg === 'reload complete');
    expect(await events(kube, namespace, 'Reloaded', 'migrate')).toHaveLength(1);
    expect((await kube.batch.readNamespacedJob({ name: 'migrate', namespace })).metadata?.uid).toBe(
      job.metadata?.uid,
    );
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    const pods = await podsOf(kube, namespace, 'migrate');
    expect(pods.length).toBeGreaterThan(0);
    expect(pods.filter((p) => oldPods.has(p.metadata?.uid))).toEqual([]);
    // Not opted in: untouched.
    expect((await kube.batch.readNamespacedJob({ name: 'plain', namespace })).metadata?.uid).toBe(
      plain.metadata?.uid,
    );
  });
});
