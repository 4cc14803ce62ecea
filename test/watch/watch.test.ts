// The list+watch adapter against the real API server: initial list, live events, lean storage, 410 Gone
// recovery, periodic relist, selectors, RBAC failures, server-ended and silent watches, and a clean stop.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Watch as ClientWatch, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, inject, onTestFinished } from 'vitest';
import {
  type RawObject,
  startWatch,
  type WatchFailure,
  type WatchOptions,
} from '../../service/kube/watch.ts';
import { it, type Kube } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { deployment } from '../support/workloads.ts';

type Ev<S> =
  | { type: 'add'; key: string; value: S }
  | { type: 'update'; key: string; value: S; old: S }
  | { type: 'delete'; key: string; old: S }
  | { type: 'synced' };

/** Records every handler call and failure report, in order. */
function recorder<S>() {
  const events: Ev<S>[] = [];
  const failures: WatchFailure[] = [];
  const handlers = {
    onAdd: (key: string, value: S) => events.push({ type: 'add', key, value }),
    onUpdate: (key: string, value: S, old: S) => events.push({ type: 'update', key, value, old }),
    onDelete: (key: string, old: S) => events.push({ type: 'delete', key, old }),
    onSynced: () => events.push({ type: 'synced' }),
    onFailure: (f: WatchFailure) => failures.push(f),
  };
  const about = (key: string) => events.filter((e) => e.type !== 'synced' && e.key === key);
  return { events, failures, handlers, about };
}

/** Starts a watch that is stopped when the test ends, with short backoffs so tests stay quick. */
function watchFor<S>(kc: KubeConfig, o: WatchOptions<S>) {
  const w = startWatch(kc, { backoff: { initialMs: 100, maxMs: 1000 }, ...o });
  onTestFinished(() => w.stop());
  return w;
}

/** What most tests keep of a ConfigMap: its `v` key. */
const keepV = (raw: RawObject) => ({ v: (raw.data as Record<string, string> | undefined)?.v });

async function createCm(
  kube: Kube,
  namespace: string,
  name: string,
  v: string,
  labels?: Record<string, string>,
) {
  return kube.core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name, labels }, data: { v } },
  });
}

async function setCm(kube: Kube, namespace: string, name: string, v: string) {
  const cm = await kube.core.readNamespacedConfigMap({ name, namespace });
  cm.data = { ...cm.data, v };
  return kube.core.replaceNamespacedConfigMap({ name, namespace, body: cm });
}

const cmPath = (namespace: string) => `/api/v1/namespaces/${namespace}/configmaps`;

/** The first event of a raw watch from resourceVersion, read with client-node's own Watch (not ours). */
async function firstWatchEvent(kc: KubeConfig, path: string, resourceVersion: string) {
  return new Promise<{ type: string; object: { code?: number; reason?: string; message?: string } }>(
    (resolve, reject) => {
      let got = false;
      let controller: AbortController | undefined;
      new ClientWatch(kc)
        .watch(
          path,
          { resourceVersion, allowWatchBookmarks: true },
          (type, object) => {
            if (got) return;
            got = true;
            resolve({ type, object });
            controller?.abort();
          },
          (err) => {
            if (!got) reject(err ?? new Error(`watch of ${path} ended without an event`));
          },
        )
        .then((c) => {
          controller = c;
          if (got) c.abort();
        }, reject);
    },
  );
}

const rolloutsPath = (namespace: string) => `/apis/argoproj.io/v1alpha1/namespaces/${namespace}/rollouts`;
const rolloutApi = { group: 'argoproj.io', version: 'v1alpha1', plural: 'rollouts' } as const;

/**
 * A Rollout as a plain custom object for the watch tests: the real Argo Rollouts controller of
 * test/cluster (no instance id) acts only on Rollouts without an instance-id label, so this one is
 * left alone and changes only when the test changes it.
 */
function rollout(name: string, replicas: number) {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    metadata: { name, labels: { 'argo-rollouts.argoproj.io/controller-instance-id': 'unmanaged' } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
      strategy: { canary: { steps: [{ setWeight: 50 }] } },
    },
  };
}

async function setReplicas(kube: Kube, namespace: string, name: string, replicas: number) {
  const ro = (await kube.custom.getNamespacedCustomObject({ ...rolloutApi, namespace, name })) as ReturnType<
    typeof rollout
  >;
  ro.spec.replicas = replicas;
  await kube.custom.replaceNamespacedCustomObject({ ...rolloutApi, namespace, name, body: ro });
}

