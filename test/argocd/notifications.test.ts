// The shipped notification config, evaluated by the real notifications-engine (trigger, oncePer,
// subscriptions, template, webhook service), delivered to gitops-reloader. The delivery test runs
// the service with a ServiceAccount that RBAC denies Applications, as when Argo CD runs in another
// cluster: the notification alone must drive one correct reload. The last describe posts notifications
// itself, over HTTP, in an order the controller's retries can produce: an older sync's end after a
// newer one's.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect } from 'vitest';
import { UNWATCHED_GRACE_MS } from '../../service/argocd/gate.ts';
import { parseNotification } from '../../service/argocd/notification.ts';
import { readArgoObject } from '../support/argo.ts';
import { ArgoCdPlayer } from '../support/argocd-player.ts';
import { expectHeld, idle } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import {
  livePods,
  PodTracker,
  type PodView,
  waitAllReplaced,
  waitForEvent,
  waitReadyPods,
} from '../support/observe.ts';
import { restrictedKubeConfig } from '../support/restricted-service-account.ts';
import { hashKeyFile } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { cm, reloadedCount, secret, web } from './fixtures.ts';
import { type InProcessService, startInProcess } from './in-process.ts';
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

const TOKEN = 'c0ffee00c0ffee00c0ffee00c0ffee00';

/** Argo CD played for the Application `namespace/shop`, syncing into its own namespace. */
const shop = (kube: Kube, namespace: string) =>
  ArgoCdPlayer.start({
    kube,
    appNamespace: namespace,
    appName: 'shop',
    destination: namespace,
    mode: 'client-side-apply',
  });

/**
 * The service in this process, with the webhook on and a ServiceAccount that RBAC denies Applications
 * (Argo CD in another cluster): notifications alone say when the app's syncs run and end.
 */
async function startNotified(kube: Kube, namespace: string, extra: string[] = []): Promise<InProcessService> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-token-'));
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, TOKEN);
  const svc = await startInProcess(await restrictedKubeConfig(kube, namespace), [
    `--namespaces=${namespace}`,
    `--release-namespace=${namespace}`,
    `--hash-key-file=${await hashKeyFile()}`,
    `--argocd-namespaces=${namespace}`,
    `--webhook-token-file=${tokenFile}`,
    '--debounce=1s',
    '--max-debounce-wait=2s',
    '--min-reload-interval=0s',
    ...extra,
  ]);
  try {
    await svc.waitForLog('no Application access', (l) =>
      l.msg.startsWith('cannot list Argo CD Applications'),
    );
  } catch (err) {
    await svc.stop();
    throw err;
  }
  return svc;
}

/** Runs `body`, printing the service's last log lines if it fails; stops the service either way. */
async function runThenStop(svc: InProcessService, body: () => Promise<void>): Promise<void> {
  try {
    await body();
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
    const player = await shop(kube, namespace);
    await player.sync([
      [cm('app', { k: '1' }), secret('creds', { p: '1' })],
      [web('web', { configMaps: ['app'], secrets: ['creds'], replicas: 2 })],
    ]);
    const before = await waitReadyPods(kube, namespace, 'web', 2);

    const svc = await startNotified(kube, namespace);
    await runThenStop(svc, async () => {
      // Argo CD notifies the initial sync: from then on the service holds this app's changes.
      const initial = await readArgoObject(kube.custom, 'Application', namespace, 'shop');
      const [first] = await runNotify(bin, [initial], { token: TOKEN, url: svc.webhookUrl, send: true });
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
      // Decided: held until the notification of the sync's end (the status says so, nothing else).
      await expectHeld(svc, `Deployment/${namespace}/web`);
      expect(await reloadedCount(kube, namespace, 'web'), 'web was reloaded').toBe(0);
      await player.apply(op, [secret('creds', { p: '2' })]);
      await svc.waitForLog(
        'creds held',
        (l) =>
          l.msg === 'config change held until the Argo CD sync ends' && String(l.configs).endsWith('/creds'),
      );
      await player.finishSync(op);

      // Argo CD's notifications controller sees the ended operation and delivers.
      const app = await readArgoObject(kube.custom, 'Application', namespace, 'shop');
      const [delivered] = await runNotify(bin, [app], { token: TOKEN, url: svc.webhookUrl, send: true });
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
      const [again] = await runNotify(bin, [app], { token: TOKEN, url: svc.webhookUrl, send: true });
      expect(again?.sent).toBe(true);
      await svc.waitForLog('duplicate', (l) => l.msg === 'Argo CD notification was a duplicate');
      // Decided (a duplicate), and nothing under way for web: a second reload would be waited for.
      await idle(svc, `Deployment/${namespace}/web`);
      expect(await reloadedCount(kube, namespace, 'web'), 'reloads').toBe(1);
      tracker.stop();
      expect(tracker.newSince(before)).toHaveLength(2);

      // And a wrong token is refused by the engine's delivery, which reports the 401.
      const [refused] = await runNotify(bin, [app], { token: 'wrong', url: svc.webhookUrl, send: true });
      expect(refused?.error).toMatch(/401/);
    });
  });
});

