// Sync-aware batching against the real control plane. test/support/argocd-player.ts plays Argo CD
// (Application status, tracking annotation, field manager argocd-controller, three apply modes);
// gitops-reloader runs as a real process watching the Application. What is asserted is what a user
// sees: pods, Events, generations, the live pod template.
import { afterEach, describe, expect } from 'vitest';
import { APPLY_MODES, type ApplyMode, ArgoCdPlayer, type Manifest } from '../support/argocd-player.ts';
import { engineStatus, expectHeld } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { livePods, PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { cm, reloadedCount, secret, stayQuiet, web } from './fixtures.ts';

afterEach(killAll);

async function start(namespace: string, extra: string[] = []): Promise<RunningService> {
  const svc = startService(
    serviceArgs(namespace, await hashKeyFile(), [
      `--argocd-namespaces=${namespace}`,
      '--debounce=1s',
      '--max-debounce-wait=2s',
      ...extra,
    ]),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  return svc;
}

async function generation(kube: Kube, namespace: string, name: string): Promise<number | undefined> {
  return (await kube.apps.readNamespacedDeployment({ name, namespace })).metadata?.generation;
}

const held = (svc: RunningService, config: string) =>
  svc.waitForLog(
    `${config} held`,
    (l) =>
      l.msg === 'config change held until the Argo CD sync ends' &&
      Boolean((l.configs as string[] | undefined)?.[0]?.endsWith(`/${config}`)),
  );

/**
 * Nothing but holds: no reload started or running, nothing debouncing or queued (the status lists
 * only changes held for the sync), and no Reloaded Event.
 */
const onlyHeld = (kube: Kube, namespace: string, svc: RunningService, names: string[]) => async () => {
  const started = svc.logs.find((l) => l.msg === 'reload started');
  if (started) return `a reload started: ${JSON.stringify(started)}`;
  const s = await engineStatus(svc);
  const other = [...(s.running ?? []), ...(s.waiting ?? []).filter((w) => w.why !== 'sync-hold')];
  if (other.length > 0) return `not only held: ${JSON.stringify(other)}`;
  for (const n of names) if ((await reloadedCount(kube, namespace, n)) > 0) return `${n} was reloaded`;
  return undefined;
};

describe('sync-aware batching', () => {
  it('reloads each Deployment once, after the sync ends, when a sync changes three ConfigMaps and a Secret across waves', async ({
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
    const configs = (v: string) => ({
      a: cm('a', { k: v }),
      b: cm('b', { k: v }),
      c: cm('c', { k: v }),
      s: secret('s', { password: v }),
    });
    const apps = [
      web('web', { configMaps: ['a', 'b'], secrets: ['s'], replicas: 2 }),
      web('api', { configMaps: ['b', 'c'], secrets: ['s'] }),
    ];
    const v1 = configs('1');
    await player.sync([[v1.a, v1.b, v1.c, v1.s], apps]);
    const webBefore = await waitReadyPods(kube, namespace, 'web', 2);
    const apiBefore = await waitReadyPods(kube, namespace, 'api', 1);
    const svc = await start(namespace);
    const generations = [await generation(kube, namespace, 'web'), await generation(kube, namespace, 'api')];
    const webPods = await PodTracker.start(kube, namespace, 'web');
    const apiPods = await PodTracker.start(kube, namespace, 'api');

    // One sync, three waves, lasting longer than the debounce: nothing may reload while it runs.
    const v2 = configs('2');
    const op = await player.startSync('rev-2');
    await svc.waitForLog(
      'sync started',
      (l) => l.msg === 'Argo CD sync started; holding changes to its configs',
    );
    const startedAt = Date.now();
    // The hold is decided (the held lines); what is tested is that it outlasts the debounce (1 s),
    // which only time shows: after each decision a window just past the debounce, in which a change
    // that was only debounced would have been batched (the status would show it queued or running).
    await player.apply(op, [v2.a]);
    await held(svc, 'a');
    await stayQuiet(1_200, onlyHeld(kube, namespace, svc, ['web', 'api']));
    await player.apply(op, [v2.b, v2.s]);
    await held(svc, 'b');
    await held(svc, 's');
    await stayQuiet(1_200, onlyHeld(kube, namespace, svc, ['web', 'api']));
    await player.apply(op, [v2.c, ...apps]);
    await held(svc, 'c');
    const endedAt = Date.now();
    await player.finishSync(op);

    const webEvent = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    const apiEvent = await waitForEvent(kube, namespace, 'Reloaded', 'api');
    await waitAllReplaced(kube, namespace, 'web', webBefore, 2);
    await waitAllReplaced(kube, namespace, 'api', apiBefore, 1);
    for (const w of ['web', 'api']) {
      await svc.waitForLog(
        `${w} reload complete`,
        (l) => l.msg === 'reload complete' && l.workload === `Deployment/${w}`,
      );
    }
    webPods.stop();
    apiPods.stop();
    const release = await svc.waitForLog(
      'release',
      (l) => l.msg === 'releasing config changes held for the sync as one batch',
    );
    expect(Date.parse(release.time as string)).toBeGreaterThanOrEqual(endedAt);
    expect(endedAt - startedAt, 'the sync ran longer than the debounce').toBeGreaterThan(1_000);

    // One reload each, naming every config of the sync it uses, started only after the sync ended.
    expect(webEvent.message).toMatch(/ConfigMap\/a.*ConfigMap\/b.*Secret\/s/);
    expect(apiEvent.message).toMatch(/ConfigMap\/b.*ConfigMap\/c.*Secret\/s/);
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
    expect(await reloadedCount(kube, namespace, 'api')).toBe(1);
    for (const l of svc.logs.filter((x) => x.msg === 'reload started')) {
      expect(Date.parse(l.time as string)).toBeGreaterThanOrEqual(endedAt);
    }
    expect(webPods.newSince(webBefore)).toHaveLength(2);
    expect(apiPods.newSince(apiBefore)).toHaveLength(1);
    expect([await generation(kube, namespace, 'web'), await generation(kube, namespace, 'api')]).toEqual(
      generations,
    );
  });

  it('restarts nothing itself when a sync changes both a Deployment image and its ConfigMap', async ({
    kube,
    namespace,
  }) => {
    const player = await ArgoCdPlayer.start({
      kube,
      appNamespace: namespace,
      appName: 'shop',
      destination: namespace,
      mode: 'server-side-apply',
    });
    await player.sync([[cm('app', { k: '1' })], [web('web', { configMaps: ['app'], replicas: 2 })]]);
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const svc = await start(namespace);
    const tracker = await PodTracker.start(kube, namespace, 'web');

    await player.sync([
      [cm('app', { k: '2' })],
      [web('web', { configMaps: ['app'], replicas: 2, image: 'registry.invalid/app:2' })],
    ]);
    const done = await svc.waitForLog(
      'web reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      60_000,
    );
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    tracker.stop();

    // The template rollout replaced the pods; we evicted none and made no surge pod.
    expect(done.replaced).toBe(0);
    expect(tracker.surgePods()).toEqual([]);
    expect(tracker.newSince(before)).toHaveLength(2);
    // Every pod that serves runs the new template (the rollout's last old pod may still be terminating).
    const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
    const serving = pods.items.filter((p) => !p.metadata?.deletionTimestamp);
    expect(serving).toHaveLength(2);
    for (const p of serving) expect(p.spec?.containers[0]?.image).toBe('registry.invalid/app:2');
  });

  it('reloads after a failed sync by default', async ({ kube, namespace }) => {
    const player = await ArgoCdPlayer.start({
      kube,
      appNamespace: namespace,
      appName: 'shop',
      destination: namespace,
      mode: 'replace',
    });
    await player.sync([[cm('app', { k: '1' })], [web('web', { configMaps: ['app'] })]]);
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const svc = await start(namespace);
    await player.sync([[cm('app', { k: '2' })]], { phase: 'Failed' });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(kube, namespace, 'web', before, 1);
    await svc.waitForLog(
      'released',
      (l) =>
        l.msg === 'releasing config changes held for the sync as one batch' && l.reason === 'sync Failed',
    );
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
  });

  it('keeps the changes of a failed sync held with --argocd-on-failed-sync=hold, until a later sync succeeds', async ({
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
    await player.sync([[cm('app', { k: '1' })], [web('web', { configMaps: ['app'] })]]);
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const svc = await start(namespace, ['--argocd-on-failed-sync=hold']);

    await player.sync([[cm('app', { k: '2' })]], { phase: 'Failed' });
    await svc.waitForLog(
      'held after failure',
      (l) => l.msg.startsWith('Argo CD sync did not succeed') && l.held === 1,
    );
    // Decided: the change stays held (the status says so, and nothing else is under way for web).
    await expectHeld(svc, `Deployment/${namespace}/web`);
    expect(await reloadedCount(kube, namespace, 'web'), 'web was reloaded').toBe(0);
    expect(
      (await livePods(kube, namespace, 'web')).map((p) => p.uid),
      'no pod replaced',
    ).toEqual(before.map((p) => p.uid));

    // A later sync that succeeds (here: the same revision again, nothing new) releases them.
    await player.sync([[cm('app', { k: '2' })]], { phase: 'Succeeded' });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(kube, namespace, 'web', before, 1);
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
  });

  describe.each(APPLY_MODES)('applied with %s', (mode: ApplyMode) => {
    it('keeps the live template equal to git over 5 syncs with config changes, reloading once per sync', async ({
      kube,
      namespace,
    }) => {
      const player = await ArgoCdPlayer.start({
        kube,
        appNamespace: namespace,
        appName: 'shop',
        destination: namespace,
        mode,
      });
      const app = web('web', { configMaps: ['app'] });
      await player.sync([[cm('app', { k: '0' })], [app]]);
      let pods = await waitReadyPods(kube, namespace, 'web', 1);
      const svc = await start(namespace);
      const gen = await generation(kube, namespace, 'web');
      const expected = await defaultedTemplate(kube, player, app);
      for (let i = 1; i <= 5; i++) {
        await player.sync([[cm('app', { k: String(i) })], [app]]);
        // Argo CD's write settles first. Replace drops the controller's revision annotation, and a
        // Deployment's generation counts annotation changes too: there git moves it, not us.
        const settled = await settledGeneration(kube, namespace, 'web');
        if (mode !== 'replace') expect(settled, `sync ${i}`).toBe(gen);
        await waitFor(
          async () => {
            const n = await reloadedCount(kube, namespace, 'web');
            return n >= i ? n : pending(n);
          },
          { describe: `reload ${i}`, timeout: 60_000 },
        );
        pods = await waitAllReplaced(kube, namespace, 'web', pods, 1);
        const live = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
        expect(live.metadata?.generation, `sync ${i}: the reload moved the generation`).toBe(settled);
        expect(canonicalJson(live.spec?.template), `sync ${i}`).toBe(canonicalJson(expected));
        const managers = new Set((live.metadata?.managedFields ?? []).map((f) => f.manager));
        expect([...managers].sort(), `sync ${i}: writers of the Deployment`).toEqual(
          ['argocd-controller', 'kube-controller-manager'].filter((m) => managers.has(m)),
        );
      }
      expect(await reloadedCount(kube, namespace, 'web')).toBe(5);
      expect(svc.logs.filter((l) => l.msg === 'reload complete')).toHaveLength(5);
    });
  });
});

/** The generation once the deployment controller has observed it and restored its annotations. */
async function settledGeneration(kube: Kube, namespace: string, name: string): Promise<number> {
  return waitFor(
    async () => {
      const d = await kube.apps.readNamespacedDeployment({ name, namespace });
      const g = d.metadata?.generation ?? 0;
      const ok =
        d.status?.observedGeneration === g && d.metadata?.annotations?.['deployment.kubernetes.io/revision'];
      return ok ? g : pending({ generation: g, observed: d.status?.observedGeneration });
    },
    { describe: `${name} observed by its controller`, timeout: 30_000 },
  );
}

/** The pod template the API server makes of the manifest (defaults applied), by a dry-run create. */
async function defaultedTemplate(kube: Kube, player: ArgoCdPlayer, m: Manifest): Promise<unknown> {
  const probe = player.rendered(m);
  probe.metadata.name = `${m.metadata.name}-dry-run`;
  delete probe.metadata.annotations;
  const created = (await player.objects.create(probe, undefined, 'All')) as unknown as {
    spec: { template: unknown };
  };
  void kube;
  return created.spec.template;
}

function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}
