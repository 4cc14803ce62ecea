// A defect the engine simulation (test/sim) found, reproduced with the real Argo CD of test/cluster:
// seed 2231, a batch of something else rolled out a config change the Argo CD gate was holding while
// its sync ran (its unit test is in service/reconciler.test.ts); seeds 47 and 23837, changes a new
// term finds while a sync runs.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { newestWrite } from '../../../service/core/catch-up.ts';
import { ArgoApp, GitRepo, type Manifest, startReloader, toFiles } from '../../support/argocd.ts';
import { it, type Kube } from '../../support/kube.ts';
import { ledgerEntry } from '../../support/ledger.ts';
import { PodTracker, waitReadyPods } from '../../support/observe.ts';
import { hashKeyFile } from '../../support/service.ts';
import { pastTheSecondOf, pending, waitFor } from '../../support/wait-for.ts';
import { configMap } from '../../support/workloads.ts';
import { cm, postSyncHook, web } from '../fixtures.ts';

/** A PostSync hook whose pod runs until the test lets it complete: the sync runs as long as the test needs. */
function heldHook(): Manifest {
  const hook = postSyncHook({ fail: false }) as Manifest & {
    spec: { template: { metadata: Record<string, unknown> } };
  };
  hook.spec.template.metadata = { annotations: { 'kwok.gitops-reloader.io/hold': 'true' } };
  return hook;
}

/** The running hook pod, once it exists. */
const hookPod = (kube: Kube, namespace: string) =>
  waitFor(
    async () =>
      (await kube.core.listNamespacedPod({ namespace, labelSelector: 'job-name=post' })).items[0] ??
      pending('no hook pod yet'),
    { describe: 'the hook pod', timeout: 60_000 },
  );

