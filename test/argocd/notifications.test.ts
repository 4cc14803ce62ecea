// The shipped notification config, evaluated by the real notifications-engine (trigger, oncePer,
// subscriptions, template, webhook service), delivered to gitops-reloader. The delivery test runs
// the service with a ServiceAccount that RBAC denies Applications, as when Argo CD runs in another
// cluster: the notification alone must drive one correct reload.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect } from 'vitest';
import { UNWATCHED_GRACE_MS } from '../../service/argocd/gate.ts';
import { parseNotification } from '../../service/argocd/notification.ts';
import { readArgoObject } from '../support/argo.ts';
import { ArgoCdPlayer } from '../support/argocd-player.ts';
import { it } from '../support/kube.ts';
import { livePods, PodTracker, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { restrictedKubeConfig } from '../support/restricted-service-account.ts';
import { hashKeyFile } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { cm, reloadedCount, secret, stayQuiet, web } from './fixtures.ts';
import { startInProcess } from './in-process.ts';
import { buildNotify, runNotify } from './notify-engine.ts';

let bin: string;
beforeAll(async () => {
  bin = await buildNotify();
}, 20 * 60_000);

function application(
  phase: string | undefined,
  startedAt: string,
  extra: { labels?: Record<string, string>; revision?: string } = {},
) {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: { name: 'shop', namespace: 'argocd', ...(extra.labels ? { labels: extra.labels } : {}) },
    spec: { destination: { namespace: 'web' } },
    status: phase
      ? {
          operationState: {
            phase,
            startedAt,
            ...(phase === 'Running' ? {} : { finishedAt: startedAt.replace(':00Z', ':09Z') }),
            operation: { sync: { revision: extra.revision ?? 'abc' } },
            ...(phase === 'Running'
              ? {}
              : {
                  syncResult: {
                    revision: extra.revision ?? 'abc',
                    resources: [
                      {
                        group: '',
                        version: 'v1',
                        kind: 'ConfigMap',
                        namespace: 'web',
                        name: 'app',
                        status: 'Synced',
                        message: 'configmap/app configured',
                      },
                      {
                        group: 'apps',
                        version: 'v1',
                        kind: 'Deployment',
                        namespace: 'web',
                        name: 'web',
                        status: 'Synced',
                      },
                    ],
                  },
                }),
          },
        }
      : {},
  };
}

