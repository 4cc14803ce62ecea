// Sync-aware batching against the real Argo CD v3.6 of test/cluster: each case commits to a git
// repository and lets Argo CD's application-controller sync it, in each apply mode users run. What
// is asserted is what a user sees: pods, Events, generations, the live template, and the
// Application's own sync and health status.
import { describe, expect } from 'vitest';
import { ArgoApp, GitRepo, startReloader, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { it, type Kube } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { cm, reloadedCount, secret, web } from '../fixtures.ts';

const wave = (n: number) => ({ 'argocd.argoproj.io/sync-wave': String(n) });

/** Three ConfigMaps in waves 0-2 and a Secret, then a Deployment using all four in wave 3. */
function manifests(v: string) {
  const a = cm('a', { k: v });
  const b = cm('b', { k: v });
  const c = cm('c', { k: v });
  const s = secret('s', { password: v });
  b.metadata.annotations = wave(1);
  c.metadata.annotations = wave(2);
  const w = web('web', { configMaps: ['a', 'b', 'c'], secrets: ['s'], replicas: 2 });
  w.metadata.annotations = { ...w.metadata.annotations, ...wave(3) };
  return [a, b, c, s, w];
}

async function deployment(kube: Kube, namespace: string) {
  return kube.apps.readNamespacedDeployment({ name: 'web', namespace });
}

const MODES: Array<{ mode: string; syncOptions: string[]; annotations: Record<string, string> }> = [
  { mode: 'client-side apply', syncOptions: [], annotations: {} },
  { mode: 'server-side apply', syncOptions: ['ServerSideApply=true'], annotations: {} },
  { mode: 'Replace=true', syncOptions: ['Replace=true'], annotations: {} },
  {
    mode: 'server-side diff',
    syncOptions: ['ServerSideApply=true'],
    annotations: { 'argocd.argoproj.io/compare-options': 'ServerSideDiff=true' },
  },
];

describe.concurrent('a real Argo CD sync', { timeout: 300_000 }, () => {
  for (const m of MODES) {
    it(`reloads once after a sync that changes three ConfigMaps and a Secret (${m.mode}), and the app stays Synced and Healthy`, async ({
      kube,
      namespace,
      onTestFinished,
    }) => {
      const repo = await GitRepo.create(namespace, toFiles(manifests('1')));
      const app = await ArgoApp.create(kube, {
        name: namespace,
        repo,
        destination: namespace,
        syncOptions: m.syncOptions,
        annotations: m.annotations,
      });
      try {
        await app.waitSynced(await repo.head());
        const before = await waitReadyPods(kube, namespace, 'web', 2);
        const templateBefore = (await deployment(kube, namespace)).spec?.template;
        const svc = await startReloader(namespace, [], { onTestFinished });
        const pods = await PodTracker.start(kube, namespace, 'web');

        const sha = await app.commit(repo, toFiles(manifests('2')), 'Change every config of web');
        await svc.waitForLog(
          'sync started',
          (l) => l.msg === 'Argo CD sync started; holding changes to its configs',
          60_000,
        );
        const synced = await app.waitOperation(sha, 'Succeeded');
        const opEndedSeen = Date.now();
        const generation = (await deployment(kube, namespace)).metadata?.generation;
        const event = await waitForEvent(kube, namespace, 'Reloaded', 'web');
        await waitAllReplaced(kube, namespace, 'web', before, 2);
        const done = await svc.waitForLog(
          'reload complete',
          (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
          60_000,
        );
        await app.waitSynced(sha);
        const settledAt = Date.now();

        // Held for the whole operation (its waves took longer than the 1 s debounce), then one reload.
        const op = synced.status?.operationState;
        const started = svc.logs.filter((l) => l.msg === 'reload started');
        expect(started).toHaveLength(1);
        const finishedAt = Date.parse(op?.finishedAt ?? '');
        const startedAt = Date.parse(op?.startedAt ?? '');
        expect(finishedAt - startedAt, 'the sync waves outlasted the debounce').toBeGreaterThanOrEqual(1_000);
        // finishedAt has whole seconds: the reload starts no earlier than that second.
        expect(Date.parse(started[0]?.time as string)).toBeGreaterThanOrEqual(finishedAt);
        for (const c of ['ConfigMap/a', 'ConfigMap/b', 'ConfigMap/c', 'Secret/s'])
          expect(event.message).toContain(c);
        expect(done.replaced).toBe(2);

        // While pods were replaced, Argo CD saw the Deployment as Progressing (its status counts the
        // replacement pods, not the surge pod), never OutOfSync, Degraded or Missing.
        const during = app.history.filter((h) => h.at >= opEndedSeen && h.at < settledAt);
        for (const h of during) {
          expect(h.sync, JSON.stringify(h)).toBe('Synced');
          expect(['Healthy', 'Progressing'], JSON.stringify(h)).toContain(h.health);
        }
        // Stays Synced and Healthy: no OutOfSync or Degraded from surge pods or our annotations,
        // while Argo CD compares again (two hard refreshes, each waited for until it compared), with
        // nothing under way for web in the service.
        await idle(svc, `Deployment/${namespace}/web`);
        await app.expectStaysSyncedAndHealthy(settledAt);
        pods.stop();

        expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
        expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
        const live = await deployment(kube, namespace);
        expect(live.spec?.template, 'the live template is the one git gave').toEqual(templateBefore);
        expect(live.metadata?.generation).toBe(generation);
        // Argo CD (its manager is argocd-controller, or argocd for Replace=true) and the Deployment
        // controller wrote the Deployment; gitops-reloader never did.
        const managers = new Set((live.metadata?.managedFields ?? []).map((f) => f.manager));
        for (const w of managers) expect(w).toMatch(/^(argocd|argocd-controller|kube-controller-manager)$/);
        const final = await app.read();
        expect(final.status?.sync?.status).toBe('Synced');
        expect(final.status?.health?.status).toBe('Healthy');
      } finally {
        await app.delete();
      }
    });
  }
});