/** Lets the held hook's pod complete: the sync then ends. */
async function releaseHook(kube: Kube, namespace: string): Promise<void> {
  const pod = await hookPod(kube, namespace);
  await kube.core.patchNamespacedPod(
    {
      name: pod.metadata?.name ?? '',
      namespace,
      body: { metadata: { annotations: { 'kwok.gitops-reloader.io/hold': null } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

describe('the Argo CD gate holds a change while its sync runs', { timeout: 300_000 }, () => {
  it('seed 2231: a metadata edit of another config does not roll out the held change; the sync end does, once', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // web reads `b`, which its Application syncs, and `a`, which nobody syncs. A sync changes b and
    // runs on (its PostSync hook holds it): the gate holds b's change. Someone then edits a's
    // annotations. The batch for a finds b's digest changed too; before the fix it rolled b's change
    // out there and then, mid-sync.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('a', { k: '1' }) });
    const files = (v: string, hook: boolean) =>
      toFiles([cm('b', { k: v }), web('web', { configMaps: ['a', 'b'] }), ...(hook ? [heldHook()] : [])]);
    const repo = await GitRepo.create(namespace, files('1', false));
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    onTestFinished(() => app.delete());
    await app.waitSynced(await repo.head());
    const svc = await startReloader(namespace, [], { onTestFinished });
    const web1 = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    await svc.waitForLog('baseline', (l) => web1(l) && l.msg === 'baseline recorded', 60_000);

    const sha = await app.commit(repo, files('2', true), 'Change b; a PostSync hook');
    await svc.waitForLog(
      'b held',
      (l) =>
        l.msg === 'config change held until the Argo CD sync ends' &&
        Boolean((l.configs as string[] | undefined)?.[0]?.endsWith('/b')),
      60_000,
    );
    const mark = svc.logs.length;
    await kube.core.patchNamespacedConfigMap(
      { name: 'a', namespace, body: { metadata: { annotations: { 'argocd.argoproj.io/sync-wave': '1' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const decided = await svc.waitForLog(
      'the batch of a judged',
      (l) =>
        svc.logs.indexOf(l) >= mark &&
        web1(l) &&
        (l.msg === 'reload started' || l.msg === 'no reload needed'),
      30_000,
    );
    expect(decided.msg).toBe('no reload needed');
    expect((await app.read()).status?.operationState?.phase).toBe('Running');

    // The hook completes, the sync ends: now b's change reloads web, once.
    await releaseHook(kube, namespace);
    const done = await app.waitOperation(sha, 'Succeeded');
    const started = await svc.waitForLog('the reload', (l) => web1(l) && l.msg === 'reload started', 60_000);
    await svc.waitForLog('the reload complete', (l) => web1(l) && l.msg === 'reload complete', 60_000);
    // finishedAt has whole seconds: the reload starts no earlier than that second.
    expect(Date.parse(started.time as string)).toBeGreaterThanOrEqual(
      Date.parse(done.status?.operationState?.finishedAt ?? ''),
    );
    expect(svc.logs.filter((l) => web1(l) && l.msg === 'reload started')).toHaveLength(1);
  });
});

describe('a pending reload whose configs a sync changed while the service was down', {
  timeout: 300_000,
}, () => {
  it('seed 47: is held at start while that sync runs, and reloads once when it ends', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // A1 (b=2, from a finished sync) runs slowly; the service crashes with it pending. While it is
    // down a sync applies b=3 and runs on (its PostSync hook holds it). Before the fix the start took
    // the pending reload whose target differs for a change found now: it reloaded mid-sync, with no
    // hold.
    const slowWeb = () => {
      const w = web('web', { configMaps: ['b'], replicas: 2 }) as Manifest & {
        spec: { strategy?: unknown; template: { metadata: { annotations?: Record<string, string> } } };
      };
      w.spec.strategy = { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } };
      w.spec.template.metadata.annotations = { 'kwok.gitops-reloader.io/ready-after': '4s' };
      return w;
    };
    const files = (v: string, hook: boolean) =>
      toFiles([cm('b', { k: v }), slowWeb(), ...(hook ? [heldHook()] : [])]);
    const repo = await GitRepo.create(namespace, files('1', false));
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    onTestFinished(() => app.delete());
    await app.waitSynced(await repo.head());
    const keyFile = await hashKeyFile();
    const first = await startReloader(namespace, [], { onTestFinished, keyFile });
    const web1 = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    const id = `Deployment/${namespace}/web`;

    const sha1 = await app.commit(repo, files('2', false), 'b=2');
    await app.waitOperation(sha1, 'Succeeded');
    await first.waitForLog('A1 started', (l) => web1(l) && l.msg === 'reload started', 60_000);
    await waitFor(
      async () => (await ledgerEntry(kube, namespace, id))?.pending ?? pending('no pending entry yet'),
      { describe: 'A1 recorded as pending', timeout: 30_000 },
    );
    await first.kill();

    const sha2 = await app.commit(repo, files('3', true), 'b=3; a PostSync hook');
    await hookPod(kube, namespace); // the sync applied b=3 and waits on its hook
    expect((await ledgerEntry(kube, namespace, id))?.pending).toBeDefined();

    const svc = await startReloader(namespace, [], { onTestFinished, keyFile });
    const judged = await svc.waitForLog(
      'the pending reload judged',
      (l) =>
        web1(l) && (l.msg === 'reload started' || l.msg === 'changed, and held until the Argo CD sync ends'),
      60_000,
    );
    expect(judged.msg).toBe('changed, and held until the Argo CD sync ends');

    await releaseHook(kube, namespace);
    const done = await app.waitOperation(sha2, 'Succeeded');
    const started = await svc.waitForLog('the reload', (l) => web1(l) && l.msg === 'reload started', 60_000);
    await svc.waitForLog('the reload complete', (l) => web1(l) && l.msg === 'reload complete', 90_000);
    expect(Date.parse(started.time as string)).toBeGreaterThanOrEqual(
      Date.parse(done.status?.operationState?.finishedAt ?? ''),
    );
    expect(svc.logs.filter((l) => web1(l) && l.msg === 'reload started')).toHaveLength(1);
  });
});

describe('a change a new term finds held by a running sync, with a pod created after its write', {
  timeout: 300_000,
}, () => {
  it('seed 23837: when the sync ends, pods older than the write are replaced; the pod created after it is not', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // While the service is down a sync applies b=2 and runs on (its PostSync hook holds it); then web
    // is scaled up, in a later second than b's write: the new pod reads b=2. The service starts while
    // the sync runs: the gate holds the change. Before the fix the held change was dated by the start;
    // once a later metadata edit of b hid b's data write, the reload after the sync had a cutoff after
    // the new pod, and replaced it needlessly (I3).
    // web's manifest names no replicas (as with an HPA): Argo CD leaves the scale to the cluster.
    const scalableWeb = () => {
      const w = web('web', { configMaps: ['b'] }) as Manifest & { spec: { replicas?: number } };
      delete w.spec.replicas;
      return w;
    };
    const scale = (replicas: number) =>
      kube.apps.patchNamespacedDeployment(
        { name: 'web', namespace, body: { spec: { replicas } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const files = (v: string, hook: boolean) =>
      toFiles([cm('b', { k: v }), scalableWeb(), ...(hook ? [heldHook()] : [])]);
    const repo = await GitRepo.create(namespace, files('1', false));
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    onTestFinished(() => app.delete());
    await app.waitSynced(await repo.head());
    await scale(2);
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const keyFile = await hashKeyFile();
    const first = await startReloader(namespace, [], { onTestFinished, keyFile });
    const id = `Deployment/${namespace}/web`;
    await waitFor(
      async () => (await ledgerEntry(kube, namespace, id))?.configs ?? pending('no baseline yet'),
      { describe: 'the baseline of web in the ledger', timeout: 60_000 },
    );
    await first.stop();

    const sha = await app.commit(repo, files('2', true), 'b=2; a PostSync hook');
    await hookPod(kube, namespace); // the sync applied b=2 and waits on its hook
    const b = await kube.core.readNamespacedConfigMap({ name: 'b', namespace });
    expect(b.data?.k).toBe('2');
    const writtenAt = newestWrite(b.metadata ?? {}) ?? Number.NaN;
    expect(Number.isFinite(writtenAt), 'b names its writes (managedFields)').toBe(true);
    await pastTheSecondOf(writtenAt + 1_000);
    await scale(3);
    const fresh = (await waitReadyPods(kube, namespace, 'web', 3)).find(
      (p) => !before.some((o) => o.uid === p.uid),
    );
    if (!fresh) throw new Error('no scaled-up pod');
    expect(fresh.createdAt).toBeGreaterThanOrEqual(Math.floor(writtenAt / 1000) * 1000 + 2_000);
    expect((await app.read()).status?.operationState?.phase).toBe('Running');

    // The new term starts after the pod was created, while the sync still runs.
    const svc = await startReloader(namespace, [], { onTestFinished, keyFile });
    const web1 = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    const judged = await svc.waitForLog(
      'web judged at start',
      (l) =>
        web1(l) && (l.msg === 'reload started' || l.msg === 'changed, and held until the Argo CD sync ends'),
      60_000,
    );
    expect(judged.msg).toBe('changed, and held until the Argo CD sync ends');
    const pods = await PodTracker.start(kube, namespace, 'web');
    onTestFinished(() => pods.stop());

    // Someone annotates b, in a later second than the start, while the sync still runs: a metadata
    // edit, held too. b's newest write is now after the start, so only the held change's own date
    // can keep the cutoff at its data write: dated by the start, the release's cutoff was after the
    // scaled-up pod (core/batcher.ts batchCutoffMs takes the earlier of the two).
    await pastTheSecondOf(Date.parse(judged.time as string));
    const mark = svc.logs.length;
    const annotated = await kube.core.patchNamespacedConfigMap(
      { name: 'b', namespace, body: { metadata: { annotations: { 'argocd.argoproj.io/sync-wave': '0' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(newestWrite(annotated.metadata ?? {})).toBeGreaterThan(Date.parse(judged.time as string));
    await svc.waitForLog(
      'the metadata edit held',
      (l) =>
        svc.logs.indexOf(l) >= mark &&
        l.msg === 'config change held until the Argo CD sync ends' &&
        Boolean((l.configs as string[] | undefined)?.[0]?.endsWith('/b')),
      30_000,
    );

    await releaseHook(kube, namespace);
    await app.waitOperation(sha, 'Succeeded');
    const started = await svc.waitForLog('the reload', (l) => web1(l) && l.msg === 'reload started', 60_000);
    await svc.waitForLog('the reload complete', (l) => web1(l) && l.msg === 'reload complete', 90_000);
    const after = await waitReadyPods(kube, namespace, 'web', 3);
    expect(
      after.filter((p) => before.some((o) => o.uid === p.uid)),
      'the old pods replaced',
    ).toEqual([]);
    expect(
      after.map((p) => p.uid),
      'the pod created after the write still serves',
    ).toContain(fresh.uid);
    // The cutoff is b's write (whole seconds) plus the skew margin, rounded up: before the pod.
    expect(Date.parse(started.cutoff as string)).toBeLessThanOrEqual(
      Math.floor(writtenAt / 1000) * 1000 + 2_000,
    );
    expect(pods.newSince([...before, fresh]), 'only the old pods replaced').toHaveLength(2);
    expect(svc.logs.filter((l) => web1(l) && l.msg === 'reload started')).toHaveLength(1);
  });
});
