// Notifications from the real Argo CD v3.6: the shipped argocd-plugin/notifications config installed
// as docs/argocd.md says, evaluated and delivered by Argo CD's own notifications controller (its
// informer, its "already notified" state on the Application, its subscription annotation) to
// gitops-reloader. The service runs with a ServiceAccount that RBAC denies Applications, as when Argo
// CD runs in another cluster: the notification alone ends the hold and drives the reload.
//
// The notifications controller reads one argocd-notifications-cm and -secret in Argo CD's namespace,
// shared by every test: these tests run one after another, each pointing the webhook at its service.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, describe, expect, type TestContext } from 'vitest';
import { UNWATCHED_GRACE_MS } from '../../../service/argocd/gate.ts';
import { WEBHOOK_PATH } from '../../../service/argocd/webhook.ts';
import {
  type Application,
  ArgoApp,
  argocdEndpoints,
  GitRepo,
  type Manifest,
  toFiles,
} from '../../support/argocd.ts';
import { syncApplication } from '../../support/argocd-api.ts';
import {
  installNotifications,
  SUBSCRIBE,
  uninstallNotifications,
} from '../../support/argocd-notifications.ts';
import { idle } from '../../support/decisions.ts';
import { adminKubeConfig, clients, it, type Kube } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { restrictedKubeConfigFile } from '../../support/restricted-service-account.ts';
import { hashKeyFile, type LogLine, type RunningService, startService } from '../../support/service.ts';
import { pending, waitFor } from '../../support/wait-for.ts';
import { cm, postSyncHook, reloadedCount, secret, web } from '../fixtures.ts';

afterAll(async () => {
  await uninstallNotifications(clients(adminKubeConfig()));
});

const TOKEN = 'f00dfeedf00dfeedf00dfeedf00dfeed';

interface Unwatched {
  svc: RunningService;
  url: string;
}

/** gitops-reloader with the webhook on and no right to read Applications. */
async function startUnwatched(
  kube: Kube,
  namespace: string,
  onTestFinished: TestContext['onTestFinished'],
): Promise<Unwatched> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-notify-'));
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, TOKEN, { mode: 0o600 });
  const svc = startService([
    'serve',
    `--kubeconfig=${await restrictedKubeConfigFile(kube, namespace, dir)}`,
    `--namespaces=${namespace}`,
    `--release-namespace=${namespace}`,
    `--hash-key-file=${await hashKeyFile()}`,
    '--log-level=debug',
    '--min-reload-interval=0s',
    '--http-address=127.0.0.1:0',
    `--argocd-namespaces=${argocdEndpoints().namespace}`,
    `--webhook-token-file=${tokenFile}`,
    '--debounce=1s',
    '--max-debounce-wait=2s',
  ]);
  onTestFinished(() => svc.kill());
  const listening = await svc.waitForLog('http listening', (l) => l.msg === 'http listening');
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  await svc.waitForLog('no Application access', (l) => l.msg.startsWith('cannot list Argo CD Applications'));
  const url = `${listening.url as string}${WEBHOOK_PATH}`;
  await installNotifications(kube, { url, token: TOKEN });
  return { svc, url };
}

const at = (l: LogLine) => Date.parse(String(l.time));
const logsOf = (svc: RunningService, msg: string) => svc.logs.filter((l) => l.msg === msg);

/**
 * Waits for Argo CD's notification of the operation that started at `startedAt`, then for the short
 * grace in which configs that notification listed count as its own late changes.
 */
async function waitNotified(svc: RunningService, app: string, startedAt: string): Promise<LogLine> {
  const accepted = await svc.waitForLog(
    `notification of ${app}@${startedAt}`,
    // Taken at once by the replica that received it, or recorded and taken from the inbox (ADR 0013).
    (l) =>
      (l.msg === 'Argo CD notification accepted' || l.msg === 'Argo CD notification taken from the inbox') &&
      l.app === `argocd/${app}` &&
      l.startedAt === startedAt,
    120_000,
  );
  const seen = Date.now();
  await waitFor(() => (Date.now() >= seen + UNWATCHED_GRACE_MS ? true : pending(Date.now() - seen)), {
    describe: 'the grace after a notification',
    timeout: UNWATCHED_GRACE_MS + 5_000,
  });
  return accepted;
}

/**
 * What every case asserts after Argo CD's operation `op` changed web's configs: the change was held,
 * the notification of exactly that operation released it, and one reload replaced each pod once,
 * starting after the operation ended.
 */