describe('the shipped Argo CD notification config', () => {
  it('notifies once per ended operation, including a re-sync of the same revision, with a body the webhook accepts', async () => {
    const r = await runNotify(bin, [
      application(undefined, ''),
      application('Running', '2026-12-02T10:00:00Z'),
      application('Succeeded', '2026-12-02T10:00:00Z'),
      application('Succeeded', '2026-12-02T10:00:00Z'),
      application('Running', '2026-12-02T10:05:00Z'),
      application('Succeeded', '2026-12-02T10:05:00Z'),
      application('Running', '2026-12-02T10:10:00Z', { revision: 'def' }),
      application('Error', '2026-12-02T10:10:00Z', { revision: 'def' }),
    ]);
    expect(r.map((x) => (x.triggered ? (x.alreadySent ? 'again' : 'send') : '-'))).toEqual([
      '-',
      '-',
      'send',
      'again',
      '-',
      'send',
      '-',
      'send',
    ]);
    expect(r[5]?.oncePer).toBe('2026-12-02T10:05:00Z');
    const body = parseNotification(JSON.parse(r[2]?.bodies?.['gitops-reloader'] as string));
    expect(body).toEqual({
      app: { namespace: 'argocd', name: 'shop' },
      phase: 'Succeeded',
      startedAt: '2026-12-02T10:00:00Z',
      finishedAt: '2026-12-02T10:00:09Z',
      revision: 'abc',
      resources: [
        { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'web', name: 'app', status: 'Synced' },
        { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'web', name: 'web', status: 'Synced' },
      ],
    });
    expect(parseNotification(JSON.parse(r[7]?.bodies?.['gitops-reloader'] as string)).phase).toBe('Error');
  });

  it('subscribes, by the global subscription, only Applications whose labels match its selector', async () => {
    const [labelled, other] = await runNotify(bin, [
      application('Succeeded', '2026-12-02T10:00:00Z', { labels: { 'gitops-reloader.io/notify': 'true' } }),
      application('Succeeded', '2026-12-02T10:00:00Z', { labels: { team: 'shop' } }),
    ]);
    expect(labelled?.destinations).toEqual(['gitops-reloader']);
    expect(other?.destinations).toEqual([]);
  });

  it('renders a sync without a result (an Error before anything was applied) as a valid body', async () => {
    const app = application('Error', '2026-12-02T10:00:00Z') as ReturnType<typeof application>;
    delete (app.status.operationState as Record<string, unknown> | undefined)?.syncResult;
    const [r] = await runNotify(bin, [app]);
    const body = parseNotification(JSON.parse(r?.bodies?.['gitops-reloader'] as string));
    expect(body.resources).toEqual([]);
    expect(body.revision).toBeUndefined();
  });

  it('drives one reload from the notification alone when RBAC denies the service Applications', async ({
    kube,
    namespace,
  }) => {
    const player = await ArgoCdPlayer.start({
      kube,
      appNamespace: namespace,
      appName: 'shop',
      destination: namespace,
      mode: 'client-side-apply',
    });
    await player.sync([
      [cm('app', { k: '1' }), secret('creds', { p: '1' })],
      [web('web', { configMaps: ['app'], secrets: ['creds'], replicas: 2 })],
    ]);
    const before = await waitReadyPods(kube, namespace, 'web', 2);

    const token = 'c0ffee00c0ffee00c0ffee00c0ffee00';
    const dir = await mkdtemp(path.join(tmpdir(), 'gr-token-'));
    const tokenFile = path.join(dir, 'token');
    await writeFile(tokenFile, token);
    const svc = await startInProcess(await restrictedKubeConfig(kube, namespace), [
      `--namespaces=${namespace}`,
      `--release-namespace=${namespace}`,
      `--hash-key-file=${await hashKeyFile()}`,
      `--argocd-namespaces=${namespace}`,
      `--webhook-token-file=${tokenFile}`,
      '--debounce=1s',
      '--max-debounce-wait=2s',
      '--min-reload-interval=0s',
    ]);
    try {
      await svc.waitForLog('no Application access', (l) =>
        l.msg.startsWith('cannot list Argo CD Applications'),
      );
      // Argo CD notifies the initial sync: from then on the service holds this app's changes.
      const initial = await readArgoObject(kube.custom, 'Application', namespace, 'shop');
      const [first] = await runNotify(bin, [initial], { token, url: svc.webhookUrl, send: true });
      expect(first?.sent).toBe(true);
      const notifiedAt = Date.now();
      await svc.waitForLog('first notification', (l) => l.msg === 'Argo CD notification accepted');
      const tracker = await PodTracker.start(kube, namespace, 'web');
      // Configs that notification listed count as its own late changes for a short grace; let it pass.
      await waitFor(
        () => (Date.now() >= notifiedAt + UNWATCHED_GRACE_MS ? true : pending(Date.now() - notifiedAt)),
        {
          describe: 'the grace after the first notification',
          timeout: UNWATCHED_GRACE_MS + 5_000,
        },
      );

      const op = await player.startSync('rev-2');
      await player.apply(op, [cm('app', { k: '2' })]);
      await svc.waitForLog(
        'app held',
        (l) =>
          l.msg === 'config change held until the Argo CD sync ends' && String(l.configs).endsWith('/app'),
      );
      await stayQuiet(1_500, async () =>
        (await reloadedCount(kube, namespace, 'web')) > 0 ? 'web was reloaded' : undefined,
      );
      await player.apply(op, [secret('creds', { p: '2' })]);
      await svc.waitForLog(
        'creds held',
        (l) =>
          l.msg === 'config change held until the Argo CD sync ends' && String(l.configs).endsWith('/creds'),
      );
      await player.finishSync(op);

      // Argo CD's notifications controller sees the ended operation and delivers.
      const app = await readArgoObject(kube.custom, 'Application', namespace, 'shop');
      const [delivered] = await runNotify(bin, [app], { token, url: svc.webhookUrl, send: true });
      expect(delivered?.error).toBeUndefined();
      expect(delivered?.sent).toBe(true);
      const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
      expect(ev.message).toMatch(/ConfigMap\/app.*Secret\/creds/);
      const old = new Set(before.map((p) => p.uid));
      await waitFor(
        async () => {
          const pods = await livePods(kube, namespace, 'web');
          return pods.length === 2 && pods.every((p) => p.ready && !old.has(p.uid)) ? pods : pending(pods);
        },
        { describe: 'both pods replaced and Ready', timeout: 60_000 },
      );
      await svc.waitForLog(
        'reload complete',
        (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      );

      // The same delivery again (a controller that lost its state, a retry): nothing more happens.
      const [again] = await runNotify(bin, [app], { token, url: svc.webhookUrl, send: true });
      expect(again?.sent).toBe(true);
      await svc.waitForLog('duplicate', (l) => l.msg === 'Argo CD notification was a duplicate');
      await stayQuiet(2_000, async () => {
        const n = await reloadedCount(kube, namespace, 'web');
        return n > 1 ? `${n} reloads` : undefined;
      });
      tracker.stop();
      expect(tracker.newSince(before)).toHaveLength(2);

      // And a wrong token is refused by the engine's delivery, which reports the 401.
      const [refused] = await runNotify(bin, [app], { token: 'wrong', url: svc.webhookUrl, send: true });
      expect(refused?.error).toMatch(/401/);
    } catch (err) {
      console.log(
        svc.logs
          .slice(-40)
          .map((l) => JSON.stringify(l))
          .join('\n'),
      );
      throw err;
    } finally {
      await svc.stop();
    }
  });
});
