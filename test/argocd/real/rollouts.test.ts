// Argo Rollouts in the loop: the real Argo Rollouts controller acts on the spec.restartAt that
// gitops-reloader sets, and the real Argo CD that synced the Rollout keeps it Synced and Healthy.
import { describe, expect } from 'vitest';
import { canonicalJson } from '../../../service/core/canonical-json.ts';
import { ArgoApp, GitRepo, type Manifest, startReloader, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
import { AUTO, cm, reloadedCount } from '../fixtures.ts';

function rollout(): Manifest {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    metadata: { name: 'ro', labels: { app: 'ro' }, annotations: AUTO },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: 'ro' } },
      template: {
        metadata: { labels: { app: 'ro' } },
        spec: {
          containers: [
            { name: 'app', image: 'registry.invalid/app:1', envFrom: [{ configMapRef: { name: 'app' } }] },
          ],
        },
      },
      strategy: { canary: { steps: [{ setWeight: 50 }, { pause: {} }] } },
    },
  };
}

interface RolloutStatus {
  spec?: { restartAt?: string; template?: unknown };
  metadata?: { generation?: number };
  status?: { restartedAt?: string; phase?: string };
}

describe('a Rollout synced by the real Argo CD', { timeout: 300_000 }, () => {
  it('is restarted once by the Argo Rollouts controller through spec.restartAt, skipping its canary pause, and stays Synced', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const repo = await GitRepo.create(namespace, toFiles([cm('app', { k: '1' }), rollout()]));
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    const read = async () =>
      (await kube.custom.getNamespacedCustomObject({
        group: 'argoproj.io',
        version: 'v1alpha1',
        namespace,
        plural: 'rollouts',
        name: 'ro',
      })) as RolloutStatus;
    try {
      await app.waitSynced(await repo.head(), 180_000);
      const before = await waitReadyPods(kube, namespace, 'ro', 2);
      const templateBefore = (await read()).spec?.template;
      const svc = await startReloader(namespace, [], { onTestFinished });
      const pods = await PodTracker.start(kube, namespace, 'ro');

      const sha = await app.commit(repo, toFiles([cm('app', { k: '2' })]), 'Change the config only');
      await app.waitOperation(sha, 'Succeeded');
      await waitForEvent(kube, namespace, 'Reloaded', 'ro');
      // The controller restarts every pod created before restartAt and records status.restartedAt.
      const restarted = await waitFor(
        async () => {
          const ro = await read();
          return ro.status?.restartedAt && ro.status.restartedAt === ro.spec?.restartAt
            ? ro
            : pending(ro.status);
        },
        { describe: 'status.restartedAt = spec.restartAt', timeout: 120_000 },
      );
      await waitAllReplaced(kube, namespace, 'ro', before, 2);
      await app.waitSynced(sha);
      // Nothing more under way for the Rollout; Argo CD compares twice more: Synced and Healthy.
      const settledAt = Date.now();
      await idle(svc, `Rollout/${namespace}/ro`);
      await app.expectStaysSyncedAndHealthy(settledAt);
      pods.stop();

      // Once every pod is replaced and the app is Healthy, the Rollout is Healthy too (it may still
      // have said Progressing when restartedAt was recorded).
      const final = await waitFor(
        async () => {
          const ro = await read();
          return ro.status?.phase === 'Healthy' ? ro : pending(ro.status);
        },
        { describe: 'the Rollout Healthy', timeout: 60_000 },
      );
      expect(final.status?.restartedAt).toBe(restarted.status?.restartedAt);
      // The template means what git says (the Rollouts controller re-spells it: resources: {}).
      expect(canonicalJson(restarted.spec?.template), 'restartAt is the only field written').toBe(
        canonicalJson(templateBefore),
      );
      expect(pods.newSince(before), 'each pod restarted exactly once').toHaveLength(2);
      expect(await reloadedCount(kube, namespace, 'ro')).toBe(1);
      expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    } finally {
      await app.delete();
    }
  });
});
