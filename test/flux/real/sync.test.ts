// Sync-aware batching against the real Flux controllers of test/cluster: each case commits to a git
// repository and lets source-controller fetch it and kustomize-controller apply it. What is asserted
// is what a user sees: pods, Events, generations, the live template, and the Kustomizations' own
// status.
import { describe, expect } from 'vitest';
import { cm, reloadedCount, secret, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { FluxKustomization, FluxSource, revisionOf, startFluxReloader } from '../../support/flux.ts';
import { it, type Kube } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';

/**
 * Two paths, two Kustomizations: `configs` applies ConfigMaps a and b and Secret s; `app` depends on
 * it and applies ConfigMap c and the Deployment that reads all four.
 */
function files(v: string): Record<string, string> {
  return {
    ...toFiles([cm('a', { k: v }), cm('b', { k: v }), secret('s', { password: v })], 'configs'),
    ...toFiles(
      [cm('c', { k: v }), web('web', { configMaps: ['a', 'b', 'c'], secrets: ['s'], replicas: 2 })],
      'app',
    ),
  };
}

async function deployment(kube: Kube, namespace: string) {
  return kube.apps.readNamespacedDeployment({ name: 'web', namespace });
}

const readySince = (k: { status?: { conditions?: Array<{ type: string; lastTransitionTime?: string }> } }) =>
  Date.parse(k.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime ?? '');

describe('a real Flux reconciliation', { timeout: 300_000 }, () => {
  it('reloads once after a commit that changes three ConfigMaps and a Secret across a dependsOn chain, after the last Kustomization applied it', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const configs = await FluxKustomization.create(kube, { name: 'configs', source, path: './configs' });
    const app = await FluxKustomization.create(kube, {
      name: 'app',
      source,
      path: './app',
      dependsOn: ['configs'],
    });
    const first = await repo.head();
    await configs.waitApplied(first);
    await app.waitApplied(first);
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const templateBefore = (await deployment(kube, namespace)).spec?.template;
    const generationBefore = (await deployment(kube, namespace)).metadata?.generation;

    const svc = await startFluxReloader(namespace, ['--flux-depends-on-as-one'], { onTestFinished });
    const pods = await PodTracker.start(kube, namespace, 'web');

    const sha = await repo.commit(files('2'), 'Change every config of web');
    await source.fetched(sha);
    await svc.waitForLog(
      'the reconciliation started',
      (l) => l.msg === 'Flux reconciliation started; holding changes to its configs',
      60_000,
    );
    const configsDone = await configs.waitApplied(sha);
    const appDone = await app.waitApplied(sha);
    const event = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    const done = await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      60_000,
    );
    pods.stop();

    // The changes of both Kustomizations were held and went out as one batch after the last applied.
    const started = svc.logs.filter((l) => l.msg === 'reload started');
    expect(started, 'one reload').toHaveLength(1);
    const appliedAt = Math.max(readySince(configsDone), readySince(appDone));
    // Ready's lastTransitionTime has whole seconds: the reload starts no earlier than that second.
    expect(Date.parse(started[0]?.time as string)).toBeGreaterThanOrEqual(appliedAt);
    const released = svc.logs.filter(
      (l) => l.msg === 'releasing config changes held for the Flux reconciliation as one batch',
    );
    expect(released.map((l) => l.applier).sort()).toEqual([
      `Kustomization/${namespace}/app`,
      `Kustomization/${namespace}/configs`,
    ]);
    for (const c of ['ConfigMap/a', 'ConfigMap/b', 'ConfigMap/c', 'Secret/s'])
      expect(event.message).toContain(c);
    // The Event names the Kustomization and the revision whose end released the reload.
    expect(event.message).toContain(`(after sync of Kustomization/${namespace}/`);
    expect(event.message).toContain(` at ${revisionOf(sha)})`);
    expect(done.replaced).toBe(2);
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);

    // Drift-free: the template and generation are git's, and only Flux and the Deployment controller
    // wrote the Deployment.
    const live = await deployment(kube, namespace);
    expect(live.spec?.template, 'the live template is the one git gave').toEqual(templateBefore);
    expect(live.metadata?.generation).toBe(generationBefore);
    const managers = new Set((live.metadata?.managedFields ?? []).map((f) => f.manager));
    for (const m of managers) expect(m).toMatch(/^(kustomize-controller|kube-controller-manager)$/);
    const final = await app.read();
    expect(final.status?.lastAppliedRevision).toBe(revisionOf(sha));
    expect(final.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  });
});
