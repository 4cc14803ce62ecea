// A Job reload cut between deleting the old Job and creating the new one (issue 20, finding 2): the
// Job's pods take long to stop (kwok's delete-after), and the service is killed mid-wait, or its
// reload deadline passes, while they do. The spec recorded before the delete is created exactly once,
// after the old Job is gone, and the record goes. Against the real control plane and Job controller.
import type { V1Job } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube, statusOf } from '../support/kube.ts';
import { waitForEvent } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
// The pod runs until the test ends, and its graceful deletion takes 15 s.
const SLOW_STOP = { 'kwok.gitops-reloader.io/hold': 'true', 'kwok.gitops-reloader.io/delete-after': '15s' };
const FAST_LEASE = ['--lease-duration=3s', '--lease-renew-deadline=2s', '--lease-retry-period=500ms'];

function job(podAnnotations: Record<string, string> = SLOW_STOP): V1Job {
  return {
    metadata: { name: 'migrate', annotations: AUTO, labels: { team: 'db' } },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: { annotations: podAnnotations },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'task',
              image: 'registry.invalid/task:1',
              envFrom: [{ configMapRef: { name: 'app' } }],
              env: [{ name: 'MODE', value: 'full' }],
            },
          ],
        },
      },
    },
  };
}

async function readJob(kube: Kube, namespace: string): Promise<V1Job | undefined> {
  try {
    return await kube.batch.readNamespacedJob({ name: 'migrate', namespace });
  } catch (err) {
    if (statusOf(err) === 404) return undefined;
    throw err;
  }
}

async function runningJob(kube: Kube, namespace: string, podAnnotations = SLOW_STOP): Promise<V1Job> {
  const created = await kube.batch.createNamespacedJob({ namespace, body: job(podAnnotations) });
  await waitFor(
    async () => {
      const pods = await kube.core.listNamespacedPod({
        namespace,
        labelSelector: 'batch.kubernetes.io/job-name=migrate',
      });
      return pods.items.some((p) => p.status?.phase === 'Running')
        ? true
        : pending(pods.items.map((p) => p.status?.phase));
    },
    { describe: 'the Job pod running', timeout: 60_000 },
  );
  return created;
}

const waitDeleting = (kube: Kube, namespace: string, uid: string) =>
  waitFor(
    async () => {
      const j = await readJob(kube, namespace);
      return j?.metadata?.uid === uid && j.metadata.deletionTimestamp ? j : pending(j?.metadata);
    },
    { describe: 'the old Job being deleted', timeout: 60_000 },
  );

const waitGone = (kube: Kube, namespace: string, uid: string) =>
  waitFor(
    async () => {
      const j = await readJob(kube, namespace);
      return j?.metadata?.uid !== uid ? true : pending(j.metadata);
    },
    { describe: 'the old Job gone', timeout: 90_000 },
  );

const waitNewJob = (kube: Kube, namespace: string, oldUid: string) =>
  waitFor(
    async () => {
      const j = await readJob(kube, namespace);
      return j && j.metadata?.uid !== oldUid ? j : pending(j?.metadata?.uid);
    },
    { describe: 'a new Job migrate', timeout: 90_000 },
  );

const records = async (kube: Kube, namespace: string) =>
  (
    await kube.core.listNamespacedConfigMap({
      namespace,
      labelSelector: 'app.kubernetes.io/component=job-spec',
    })
  ).items;

async function expectOriginalSpec(made: V1Job, original: V1Job, podAnnotations = SLOW_STOP) {
  expect(made.metadata?.labels).toMatchObject({ team: 'db' });
  expect(made.metadata?.annotations).toMatchObject({
    ...AUTO,
    'gitops-reloader.io/reloaded-for': 'ConfigMap/app',
  });
  expect(made.spec?.template.spec?.containers).toEqual(original.spec?.template.spec?.containers);
  expect(made.spec?.template.metadata?.annotations).toMatchObject(podAnnotations);
  expect(made.spec?.backoffLimit).toBe(0);
}

/** The record went, and once the service stopped the Job made is still the Job, not deleted for a second run. */
async function expectExactlyOne(kube: Kube, namespace: string, svc: RunningService, made: V1Job) {
  await waitFor(async () => ((await records(kube, namespace)).length === 0 ? true : pending('a record')), {
    describe: 'the record removed',
  });
  await svc.stop();
  const after = await readJob(kube, namespace);
  expect(after?.metadata?.uid).toBe(made.metadata?.uid);
  expect(after?.metadata?.deletionTimestamp).toBeUndefined();
}

describe('a Job reload cut mid-wait', () => {
  it('is finished by the next process after a SIGKILL while the old Job was still stopping: exactly one new Job, with the original spec', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const original = await runningJob(kube, namespace);
    const oldUid = original.metadata?.uid as string;
    const key = await hashKeyFile();
    const first = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
    await first.waitForLog('ready', (l) => l.msg === 'ready');

    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitDeleting(kube, namespace, oldUid);
    await first.kill();
    // The old Job finishes going while no service runs: only the record knows what to create.
    await waitGone(kube, namespace, oldUid);
    expect(await readJob(kube, namespace)).toBeUndefined();

    const second = startService(serviceArgs(namespace, key, ['--debounce=0s', ...FAST_LEASE]));
    const made = await waitNewJob(kube, namespace, oldUid);
    await expectOriginalSpec(made, original);
    const event = await waitForEvent(kube, namespace, 'Reloaded', 'migrate');
    expect(event.involvedObject.uid).toBe(made.metadata?.uid);
    await expectExactlyOne(kube, namespace, second, made);
  });

  it('is finished once the old Job is gone when the reload deadline cut the wait', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    // Attempts wait 3 s each, retried after 2, 5 and 15 s: they wait at about 0-3, 5-8, 13-16 and
    // 31-34 s. The old Job goes at about 20 s, while none waits, so no attempt sees it go.
    const slower = { ...SLOW_STOP, 'kwok.gitops-reloader.io/delete-after': '20s' };
    const original = await runningJob(kube, namespace, slower);
    const oldUid = original.metadata?.uid as string;
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--reload-deadline=3s']),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await svc.waitForLog('the deadline', (l) => l.msg === 'reload deadline passed; slot released, re-queued');
    const made = await waitNewJob(kube, namespace, oldUid);
    await expectOriginalSpec(made, original, slower);
    await expectExactlyOne(kube, namespace, svc, made);
  });
});
