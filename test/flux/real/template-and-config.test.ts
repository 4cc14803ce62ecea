// A commit that changes a config and the pod template together, applied by the real Flux
// kustomize-controller: each workload is rolled once, by its own controller, and gitops-reloader
// restarts nothing on top.
import { describe, expect } from 'vitest';
import { AUTO, cm, reloadedCount } from '../../argocd/fixtures.ts';
import { GitRepo, type Manifest, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { FluxKustomization, FluxSource, startFluxReloader } from '../../support/flux.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { deployment, statefulSet } from '../../support/workloads.ts';

const envFrom = { envFrom: [{ configMapRef: { name: 'app' } }] };

function workloads(image: string): Manifest[] {
  const container = { image, ...envFrom };
  const web = deployment('web', { replicas: 2, annotations: AUTO, container });
  const db = statefulSet('db', 2, { annotations: AUTO, container });
  const agent = {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'agent', labels: { app: 'agent' }, annotations: AUTO },
    spec: {
      selector: { matchLabels: { app: 'agent' } },
      template: {
        metadata: { labels: { app: 'agent' } },
        spec: { containers: [{ name: 'app', ...container }] },
      },
    },
  };
  return [web, db, agent] as unknown as Manifest[];
}

const KINDS = [
  { name: 'web', kind: 'Deployment', pods: 2 },
  { name: 'db', kind: 'StatefulSet', pods: 2 },
  { name: 'agent', kind: 'DaemonSet', pods: 3 },
];

describe('a real Flux reconciliation of config and template together', { timeout: 360_000 }, () => {
  it('rolls each Deployment, StatefulSet and DaemonSet once, by its own controller, and restarts nothing on top', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const files = (v: string) =>
      toFiles([cm('app', { k: v }), ...workloads(`registry.invalid/app:${v}`)], 'app');
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const k = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
    await k.waitApplied(await repo.head());
    const before = new Map<string, Awaited<ReturnType<typeof waitReadyPods>>>();
    for (const w of KINDS) before.set(w.name, await waitReadyPods(kube, namespace, w.name, w.pods));
    const svc = await startFluxReloader(namespace, [], { onTestFinished });
    const trackers = await Promise.all(KINDS.map((w) => PodTracker.start(kube, namespace, w.name)));

    const sha = await repo.commit(files('2'), 'New image and new config');
    await source.fetched(sha);
    await k.waitApplied(sha);
    for (const w of KINDS) {
      await waitForEvent(kube, namespace, 'ReloadNotNeeded', w.name, 120_000);
      await waitReadyPods(kube, namespace, w.name, w.pods);
    }
    // Their controllers' rollouts done, our decision made (ReloadNotNeeded), and nothing more under
    // way for any of them: a second restart would be waited for, and its pods counted below.
    for (const w of KINDS) {
      await waitAllReplaced(kube, namespace, w.name, before.get(w.name) ?? [], w.pods);
      await idle(svc, `${w.kind}/${namespace}/${w.name}`);
    }
    for (const t of trackers) t.stop();

    for (const [i, w] of KINDS.entries()) {
      const created = trackers[i]?.newSince(before.get(w.name) ?? []) ?? [];
      expect(created, `${w.kind} ${w.name}: one new pod per replica`).toHaveLength(w.pods);
      expect(trackers[i]?.surgePods(), `${w.kind} ${w.name}: no surge pod`).toHaveLength(0);
      expect(await reloadedCount(kube, namespace, w.name), `${w.kind} ${w.name}: no Reloaded Event`).toBe(0);
    }
    expect(svc.logs.filter((l) => l.msg === 'reload complete' && l.notNeeded === true)).toHaveLength(3);
    // The changes were held for the reconciliation, then judged: the template rollout covered them.
    expect(
      svc.logs.some(
        (l) =>
          l.msg === 'releasing config changes held for the Flux reconciliation as one batch' &&
          l.applier === `Kustomization/${namespace}/app`,
      ),
    ).toBe(true);
  });
});
