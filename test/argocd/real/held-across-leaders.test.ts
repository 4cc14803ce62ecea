// A failed sync's held config change survives leader changes (docs/adr/0029), against the real Argo
// CD v3.6 of test/cluster. Under --argocd-on-failed-sync=hold, a sync applies new configs and then
// fails (a PostSync hook fails): the change stays held. The leader is killed; the standby that saw the
// failure live takes over, then is killed in turn and a freshly started process (which only lists the
// Application, as after the chart's rolling update) takes over: neither reloads. The sync that fixes
// the app succeeds, and web is reloaded exactly once.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { ArgoApp, argocdEndpoints, fileOf, GitRepo, type Manifest, toFiles } from '../../support/argocd.ts';
import { syncApplication } from '../../support/argocd-api.ts';
import { expectHeld, idle } from '../../support/decisions.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { FAST_LEASE } from '../../support/replicas.ts';
import { hashKeyFile, type RunningService, serviceArgs, startService } from '../../support/service.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
import { cm, postSyncHook, reloadedCount, secret, web } from '../fixtures.ts';

function manifests(v: string, extra: Manifest[] = []): Manifest[] {
  return [
    cm('app', { k: v }),
    secret('creds', { p: v }),
    web('web', { configMaps: ['app'], secrets: ['creds'], replicas: 2 }),
    ...extra,
  ];
}

const reloadsStarted = (svc: RunningService) => svc.logs.filter((l) => l.msg === 'reload started').length;

describe('a held reload across leader changes, with the real Argo CD', { timeout: 720_000 }, () => {
  it('a failed sync under --argocd-on-failed-sync=hold: no new leader reloads; the fixing sync reloads once', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const keyFile = await hashKeyFile();
    const replica = (identity: string) => {
      const svc = startService(
        serviceArgs(namespace, keyFile, [
          `--argocd-namespaces=${argocdEndpoints().namespace}`,
          '--argocd-on-failed-sync=hold',
          '--debounce=1s',
          '--max-debounce-wait=2s',
          '--leader-elect',
          `--leader-identity=${identity}`,
          ...FAST_LEASE,
        ]),
      );
      onTestFinished(() => svc.kill());
      return svc;
    };
    const repo = await GitRepo.create(namespace, toFiles(manifests('1')));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      // Argo CD retries a failed automated sync (5 times by default, from 5 s doubling up to 3 min),
      // and the operation stays Running between attempts: one quick retry here.
      retry: { limit: 1, backoff: { duration: '1s', factor: 2, maxDuration: '5s' } },
    });
    try {
      await app.waitSynced(await repo.head());
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const a = replica('a');
      await a.waitForLog('a leads', (l) => l.msg === 'ready', 60_000);
      const b = replica('b');
      await b.waitForLog('b synced', (l) => l.msg === 'caches synced', 60_000);
      const pods = await PodTracker.start(kube, namespace, 'web');

      // The sync applies the new configs, then its hook fails: the change is held.
      const failing = await app.commit(
        repo,
        toFiles(manifests('2', [postSyncHook({ fail: true })])),
        'Change both configs of web; add a PostSync hook that fails',
      );
      await app.waitOperation(failing, 'Failed', 300_000);
      await a.waitForLog(
        'held after the failure',
        (l) => l.msg.startsWith('Argo CD sync did not succeed') && Number(l.held) >= 1,
        60_000,
      );
      // Each leader's decision is a hold (its log line, and its status: web waits for a sync and
      // nothing else); then nothing was reloaded or replaced.
      const webId = `Deployment/${namespace}/web`;
      const quiet = async (who: string) => {
        expect(await reloadedCount(kube, namespace, 'web'), `web was reloaded (${who})`).toBe(0);
        const replaced = [...pods.newSince(before), ...pods.surgePods()];
        expect(replaced, `a pod was replaced (${who})`).toEqual([]);
      };
      await expectHeld(a, webId);
      await quiet('first leader');

      // The leader dies; the standby, which saw the failure live, takes over and keeps the hold.
      await a.kill();
      await b.waitForLog('b leads', (l) => l.msg === 'ready', 60_000);
      await b.waitForLog(
        'b holds web',
        (l) => l.msg === 'changed, and held until the Argo CD sync ends' && l.workload === 'Deployment/web',
      );
      await expectHeld(b, webId);
      await quiet('after the first leader change');

      // A process started afresh (the chart's rolling update) knows the failure only from the
      // Application's status; it takes over from b and keeps the hold too.
      const c = replica('c');
      await c.waitForLog('c synced', (l) => l.msg === 'caches synced', 60_000);
      await b.kill();
      await c.waitForLog('c leads', (l) => l.msg === 'ready', 60_000);
      const restored = c.logs.find((l) => l.msg === 'changed, and held until the Argo CD sync ends');
      expect(restored?.workload, 'the new leader names the held reload').toBeDefined();
      await expectHeld(c, webId);
      await quiet('after the second leader change');

      // The user fixes the app: the failing hook leaves git, its failed Job goes (with the finalizer
      // Argo CD keeps on hooks), and a sync is started by hand, as `argocd app sync` does: git now
      // equals the live state, so automated sync would start nothing. It succeeds: one reload.
      const fixed = await app.commit(
        repo,
        { ...toFiles(manifests('2')), [fileOf(postSyncHook({ fail: true }))]: null },
        'Drop the failing hook',
      );
      await app.waitFor(
        `${app.name} compared at ${fixed.slice(0, 8)}`,
        (x) => x.status?.sync?.revision === fixed,
      );
      await kube.batch.patchNamespacedJob(
        { name: 'post', namespace, body: { metadata: { finalizers: null } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await kube.batch.deleteNamespacedJob({ name: 'post', namespace, propagationPolicy: 'Background' });
      await waitFor(
        async () => {
          const jobs = await kube.batch.listNamespacedJob({ namespace });
          return jobs.items.length === 0 ? true : pending(jobs.items.map((j) => j.metadata?.name));
        },
        { describe: 'the failed hook Job gone', timeout: 60_000 },
      );
      await syncApplication(namespace, { prune: true }).catch((err: Error) => {
        // Automated sync may have started the operation first; that one is waited for below.
        if (!/in progress/i.test(err.message)) throw err;
      });
      await app.waitOperation(fixed, 'Succeeded', 300_000);
      const event = await waitForEvent(kube, namespace, 'Reloaded', 'web');
      for (const config of ['ConfigMap/app', 'Secret/creds']) expect(event.message).toContain(config);
      await waitAllReplaced(kube, namespace, 'web', before, 2);
      await c.waitForLog('reload complete', (l) => l.msg === 'reload complete', 60_000);
      // Nothing more under way for web: a second reload would be waited for, and counted below.
      await idle(c, webId);
      pods.stop();
      expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
      expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
      expect([reloadsStarted(a), reloadsStarted(b), reloadsStarted(c)]).toEqual([0, 0, 1]);
    } finally {
      await app.delete();
    }
  });
});
