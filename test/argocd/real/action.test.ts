// The "reload (drift-free)" resource action of argocd-plugin/actions, installed into the real Argo
// CD v3.6 as docs/argocd.md says and run through argocd-server's API, as the UI's Actions menu runs
// it: Argo CD's own Lua VM runs the script on the live Deployment and patches the difference.
// gitops-reloader then replaces each pod once; the template is untouched and the app stays Synced.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, inject } from 'vitest';
import { repoRoot } from '../../cluster/paths.ts';
import { ArgoApp, argocdEndpoints, GitRepo, startReloader, toFiles } from '../../support/argocd.ts';
import { listResourceActions, type ResourceRef, runResourceAction } from '../../support/argocd-api.ts';
import { idle } from '../../support/decisions.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
import { cm, reloadedCount, web } from '../fixtures.ts';

const run = promisify(execFile);
const STAMP = 'gitops-reloader.io/reload-requested-at';

beforeAll(async () => {
  // The guide's command. test/cluster already ran it before Argo CD started (a later change to
  // argocd-cm's resource customizations makes the application-controller drop its cluster cache),
  // so here it changes nothing unless the cluster predates that.
  await run(path.join(repoRoot, '.cluster', 'bin', 'kubectl'), [
    `--kubeconfig=${inject('kubeconfig')}`,
    '--namespace',
    argocdEndpoints().namespace,
    'patch',
    'configmap',
    'argocd-cm',
    '--type',
    'merge',
    '--patch-file',
    path.join(repoRoot, 'argocd-plugin', 'actions', 'argocd-cm.yaml'),
  ]);
});

describe('the reload action run through the real Argo CD', { timeout: 300_000 }, () => {
  it('stamps the Deployment through argocd-server; gitops-reloader replaces each pod once, the template stays as git has it, and the app stays Synced', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const repo = await GitRepo.create(
      namespace,
      toFiles([cm('app', { k: '1' }), web('web', { configMaps: ['app'], replicas: 2 })]),
    );
    const app = await ArgoApp.create(kube, { name: namespace, repo, destination: namespace });
    try {
      const sha = await repo.head();
      const synced = await app.waitSynced(sha);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const d0 = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
      const svc = await startReloader(namespace, [], { onTestFinished });
      const pods = await PodTracker.start(kube, namespace, 'web');
      const ref: ResourceRef = { group: 'apps', version: 'v1', kind: 'Deployment', namespace, name: 'web' };

      // What the UI lists under Actions: ours next to Argo CD's own (mergeBuiltinActions).
      const actions = await waitFor(
        async () => {
          const a = await listResourceActions(namespace, ref);
          return a.some((x) => x.name === 'reload') ? a : pending(a);
        },
        { describe: 'argocd-server to offer the reload action', timeout: 60_000 },
      );
      expect(actions.find((a) => a.name === 'reload')).toMatchObject({ displayName: 'Reload (drift-free)' });
      expect(actions.map((a) => a.name)).toContain('restart');

      const ranAt = Date.now();
      await runResourceAction(namespace, ref, 'reload');

      // Argo CD's Lua VM stamped the workload's metadata with the current time (whole seconds, UTC).
      const d1 = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
      const stamp = d1.metadata?.annotations?.[STAMP] ?? '';
      expect(stamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
      expect(Math.abs(Date.parse(stamp) - ranAt)).toBeLessThan(60_000);
      expect(d1.spec?.template).toEqual(d0.spec?.template);
      // A Deployment counts an annotation change in its generation (the template hash does not move).
      expect(d1.metadata?.generation).toBe((d0.metadata?.generation ?? 0) + 1);

      const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
      expect(ev.message).toContain(STAMP);
      await waitAllReplaced(kube, namespace, 'web', before, 2);
      await svc.waitForLog(
        'reload complete',
        (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
        60_000,
      );
      await app.waitSynced(sha);
      const settledAt = Date.now();

      // While pods were replaced the app stayed Synced (health at worst Progressing), and it stays
      // Synced and Healthy while Argo CD compares again.
      for (const h of app.history.filter((m) => m.at >= ranAt && m.at < settledAt)) {
        expect(h.sync, JSON.stringify(h)).toBe('Synced');
        expect(['Healthy', 'Progressing'], JSON.stringify(h)).toContain(h.health);
      }
      // Decided: nothing more under way for web (a second reload would be waited for, and counted);
      // and Argo CD, asked to compare twice more, finds it Synced and Healthy each time.
      await idle(svc, `Deployment/${namespace}/web`);
      await app.expectStaysSyncedAndHealthy(settledAt);
      expect(await reloadedCount(kube, namespace, 'web'), 'reloads').toBe(1);
      pods.stop();

      expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
      expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
      expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
      const d2 = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
      expect(d2.spec?.template, 'the live template is the one git gave').toEqual(d0.spec?.template);
      const sets = await kube.apps.listNamespacedReplicaSet({ namespace, labelSelector: 'app=web' });
      expect(sets.items, 'no new ReplicaSet').toHaveLength(1);
      const managers = new Set((d2.metadata?.managedFields ?? []).map((f) => f.manager));
      expect([...managers].filter((m) => m?.includes('gitops-reloader'))).toEqual([]);

      // No sync ran: the action is not an operation, and Argo CD recorded it as an Event on the app.
      const final = await app.read();
      expect(final.status?.operationState?.startedAt).toBe(synced.status?.operationState?.startedAt);
      expect(final.status?.sync?.status).toBe('Synced');
      expect(final.status?.health?.status).toBe('Healthy');
      const ran = await kube.core.listNamespacedEvent({ namespace: app.namespace });
      const messages = ran.items
        .filter((e) => e.reason === 'ResourceActionRan' && e.involvedObject.name === app.name)
        .map((e) => e.message);
      // "<user> ran action …": with argocd-server's auth disabled the user is "Unknown user".
      expect(messages).toHaveLength(1);
      expect(messages[0]).toMatch(/ ran action reload on resource apps\/Deployment\/web$/);
    } finally {
      await app.delete();
    }
  });
});
