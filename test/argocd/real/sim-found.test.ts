// A defect the engine simulation (test/sim) found, reproduced with the real Argo CD of test/cluster:
// seed 2231, a batch of something else rolled out a config change the Argo CD gate was holding while
// its sync ran. The unit test of the fix is in service/reconciler.test.ts.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { ArgoApp, GitRepo, type Manifest, startReloader, toFiles } from '../../support/argocd.ts';
import { it } from '../../support/kube.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
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
    const hookPod = await waitFor(
      async () =>
        (await kube.core.listNamespacedPod({ namespace, labelSelector: 'job-name=post' })).items[0] ??
        pending('no hook pod yet'),
      { describe: 'the hook pod', timeout: 60_000 },
    );
    await kube.core.patchNamespacedPod(
      {
        name: hookPod.metadata?.name ?? '',
        namespace,
        body: { metadata: { annotations: { 'kwok.gitops-reloader.io/hold': null } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
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