async function expectOneReloadFromNotification(
  kube: Kube,
  namespace: string,
  u: Unwatched,
  op: NonNullable<NonNullable<Application['status']>['operationState']>,
  before: Awaited<ReturnType<typeof waitReadyPods>>,
  pods: PodTracker,
  configs: string[],
): Promise<void> {
  const { svc } = u;
  const event = await waitForEvent(kube, namespace, 'Reloaded', 'web', 120_000);
  await waitAllReplaced(kube, namespace, 'web', before, 2);
  const done = await svc.waitForLog(
    'reload complete',
    (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
    60_000,
  );
  // Nothing more under way for web: a second reload would be waited for, and counted.
  await idle(svc, `Deployment/${namespace}/web`);
  expect(await reloadedCount(kube, namespace, 'web'), 'reloads').toBe(1);
  pods.stop();

  // Held from the moment they were seen, since this app notifies us…
  for (const c of configs)
    expect(
      svc.logs.some(
        (l) =>
          l.msg === 'config change held until the Argo CD sync ends' &&
          String(l.configs) === c.replace('/', `/${namespace}/`),
      ),
      `${c} was held`,
    ).toBe(true);
  // …and released by the notification of this very operation (the service cannot read the
  // Application), not by the safety timer.
  const ended = logsOf(svc, 'Argo CD sync ended').filter((l) => l.startedAt === op.startedAt);
  expect(ended, 'one end of this operation').toHaveLength(1);
  expect(ended[0]?.via).toBe('notification');
  expect(ended[0]?.phase).toBe(op.phase);
  expect(logsOf(svc, 'no Argo CD notification ended the sync in time')).toHaveLength(0);

  // One reload, started after an operation of this commit ended. Argo CD may run a second operation
  // of the same revision (a refresh right after the first saw the app out of sync, and selfHeal
  // synced it again: CI run of 78baf58, reload 44 ms before the second one's finishedAt): `op` is
  // then the second, and the first one's notification released the change. So the release is the
  // end the service logged last before the reload: by a notification, after the changes were held,
  // of an operation no later than `op`.
  const started = logsOf(svc, 'reload started');
  expect(started).toHaveLength(1);
  const startedAt = at(started[0] as LogLine);
  const heldAt = Math.min(...logsOf(svc, 'config change held until the Argo CD sync ends').map(at));
  const ends = logsOf(svc, 'Argo CD sync ended');
  const release = ends.filter((l) => at(l) <= startedAt).at(-1);
  expect(release?.via, `the end before the reload: ${JSON.stringify(release)}`).toBe('notification');
  expect(at(release as LogLine)).toBeGreaterThanOrEqual(heldAt);
  expect(Date.parse(String(release?.startedAt))).toBeLessThanOrEqual(Date.parse(String(op.startedAt)));
  // Not a late word about an operation that had ended before the changes were seen.
  const endedBefore = ends.filter((l) => at(l) < heldAt).map((l) => l.startedAt);
  expect(endedBefore).not.toContain(release?.startedAt);
  for (const c of configs) expect(event.message).toContain(c);
  expect(done.replaced).toBe(2);
  expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
  expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
}

function manifests(v: string, extra: Manifest[] = []): Manifest[] {
  return [
    cm('app', { k: v }),
    secret('creds', { p: v }),
    web('web', { configMaps: ['app'], secrets: ['creds'], replicas: 2 }),
    ...extra,
  ];
}

// Not concurrent: the tests share argocd-notifications-cm (tests of one file run one at a time).
describe('notifications from the real Argo CD to a service that cannot read Applications', {
  timeout: 360_000,
}, () => {
  it('a succeeded sync: the notification releases the held changes, and web reloads once after the operation', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const u = await startUnwatched(kube, namespace, onTestFinished);
    const repo = await GitRepo.create(namespace, toFiles(manifests('1')));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      annotations: SUBSCRIBE,
    });
    try {
      const first = await app.waitSynced(await repo.head());
      // The first notification tells the service this app's notifications reach it.
      await waitNotified(u.svc, namespace, first.status?.operationState?.startedAt as string);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(repo, toFiles(manifests('2')), 'Change both configs of web');
      const synced = await app.waitOperation(sha, 'Succeeded');
      const op = synced.status?.operationState;
      if (!op) throw new Error('no operationState');
      await expectOneReloadFromNotification(kube, namespace, u, op, before, pods, [
        'ConfigMap/app',
        'Secret/creds',
      ]);
      // Argo CD recorded what it sent in the Application (its "already notified" state).
      const notified = (await app.read()).metadata.annotations?.['notified.notifications.argoproj.io'];
      expect(notified).toContain(`${op.startedAt}:on-sync-ended-gitops-reloader`);
      await app.waitSynced(sha);
    } finally {
      await app.delete();
    }
  });

  it('a failed sync (a PostSync hook failed after the configs were applied): one reload after the operation, from its notification', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const u = await startUnwatched(kube, namespace, onTestFinished);
    const repo = await GitRepo.create(namespace, toFiles(manifests('1')));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      annotations: SUBSCRIBE,
      // Argo CD retries a failed automated sync (5 times by default, from 5 s doubling up to 3 min),
      // and the operation stays Running between attempts: one quick retry here.
      retry: { limit: 1, backoff: { duration: '1s', factor: 2, maxDuration: '5s' } },
    });
    try {
      const first = await app.waitSynced(await repo.head());
      await waitNotified(u.svc, namespace, first.status?.operationState?.startedAt as string);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(
        repo,
        toFiles(manifests('2', [postSyncHook({ fail: true })])),
        'Change both configs of web; add a PostSync hook that fails',
      );
      const failed = await app.waitOperation(sha, 'Failed', 180_000);
      const op = failed.status?.operationState;
      if (!op) throw new Error('no operationState');
      const hook = op.syncResult?.resources?.find((r) => r.name === 'post');
      expect(hook?.hookPhase, JSON.stringify(op.syncResult?.resources)).toBe('Failed');
      // One operation, retried once: Failed only after its retry, and notified once, at the end.
      expect(op.retryCount).toBe(1);
      // The configs were applied before the hook ran.
      const applied = op.syncResult?.resources?.filter((r) => r.kind === 'ConfigMap' || r.kind === 'Secret');
      expect(applied?.map((r) => r.name).sort()).toEqual(['app', 'creds']);
      await expectOneReloadFromNotification(kube, namespace, u, op, before, pods, [
        'ConfigMap/app',
        'Secret/creds',
      ]);
    } finally {
      await app.delete();
    }
  });

  it('config and template in one commit: the Deployment is rolled once, by its own controller, and gitops-reloader adds no restart', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const u = await startUnwatched(kube, namespace, onTestFinished);
    const files = (v: string) =>
      toFiles([
        cm('app', { k: v }),
        secret('creds', { p: '1' }),
        web('web', {
          configMaps: ['app'],
          secrets: ['creds'],
          replicas: 2,
          image: `registry.invalid/app:${v}`,
        }),
      ]);
    const repo = await GitRepo.create(namespace, files('1'));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      annotations: SUBSCRIBE,
    });
    try {
      const first = await app.waitSynced(await repo.head());
      await waitNotified(u.svc, namespace, first.status?.operationState?.startedAt as string);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(repo, files('2'), 'New image and new config');
      const synced = await app.waitOperation(sha, 'Succeeded');
      const op = synced.status?.operationState;
      const ended = await u.svc.waitForLog(
        'the notification of the commit',
        (l) => l.msg === 'Argo CD sync ended' && l.startedAt === op?.startedAt && l.via === 'notification',
        120_000,
      );
      const notNeeded = await waitForEvent(kube, namespace, 'ReloadNotNeeded', 'web', 120_000);
      await waitAllReplaced(kube, namespace, 'web', before, 2);
      // Decided (ReloadNotNeeded), nothing more under way for web: a restart would be waited for.
      await idle(u.svc, `Deployment/${namespace}/web`);
      pods.stop();

      // The notification came after the rollout had started: Argo CD notifies only once the app
      // was reconciled after the operation ended.
      const rolloutStart = Math.min(...pods.newSince(before).map((p) => p.createdAt));
      expect(at(ended)).toBeGreaterThan(rolloutStart);
      expect(notNeeded.message).toBeTruthy();
      expect(pods.newSince(before), 'one new pod per replica: the rollout only').toHaveLength(2);
      expect(await reloadedCount(kube, namespace, 'web')).toBe(0);
      await app.waitSynced(sha);
    } finally {
      await app.delete();
    }
  });

  it('a pod a later sync wave adds after the config changed is not restarted: the cutoff is when the config changed, not when the notification came', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const u = await startUnwatched(kube, namespace, onTestFinished);
    const wave = (m: Manifest, n: number): Manifest => ({
      ...m,
      metadata: {
        ...m.metadata,
        annotations: { ...m.metadata.annotations, 'argocd.argoproj.io/sync-wave': String(n) },
      },
    });
    // The config in wave 0, an unrelated ConfigMap in wave 1, web (scaled up by the commit) in wave 2:
    // Argo CD waits between waves, so web's new pod is created seconds after the config changed, and
    // the notification, sent once the app was reconciled after the operation, comes later still.
    const files = (v: string, replicas: number) =>
      toFiles([
        wave(cm('app', { k: v }), 0),
        wave(secret('creds', { p: '1' }), 0),
        wave(cm('other', { v }), 1),
        wave(web('web', { configMaps: ['app'], secrets: ['creds'], replicas }), 2),
      ]);
    const repo = await GitRepo.create(namespace, files('1', 2));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      annotations: SUBSCRIBE,
    });
    try {
      const first = await app.waitSynced(await repo.head());
      await waitNotified(u.svc, namespace, first.status?.operationState?.startedAt as string);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(repo, files('2', 3), 'New config; web scaled to 3');
      await app.waitOperation(sha, 'Succeeded');
      await waitForEvent(kube, namespace, 'Reloaded', 'web', 120_000);
      await u.svc.waitForLog(
        'reload complete',
        (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
        60_000,
      );
      const after = await waitReadyPods(kube, namespace, 'web', 3);
      pods.stop();

      const started = logsOf(u.svc, 'reload started');
      expect(started).toHaveLength(1);
      const reloadAt = at(started[0] as LogLine);
      const held = u.svc.logs.find(
        (l) =>
          l.msg === 'config change held until the Argo CD sync ends' && String(l.configs).endsWith('/app'),
      );
      // The scale-up pod: created after the config changed (it reads the new config), before the reload.
      // Not a surge pod of the reload: one handed to the ReplicaSet (ADR 0019) is among newSince, and
      // its whole-second creationTimestamp can fall in the second the reload started.
      const scaled = pods.newSince(before).filter((p) => !p.surge && p.createdAt < reloadAt);
      expect(scaled, 'one pod added by the scale-up before the reload').toHaveLength(1);
      expect(scaled[0]?.createdAt).toBeGreaterThanOrEqual(Math.floor(at(held as LogLine) / 1000) * 1000);
      expect(
        after.map((p) => p.uid),
        'the scale-up pod is still running: not restarted',
      ).toContain(scaled[0]?.uid);
      expect(pods.newSince(before), 'two replacements and the scale-up pod').toHaveLength(3);
      expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
    } finally {
      await app.delete();
    }
  });

  it('a re-sync of the same revision through the API that changes a config: notified again, one reload', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const u = await startUnwatched(kube, namespace, onTestFinished);
    // The ConfigMap is rendered by Argo CD's built-in Jsonnet from an external variable set on the
    // Application, so the same git revision renders a different config once the variable changes.
    const repo = await GitRepo.create(namespace, {
      ...toFiles([
        secret('creds', { p: '1' }),
        web('web', { configMaps: ['app'], secrets: ['creds'], replicas: 2 }),
      ]),
      'manifests/app.jsonnet':
        "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'app' }, data: { k: std.extVar('k') } }\n",
    });
    const source = (k: string) => ({ directory: { jsonnet: { extVars: [{ name: 'k', value: k }] } } });
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      annotations: SUBSCRIBE,
      automated: false,
      source: source('1'),
    });
    try {
      const revision = await repo.head();
      await syncApplication(namespace, { revision, prune: true });
      const first = await app.waitSynced(revision);
      const firstStart = first.status?.operationState?.startedAt as string;
      await waitNotified(u.svc, namespace, firstStart);
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const pods = await PodTracker.start(kube, namespace, 'web');

      // `argocd app set --jsonnet-ext-var-str k=2`, then `argocd app sync`: the same revision again.
      await kube.custom.patchNamespacedCustomObject(
        {
          group: 'argoproj.io',
          version: 'v1alpha1',
          namespace: app.namespace,
          plural: 'applications',
          name: app.name,
          body: { spec: { source: { ...source('2') } } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await syncApplication(namespace, { revision, prune: true });
      const again = await app.waitFor(
        'a second operation on the same revision Succeeded',
        (a) =>
          a.status?.operationState?.phase === 'Succeeded' &&
          a.status.operationState.startedAt !== firstStart &&
          !a.operation,
        120_000,
      );
      const op = again.status?.operationState;
      if (!op) throw new Error('no operationState');
      expect(op.syncResult?.revision, 'the same revision').toBe(revision);
      const live = await kube.core.readNamespacedConfigMap({ name: 'app', namespace });
      expect(live.data?.k).toBe('2');
      await expectOneReloadFromNotification(kube, namespace, u, op, before, pods, ['ConfigMap/app']);
      await app.waitSynced(revision);
    } finally {
      await app.delete();
    }
  });
});