describe('startWatch', () => {
  it('lists existing ConfigMaps page by page as adds, then reports synced once', async ({
    kube,
    namespace,
  }) => {
    const names = ['a', 'b', 'c', 'd', 'e'];
    for (const n of names) await createCm(kube, namespace, n, n, { set: 'one' });
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'set=one',
      pageSize: 2,
      transform: keepV,
      ...r.handlers,
    });
    await waitFor(() => (w.synced ? true : pending(r.events)), { describe: 'the watch to sync' });
    expect(r.events).toEqual([
      ...names.map((n) => ({ type: 'add', key: `${namespace}/${n}`, value: { v: n } })),
      { type: 'synced' },
    ]);
    expect([...w.store.keys()].sort()).toEqual(names.map((n) => `${namespace}/${n}`));
    expect(r.failures).toEqual([]);
  });

  it('sees ConfigMaps created, updated and deleted, with old values', async ({ kube, namespace }) => {
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, { path: cmPath(namespace), transform: keepV, ...r.handlers });
    await waitFor(() => (w.synced ? true : pending(r.events)), { describe: 'the watch to sync' });
    const key = `${namespace}/x`;
    await createCm(kube, namespace, 'x', '1');
    await setCm(kube, namespace, 'x', '2');
    await kube.core.deleteNamespacedConfigMap({ name: 'x', namespace });
    const seen = await waitFor(() => (r.about(key).length >= 3 ? r.about(key) : pending(r.about(key))), {
      describe: `add, update and delete of ${key}`,
    });
    expect(seen).toEqual([
      { type: 'add', key, value: { v: '1' } },
      { type: 'update', key, value: { v: '2' }, old: { v: '1' } },
      { type: 'delete', key, old: { v: '2' } },
    ]);
    expect(w.store.has(key)).toBe(false);
  });

  it('keeps only what transform returns: no ConfigMap data in the store', async ({ kube, namespace }) => {
    const secret = `s3cr3t-${Math.random().toString(36).slice(2)}`;
    const data = { password: secret, url: `postgres://app:${secret}@db` };
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'listed' }, data } });
    const seenKinds = new Set<string>();
    const digest = (raw: RawObject) => {
      seenKinds.add(`${raw.apiVersion}/${raw.kind}`);
      const d = (raw.data ?? {}) as Record<string, string>;
      return {
        keys: Object.keys(d).sort(),
        digest: createHash('sha256').update(JSON.stringify(d)).digest('hex').slice(0, 16),
      };
    };
    const w = watchFor(kube.kc, { path: cmPath(namespace), transform: digest });
    await waitFor(() => (w.synced ? true : pending('not synced')), { describe: 'the watch to sync' });
    await kube.core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'watched' }, data } });
    await waitFor(() => w.store.get(`${namespace}/watched`) ?? pending([...w.store.keys()]), {
      describe: 'the watched ConfigMap in the store',
    });
    for (const name of ['listed', 'watched']) {
      const stored = w.store.get(`${namespace}/${name}`);
      expect(stored).toEqual({ keys: ['password', 'url'], digest: expect.stringMatching(/^[0-9a-f]{16}$/) });
    }
    const everything = JSON.stringify({ store: [...w.store], snapshot: [...w.snapshot().items] });
    expect(everything).not.toContain(secret);
    // LIST items carry no kind; the adapter fills it in so transform sees the same shape either way.
    expect([...seenKinds]).toEqual(['v1/ConfigMap']);
  });

  // Why Rollouts: the watch cache of a resource answers 410 for any resourceVersion older than its own
  // start, and a CRD's cache starts when the CRD is installed, so resourceVersion "1" is expired on any
  // cluster. A built-in type's cache starts with the API server, at an empty etcd on a fresh test cluster,
  // so there "1" only expires once the cache has dropped events older than 75 s (minutes of churn).
  it('recovers from 410 Gone by relisting and misses nothing', async ({ kube, namespace }) => {
    const create = (name: string, replicas: number) =>
      kube.custom.createNamespacedCustomObject({ ...rolloutApi, namespace, body: rollout(name, replicas) });
    for (const n of ['keep', 'change', 'remove']) await create(n, 1);
    const replicasOf = (raw: RawObject) => (raw.spec as { replicas: number }).replicas;
    const a = watchFor(kube.kc, { path: rolloutsPath(namespace), transform: replicasOf });
    await waitFor(() => (a.synced && a.store.size === 3 ? true : pending([...a.store.keys()])), {
      describe: 'the first watch to hold 3 Rollouts',
    });
    const snap = a.snapshot();
    await a.stop();

    // While nothing watches: one update, one delete, one create.
    await setReplicas(kube, namespace, 'change', 2);
    await kube.custom.deleteNamespacedCustomObject({ ...rolloutApi, namespace, name: 'remove' });
    await create('fresh', 1);

    // The premise, checked with client-node's own Watch: this server really answers 410 here.
    const first = await firstWatchEvent(kube.kc, rolloutsPath(namespace), '1');
    expect(first).toMatchObject({ type: 'ERROR', object: { code: 410, reason: 'Expired' } });
    expect(first.object.message).toMatch(/^too old resource version: 1 \(\d+\)$/);

    const r = recorder<number>();
    const b = watchFor(kube.kc, {
      path: rolloutsPath(namespace),
      transform: replicasOf,
      resume: { ...snap, resourceVersion: '1' },
      ...r.handlers,
    });
    const relist = await waitFor(() => r.failures.find((f) => f.mode === 'relist') ?? pending(r.failures), {
      describe: 'a relist after 410 Gone',
    });
    expect(r.failures[0]).toMatchObject({ mode: 'gone-410', status: 410, next: 'list', retryInMs: 0 });
    expect(r.failures[0]?.message).toMatch(/watch from 1: too old resource version: 1/);
    expect(relist).toMatchObject({ reason: 'gone-410', changes: { added: 1, updated: 1, deleted: 1 } });
    const k = (n: string) => `${namespace}/${n}`;
    expect(r.events).toEqual([
      { type: 'synced' },
      { type: 'update', key: k('change'), value: 2, old: 1 },
      { type: 'add', key: k('fresh'), value: 1 },
      { type: 'delete', key: k('remove'), old: 1 },
    ]);
    // And it watches again, from the relist's resourceVersion.
    await setReplicas(kube, namespace, 'keep', 3);
    await waitFor(() => (b.store.get(k('keep')) === 3 ? true : pending(b.store.get(k('keep')))), {
      describe: 'the update of keep after the relist',
    });
    expect([...b.store].sort()).toEqual([
      [k('change'), 2],
      [k('fresh'), 1],
      [k('keep'), 3],
    ]);
    expect(r.failures.map((f) => f.mode)).toEqual(['gone-410', 'relist']);
  });

  it('catches changes the watch missed at the next periodic relist', async ({ kube, namespace }) => {
    for (const n of ['same', 'change', 'remove']) await createCm(kube, namespace, n, '1', { set: 'r' });
    const a = watchFor(kube.kc, { path: cmPath(namespace), labelSelector: 'set=r', transform: keepV });
    await waitFor(() => (a.store.size === 3 ? true : pending([...a.store.keys()])), {
      describe: 'the first watch to hold 3 ConfigMaps',
    });
    const snap = a.snapshot();
    await a.stop();
    await setCm(kube, namespace, 'change', '2');
    await kube.core.deleteNamespacedConfigMap({ name: 'remove', namespace });
    await createCm(kube, namespace, 'fresh', '1', { set: 'r' });
    // Resume from a resourceVersion after those changes: the watch itself will never see them,
    // as if its stream had dropped them. Only the relist can.
    const now = await kube.core.listNamespacedConfigMap({ namespace, labelSelector: 'set=r' });
    const rv = now.metadata?.resourceVersion as string;

    const r = recorder<{ v?: string }>();
    watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'set=r',
      transform: keepV,
      relistIntervalMs: 1500,
      resume: { ...snap, resourceVersion: rv },
      ...r.handlers,
    });
    const relists = () => r.failures.filter((f) => f.mode === 'relist');
    await waitFor(() => (relists().length >= 2 ? true : pending(r.failures)), {
      describe: 'two periodic relists',
    });
    const k = (n: string) => `${namespace}/${n}`;
    expect(relists()[0]).toMatchObject({ reason: 'periodic', changes: { added: 1, updated: 1, deleted: 1 } });
    expect(relists()[1]).toMatchObject({ reason: 'periodic', changes: { added: 0, updated: 0, deleted: 0 } });
    expect(r.events).toEqual([
      { type: 'synced' },
      { type: 'update', key: k('change'), value: { v: '2' }, old: { v: '1' } },
      { type: 'add', key: k('fresh'), value: { v: '1' } },
      { type: 'delete', key: k('remove'), old: { v: '1' } },
    ]);
    expect(r.failures.filter((f) => f.mode !== 'relist')).toEqual([]);
  });

  it('scopes the watch with a labelSelector, including objects relabelled in and out', async ({
    kube,
    namespace,
  }) => {
    await createCm(kube, namespace, 'a1', '1', { team: 'a' });
    await createCm(kube, namespace, 'b1', '1', { team: 'b' });
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'team=a',
      transform: keepV,
      ...r.handlers,
    });
    await waitFor(() => (w.synced ? true : pending(r.events)), { describe: 'the watch to sync' });
    const k = (n: string) => `${namespace}/${n}`;
    expect([...w.store.keys()]).toEqual([k('a1')]);

    const relabel = async (name: string, team: string) => {
      const cm = await kube.core.readNamespacedConfigMap({ name, namespace });
      cm.metadata = { ...cm.metadata, labels: { team } };
      await kube.core.replaceNamespacedConfigMap({ name, namespace, body: cm });
    };
    await createCm(kube, namespace, 'b2', '1', { team: 'b' });
    await relabel('b1', 'a');
    await relabel('a1', 'b');
    await createCm(kube, namespace, 'a2', '1', { team: 'a' });
    await waitFor(() => (w.store.has(k('a2')) ? true : pending(r.events)), { describe: 'a2 in the store' });
    expect(r.events.slice(r.events.findIndex((e) => e.type === 'synced') + 1)).toEqual([
      { type: 'add', key: k('b1'), value: { v: '1' } },
      { type: 'delete', key: k('a1'), old: { v: '1' } },
      { type: 'add', key: k('a2'), value: { v: '1' } },
    ]);
    expect([...w.store.keys()].sort()).toEqual([k('a2'), k('b1')]);
  });

  it('reports 403 on LIST and keeps retrying with backoff until access is granted', async ({
    kube,
    namespace,
  }) => {
    await createCm(kube, namespace, 'app', '1');
    const kc = await serviceAccountKubeConfig(kube, namespace, 'watcher');
    const r = recorder<{ v?: string }>();
    const w = watchFor(kc, { path: cmPath(namespace), transform: keepV, ...r.handlers });
    await waitFor(() => (r.failures.length >= 4 ? true : pending(r.failures)), {
      describe: '4 failed LISTs',
    });
    expect(w.synced).toBe(false);
    for (const f of r.failures.slice(0, 4)) {
      expect(f).toMatchObject({ mode: 'list-failed', status: 403, next: 'list', path: cmPath(namespace) });
      expect(f.message).toMatch(/LIST .*: HTTP 403 Forbidden: configmaps is forbidden/);
    }
    expect(r.failures.slice(0, 4).map((f) => f.attempt)).toEqual([1, 2, 3, 4]);
    // Equal-jitter backoff from 100 ms: attempt n waits between half and all of 100·2^(n-1) ms.
    r.failures.slice(0, 4).forEach((f, i) => {
      const ceiling = 100 * 2 ** i;
      expect(f.retryInMs).toBeGreaterThanOrEqual(ceiling / 2);
      expect(f.retryInMs).toBeLessThanOrEqual(ceiling);
    });

    await grant(kube, namespace, 'watcher', ['list', 'watch']);
    await waitFor(() => (w.synced ? true : pending(r.failures.at(-1))), {
      describe: 'the watch to sync once allowed',
    });
    expect(w.store.get(`${namespace}/app`)).toEqual({ v: '1' });
    await createCm(kube, namespace, 'later', '1');
    await waitFor(() => (w.store.has(`${namespace}/later`) ? true : pending([...w.store.keys()])), {
      describe: 'a ConfigMap created after access was granted',
    });
  });

  it('reports 403 on WATCH when only list is allowed, backs off, and recovers', async ({
    kube,
    namespace,
  }) => {
    const kc = await serviceAccountKubeConfig(kube, namespace, 'lister');
    await grant(kube, namespace, 'lister', ['list']);
    const r = recorder<{ v?: string }>();
    const w = watchFor(kc, { path: cmPath(namespace), transform: keepV, ...r.handlers });
    const failed = () => r.failures.filter((f) => f.mode === 'watch-failed');
    await waitFor(() => (failed().length >= 4 ? true : pending(r.failures)), {
      describe: '4 failed WATCHes',
    });
    expect(w.synced).toBe(true);
    expect(failed()[0]).toMatchObject({ status: 403, next: 'watch' });
    expect(failed()[0]?.message).toMatch(/WATCH .*: HTTP 403 Forbidden/);
    // After 3 failed watches in a row it relists, in case the resourceVersion was the problem.
    expect(failed()[2]).toMatchObject({ next: 'list' });
    expect(r.failures.some((f) => f.mode === 'relist' && f.reason === 'watch-failed')).toBe(true);

    await grant(kube, namespace, 'lister', ['list', 'watch'], 'watcher');
    await createCm(kube, namespace, 'after', '1');
    await waitFor(() => (w.store.has(`${namespace}/after`) ? true : pending(r.failures.at(-1))), {
      describe: 'the ConfigMap created once watch was allowed',
    });
  });

  it('resumes from its resourceVersion when the server ends the watch, missing nothing', async ({
    kube,
    namespace,
  }) => {
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'n',
      watchTimeoutSeconds: 1,
      transform: keepV,
      ...r.handlers,
    });
    await waitFor(() => (w.synced ? true : pending(r.events)), { describe: 'the watch to sync' });
    const reconnects = () => r.failures.filter((f) => f.mode === 'reconnect').length;
    // Create one ConfigMap per reconnect, so creations land before, during and after the gaps.
    for (let i = 0; i < 4; i++) {
      const before = reconnects();
      await createCm(kube, namespace, `c${i}`, String(i), { n: String(i) });
      await waitFor(() => (reconnects() > before ? true : pending(r.failures)), { describe: 'a reconnect' });
    }
    await waitFor(() => (w.store.size === 4 ? true : pending([...w.store.keys()])), {
      describe: '4 ConfigMaps in the store',
    });
    expect(r.events.filter((e) => e.type === 'add')).toHaveLength(4);
    expect(r.failures.every((f) => f.mode === 'reconnect' && f.retryInMs === 0 && f.next === 'watch')).toBe(
      true,
    );
    expect(r.failures[0]?.message).toMatch(/the server ended the watch/);
  });

  it('restarts a watch that stays silent for idleTimeoutMs', async ({ kube, namespace }) => {
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'quiet=yes',
      idleTimeoutMs: 700,
      transform: keepV,
      ...r.handlers,
    });
    const idles = () => r.failures.filter((f) => f.mode === 'idle-timeout');
    await waitFor(() => (idles().length >= 3 ? true : pending(r.failures)), {
      describe: '3 idle timeouts',
    });
    expect(idles()[0]).toMatchObject({ next: 'watch', retryInMs: 0 });
    expect(idles()[0]?.message).toBe('no event or bookmark for 700 ms');
    // Three silent watches in a row: relist, in case the stream is stuck rather than the resource quiet.
    expect(idles()[2]).toMatchObject({ next: 'list' });
    await waitFor(
      () => r.failures.find((f) => f.mode === 'relist' && f.reason === 'idle-timeout') ?? pending(r.failures),
      {
        describe: 'a relist after the idle timeouts',
      },
    );
    await createCm(kube, namespace, 'wake', '1', { quiet: 'yes' });
    await waitFor(() => (w.store.has(`${namespace}/wake`) ? true : pending(r.events)), {
      describe: 'the ConfigMap created after the restarts',
    });
  });

  it('watches any resource path: cluster-wide Deployments and namespaced Argo Rollouts', async ({
    kube,
    namespace,
  }) => {
    const d = recorder<number | undefined>();
    const deployments = watchFor(kube.kc, {
      path: '/apis/apps/v1/deployments',
      fieldSelector: `metadata.namespace=${namespace}`,
      transform: (raw) => (raw.spec as { replicas?: number }).replicas,
      ...d.handlers,
    });
    const ro = recorder<string>();
    const rollouts = watchFor(kube.kc, {
      path: rolloutsPath(namespace),
      transform: (raw) => `${raw.apiVersion}/${raw.kind}`,
      ...ro.handlers,
    });
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    await kube.custom.createNamespacedCustomObject({ ...rolloutApi, namespace, body: rollout('canary', 1) });
    await waitFor(() => deployments.store.get(`${namespace}/web`) ?? pending([...deployments.store]), {
      describe: 'the Deployment in the store',
    });
    await waitFor(() => rollouts.store.get(`${namespace}/canary`) ?? pending([...rollouts.store]), {
      describe: 'the Rollout in the store',
    });
    expect([...deployments.store]).toEqual([[`${namespace}/web`, 2]]);
    expect([...rollouts.store]).toEqual([[`${namespace}/canary`, 'argoproj.io/v1alpha1/Rollout']]);
  });

  it('reports a throwing handler and keeps watching', async ({ kube, namespace }) => {
    const r = recorder<{ v?: string }>();
    const w = watchFor(kube.kc, {
      path: cmPath(namespace),
      labelSelector: 'h',
      transform: (raw) => {
        if (raw.metadata.name === 'bad') throw new Error('cannot read this one');
        return keepV(raw);
      },
      ...r.handlers,
    });
    await waitFor(() => (w.synced ? true : pending(r.events)), { describe: 'the watch to sync' });
    await createCm(kube, namespace, 'bad', '1', { h: '1' });
    await createCm(kube, namespace, 'good', '1', { h: '1' });
    await waitFor(() => (w.store.has(`${namespace}/good`) ? true : pending(r.failures)), {
      describe: 'good in the store',
    });
    expect(r.failures).toEqual([
      {
        mode: 'handler-failed',
        path: cmPath(namespace),
        key: `${namespace}/bad`,
        message: `transform threw for ${namespace}/bad: cannot read this one`,
      },
    ]);
    expect(w.store.has(`${namespace}/bad`)).toBe(false);
  });

  it('stops cleanly: a process exits by itself after stop(), mid-watch and mid-backoff', async ({
    kube,
    namespace,
  }) => {
    await createCm(kube, namespace, 'app', '1');
    const watchModule = fileURLToPath(new URL('../../service/kube/watch.ts', import.meta.url));
    const script = `
      import { KubeConfig } from '@kubernetes/client-node';
      import { startWatch } from ${JSON.stringify(watchModule)};
      const kc = new KubeConfig();
      kc.loadFromFile(process.env.WATCH_KUBECONFIG);
      const synced = Promise.withResolvers();
      const failed = Promise.withResolvers();
      const live = startWatch(kc, {
        path: '/api/v1/namespaces/' + process.env.WATCH_NAMESPACE + '/configmaps',
        transform: (raw) => raw.metadata.name,
        onSynced: () => synced.resolve(),
      });
      const broken = startWatch(kc, {
        path: '/apis/nothing.example.com/v1/things',
        transform: () => 1,
        backoff: { initialMs: 600000, maxMs: 600000 },
        onFailure: (f) => failed.resolve(f.mode + ' ' + f.status),
      });
      await synced.promise;
      console.log('live synced with', [...live.store.values()].join(','));
      console.log('broken', await failed.promise);
      const t0 = Date.now();
      await Promise.all([live.stop(), broken.stop()]);
      console.log('stopped in', Date.now() - t0, 'ms');
      setTimeout(() => {
        console.log('still alive 5 s after stop:', JSON.stringify(process.getActiveResourcesInfo()));
        process.exit(3);
      }, 5000).unref();
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, WATCH_KUBECONFIG: inject('kubeconfig'), WATCH_NAMESPACE: namespace },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
    });
    child.stderr.on('data', (c) => {
      out += c;
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(out).toContain('live synced with app');
    expect(out).toContain('broken list-failed 404');
    expect(out).toMatch(/stopped in \d+ ms/);
    expect(code, out).toBe(0);
    const ms = Number(/stopped in (\d+) ms/.exec(out)?.[1]);
    expect(ms).toBeLessThan(1000);
  });
});

/** A kubeconfig for a new ServiceAccount with no permissions yet. */
async function serviceAccountKubeConfig(kube: Kube, namespace: string, name: string): Promise<KubeConfig> {
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  const token = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const cluster = kube.kc.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  return kc;
}

/** Lets a ServiceAccount use these verbs on ConfigMaps in the namespace. */
async function grant(kube: Kube, namespace: string, account: string, verbs: string[], roleName = account) {
  await kube.rbac.createNamespacedRole({
    namespace,
    body: { metadata: { name: roleName }, rules: [{ apiGroups: [''], resources: ['configmaps'], verbs }] },
  });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: roleName },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: roleName },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
    },
  });
}
