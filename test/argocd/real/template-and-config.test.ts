// A commit that changes a config and the pod template together, synced by the real Argo CD: each
// workload is rolled once, by its own controller (the Argo Rollouts controller for a Rollout), and
// gitops-reloader restarts nothing on top. Also: hook Jobs and sync waves hold the reload until the
// whole operation ends.
import { BatchV1Api } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { ArgoApp, GitRepo, type Manifest, startReloader, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { it } from '../../support/kube.ts';
import { events, PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { deployment, statefulSet } from '../../support/workloads.ts';
import { AUTO, cm, reloadedCount } from '../fixtures.ts';

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
  const ro = {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    metadata: { name: 'ro', labels: { app: 'ro' }, annotations: AUTO },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'ro' } },
      template: {
        metadata: { labels: { app: 'ro' } },
        spec: { containers: [{ name: 'app', ...container }] },
      },
      strategy: { canary: { maxSurge: 1, maxUnavailable: 0 } },
    },
  };
  return [web, db, agent, ro] as unknown as Manifest[];
}

const KINDS = [
  { name: 'web', kind: 'Deployment', pods: 2 },
  { name: 'db', kind: 'StatefulSet', pods: 2 },
  { name: 'agent', kind: 'DaemonSet', pods: 3 },
  { name: 'ro', kind: 'Rollout', pods: 2 },
];

describe.concurrent('a real Argo CD sync of config and template together', { timeout: 360_000 }, () => {
  it('rolls each Deployment, StatefulSet, DaemonSet and Rollout once, by its own controller, and restarts nothing on top', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const repo = await GitRepo.create(
      namespace,
      toFiles([cm('app', { k: '1' }), ...workloads('registry.invalid/app:1')]),
    );
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    try {
      await app.waitSynced(await repo.head(), 180_000);
      const before = new Map<string, Awaited<ReturnType<typeof waitReadyPods>>>();
      for (const k of KINDS) before.set(k.name, await waitReadyPods(kube, namespace, k.name, k.pods));
      const svc = await startReloader(namespace, [], { onTestFinished });
      const trackers = await Promise.all(KINDS.map((k) => PodTracker.start(kube, namespace, k.name)));

      const sha = await app.commit(
        repo,
        toFiles([cm('app', { k: '2' }), ...workloads('registry.invalid/app:2')]),
        'New image and new config',
      );
      await app.waitSynced(sha, 180_000);
      for (const k of KINDS) {
        await waitForEvent(kube, namespace, 'ReloadNotNeeded', k.name, 120_000);
        await waitReadyPods(kube, namespace, k.name, k.pods);
      }
      // Their controllers' rollouts done, our decision made (ReloadNotNeeded), and nothing more under
      // way for any of them: a second restart would be waited for, and its pods counted below.
      for (const k of KINDS) {
        await waitAllReplaced(kube, namespace, k.name, before.get(k.name) ?? [], k.pods);
        await idle(svc, `${k.kind}/${namespace}/${k.name}`);
      }
      for (const t of trackers) t.stop();

      for (const [i, k] of KINDS.entries()) {
        const created = trackers[i]?.newSince(before.get(k.name) ?? []) ?? [];
        expect(created, `${k.kind} ${k.name}: one new pod per replica`).toHaveLength(k.pods);
        expect(trackers[i]?.surgePods(), `${k.kind} ${k.name}: no surge pod`).toHaveLength(0);
        expect(await reloadedCount(kube, namespace, k.name), `${k.kind} ${k.name}: no Reloaded Event`).toBe(
          0,
        );
      }
      const ro = (await kube.custom.getNamespacedCustomObject({
        group: 'argoproj.io',
        version: 'v1alpha1',
        namespace,
        plural: 'rollouts',
        name: 'ro',
      })) as { spec?: { restartAt?: string } };
      expect(ro.spec?.restartAt, 'no restartAt on a Rollout its own update replaced').toBeUndefined();
      expect(svc.logs.filter((l) => l.msg === 'reload complete' && l.notNeeded === true)).toHaveLength(4);
      const final = await app.read();
      expect(final.status?.sync?.status).toBe('Synced');
      expect(final.status?.health?.status).toBe('Healthy');
    } finally {
      await app.delete();
    }
  });

  it('holds the reload through PreSync and PostSync hook Jobs and sync waves, until the operation ends', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const hook = (name: string, phase: string) => ({
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name,
        annotations: {
          'argocd.argoproj.io/hook': phase,
          'argocd.argoproj.io/hook-delete-policy': 'BeforeHookCreation',
        },
      },
      spec: {
        backoffLimit: 0,
        template: {
          spec: { restartPolicy: 'Never', containers: [{ name: 'hook', image: 'registry.invalid/hook:1' }] },
        },
      },
    });
    const files = (v: string) => {
      const early = cm('early', { k: v });
      const late = cm('late', { k: v });
      late.metadata.annotations = { 'argocd.argoproj.io/sync-wave': '2' };
      const web = deployment('web', {
        replicas: 1,
        annotations: { ...AUTO, 'argocd.argoproj.io/sync-wave': '1' },
        container: { envFrom: [{ configMapRef: { name: 'early' } }, { configMapRef: { name: 'late' } }] },
      });
      return toFiles([
        early,
        late,
        web as unknown as Manifest,
        hook('pre', 'PreSync'),
        hook('post', 'PostSync'),
      ]);
    };
    const repo = await GitRepo.create(namespace, files('1'));
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    try {
      await app.waitSynced(await repo.head(), 180_000);
      const before = await waitReadyPods(kube, namespace, 'web', 1);
      const svc = await startReloader(namespace, [], { onTestFinished });
      const tracker = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(repo, files('2'), 'Change both configs');
      const synced = await app.waitOperation(sha, 'Succeeded', 180_000);
      await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
      await waitReadyPods(kube, namespace, 'web', 1);
      tracker.stop();

      const op = synced.status?.operationState;
      const hooks =
        op?.syncResult?.resources?.filter((r) => r.syncPhase === 'PreSync' || r.syncPhase === 'PostSync') ??
        [];
      expect(hooks.map((h) => `${h.name}:${h.syncPhase}:${h.hookPhase}`).sort()).toEqual([
        'post:PostSync:Succeeded',
        'pre:PreSync:Succeeded',
      ]);
      // The PostSync Job completed (it ran after every wave), and only then did the reload start.
      const post = await kube.kc.makeApiClient(BatchV1Api).readNamespacedJob({ name: 'post', namespace });
      const postDone = Date.parse(String(post.status?.completionTime ?? ''));
      const started = svc.logs.filter((l) => l.msg === 'reload started');
      expect(started).toHaveLength(1);
      const startedAt = Date.parse(started[0]?.time as string);
      expect(startedAt).toBeGreaterThanOrEqual(Date.parse(op?.finishedAt ?? ''));
      // completionTime has whole seconds too.
      expect(startedAt).toBeGreaterThanOrEqual(postDone);
      expect(tracker.newSince(before)).toHaveLength(1);
      const reloaded = await events(kube, namespace, 'Reloaded', 'web');
      expect(reloaded).toHaveLength(1);
      expect(reloaded[0]?.message).toMatch(/ConfigMap\/early.*ConfigMap\/late/);
    } finally {
      await app.delete();
    }
  });
});