/** POSTs one notification body to the webhook, as Argo CD's webhook service does; the answer. */
async function post(svc: InProcessService, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(svc.webhookUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** A notification of the app `namespace/shop`, in the shape the shipped template renders (docs/argocd.md). */
function notification(namespace: string, phase: string, startedAt: string) {
  const ended = phase !== 'Running';
  return {
    version: 1,
    app: { namespace, name: 'shop' },
    phase,
    startedAt,
    finishedAt: ended ? new Date(Date.parse(startedAt) + 9_000).toISOString().replace('.000Z', 'Z') : null,
    revision: ended ? 'abc' : null,
    revisions: null,
    resources: ended
      ? [
          { group: '', version: 'v1', kind: 'ConfigMap', namespace, name: 'app', status: 'Synced' },
          { group: 'apps', version: 'v1', kind: 'Deployment', namespace, name: 'web', status: 'Synced' },
        ]
      : null,
  };
}

/** The webhook's answer to a notification of `namespace/shop` it accepted, with the gate's action. */
const acceptedAs = (namespace: string) => (startedAt: string, action: string) => ({
  status: 202,
  body: { status: 'accepted', app: `${namespace}/shop`, startedAt, action },
});

/**
 * web (2 replicas, reading ConfigMap app) reloads for app: both pods replaced and Ready, the reload
 * complete, nothing more under way for web (no second reload), and each old pod replaced once.
 */
async function expectOneReloadOfWeb(
  kube: Kube,
  namespace: string,
  svc: InProcessService,
  before: readonly PodView[],
  tracker: PodTracker,
): Promise<void> {
  const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
  expect(ev.message).toMatch(/ConfigMap\/app/);
  await waitAllReplaced(kube, namespace, 'web', before, 2);
  const done = await svc.waitForLog(
    'reload complete',
    (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
    60_000,
  );
  expect(done.replaced).toBe(2);
  // Nothing more under way for web: a second reload would be waited for, and counted.
  await idle(svc, `Deployment/${namespace}/web`);
  expect(await reloadedCount(kube, namespace, 'web'), 'reloads').toBe(1);
  tracker.stop();
  expect(tracker.newSince(before), 'each pod replaced once').toHaveLength(2);
}

/** The app shop syncs ConfigMap app and web (2 replicas, reading it); web's pods once Ready. */
async function shopWithWeb(kube: Kube, namespace: string) {
  const player = await shop(kube, namespace);
  await player.sync([[cm('app', { k: '1' })], [web('web', { configMaps: ['app'], replicas: 2 })]]);
  return { player, before: await waitReadyPods(kube, namespace, 'web', 2) };
}

describe('notifications delivered out of order', () => {
  it('seed 6291: a late Failed end of an older sync, after a newer sync Succeeded, is ignored under --argocd-on-failed-sync=hold and holds nothing', async ({
    kube,
    namespace,
  }) => {
    // Operation 1 runs; operation 2 runs and succeeds; then operation 1's Failed end arrives (its
    // delivery was retried, or it sat in an inbox record). Operation 2's write of `app` reaches the
    // service after both notifications (its watch lagged), within the grace in which a config the
    // notification listed counts as that sync's own late change. Before the fix the stale Failed end
    // set the app's failed-sync hold: the change was held with no safety release, until some future
    // sync of the app succeeded, so web kept the old config. Now it is ignored and web reloads once.
    const { player, before } = await shopWithWeb(kube, namespace);
    const svc = await startNotified(kube, namespace, ['--argocd-on-failed-sync=hold']);
    await runThenStop(svc, async () => {
      await svc.waitForLog(
        'web baseline',
        (l) => l.msg === 'baseline recorded' && l.workload === 'Deployment/web',
      );
      const tracker = await PodTracker.start(kube, namespace, 'web');
      const t1 = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000).toISOString().replace('.000Z', 'Z');
      const t2 = new Date(Date.parse(t1) + 30_000).toISOString().replace('.000Z', 'Z');
      const accepted = acceptedAs(namespace);

      expect(await post(svc, notification(namespace, 'Running', t1))).toEqual(
        accepted(t1, 'noted a running sync'),
      );
      expect(await post(svc, notification(namespace, 'Running', t2))).toEqual(
        accepted(t2, 'noted a running sync'),
      );
      // Taken before the post: the grace, counted from when the gate took the notification, ends later.
      const succeededBy = Date.now();
      expect(await post(svc, notification(namespace, 'Succeeded', t2))).toEqual(
        accepted(t2, 'sync Succeeded'),
      );
      // The end of operation 1, late: the webhook says it was ignored.
      expect(await post(svc, notification(namespace, 'Failed', t1))).toEqual(
        accepted(t1, 'ignored: a newer sync already ended'),
      );

      const mark = svc.logs.length;
      await player.apply(await player.startSync('rev-2'), [cm('app', { k: '2' })]);
      const seen = await svc.waitForLog(
        'the change of app seen',
        (l) => svc.logs.indexOf(l) >= mark && l.msg === 'config changed' && String(l.config).endsWith('/app'),
      );
      // The case under test: the change came within the grace of operation 2's end.
      expect(
        Date.parse(String(seen.time)) - succeededBy,
        'the change was seen within the grace',
      ).toBeLessThan(UNWATCHED_GRACE_MS);

      await expectOneReloadOfWeb(kube, namespace, svc, before, tracker);
      // Nothing was held, and no failed-sync hold was set.
      const after = svc.logs.slice(mark);
      expect(after.filter((l) => l.msg === 'config change held until the Argo CD sync ends')).toEqual([]);
      expect(svc.logs.filter((l) => l.msg.startsWith('Argo CD sync did not succeed'))).toEqual([]);
    });
  });

  it('a late Succeeded end of an older sync, delivered while a newer sync runs, is ignored: web reloads once, after the newer sync ends', async ({
    kube,
    namespace,
  }) => {
    // Operation 1 runs and ends, but its end notification is delayed (a retried delivery); operation 2
    // starts, its Running notification arrives, and its apply changes `app`, which is held. Then
    // operation 1's Succeeded end arrives. Before the fix the gate only remembered ended operations, so
    // this end was taken as current: it released what was held for operation 2 and web reloaded in the
    // middle of operation 2, not once after it. Now the gate knows a newer sync started and ignores it.
    const { player, before } = await shopWithWeb(kube, namespace);
    const svc = await startNotified(kube, namespace);
    await runThenStop(svc, async () => {
      await svc.waitForLog(
        'web baseline',
        (l) => l.msg === 'baseline recorded' && l.workload === 'Deployment/web',
      );
      const tracker = await PodTracker.start(kube, namespace, 'web');
      const accepted = acceptedAs(namespace);
      const reloadStarts = () =>
        svc.logs.filter((l) => l.msg === 'reload started' && l.workload === 'Deployment/web');

      const t1 = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000).toISOString().replace('.000Z', 'Z');
      expect(await post(svc, notification(namespace, 'Running', t1))).toEqual(
        accepted(t1, 'noted a running sync'),
      );
      const op2 = await player.startSync('rev-2');
      const t2 = op2.startedAt;
      expect(Date.parse(t2)).toBeGreaterThan(Date.parse(t1));
      expect(await post(svc, notification(namespace, 'Running', t2))).toEqual(
        accepted(t2, 'noted a running sync'),
      );

      // Operation 2's apply changes app: held until operation 2 ends.
      const mark = svc.logs.length;
      await player.apply(op2, [cm('app', { k: '2' })]);
      await svc.waitForLog(
        'app held',
        (l) =>
          svc.logs.indexOf(l) >= mark &&
          l.msg === 'config change held until the Argo CD sync ends' &&
          String(l.configs).endsWith('/app'),
      );

      // Operation 1's end, late. Soft, so that without the fix the run also shows what it did: reload.
      const lateAt = Date.now();
      const late = await post(svc, notification(namespace, 'Succeeded', t1));
      expect.soft(late).toEqual(accepted(t1, 'ignored: a newer sync already started'));
      // The gate decided as it answered: what it holds for operation 2 stays held (a release would
      // show in the status at once, as a batch or a reload), and no reload started.
      const started = reloadStarts();
      expect(
        started,
        `web's reload started ${Date.parse(String(started[0]?.time)) - lateAt} ms after operation 1's late end was posted, while operation 2 ran`,
      ).toEqual([]);
      await expectHeld(svc, `Deployment/${namespace}/web`);
      expect(await reloadedCount(kube, namespace, 'web'), 'web was reloaded').toBe(0);

      // Operation 2 ends: what it changed is released as one batch.
      await player.finishSync(op2);
      const endMark = svc.logs.length;
      expect(await post(svc, notification(namespace, 'Succeeded', t2))).toEqual(
        accepted(t2, 'sync Succeeded'),
      );
      await expectOneReloadOfWeb(kube, namespace, svc, before, tracker);

      // One reload, started after the gate took operation 2's end.
      const starts = reloadStarts();
      expect(starts, 'one reload of web').toHaveLength(1);
      const ended = svc.logs.findIndex(
        (l, i) => i >= endMark && l.msg === 'Argo CD sync ended' && l.startedAt === t2,
      );
      expect(ended, "the gate took operation 2's end").toBeGreaterThanOrEqual(endMark);
      expect(svc.logs.indexOf(starts[0] as (typeof starts)[number])).toBeGreaterThan(ended);
      // Operation 1's end ended nothing.
      expect(svc.logs.filter((l) => l.msg === 'Argo CD sync ended' && l.startedAt === t1)).toEqual([]);
    });
  });
});
