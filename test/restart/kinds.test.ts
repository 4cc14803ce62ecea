// The restart strategy for StatefulSets, DaemonSets and Argo Rollouts against the real control plane,
// observed as a user would: a real gitops-reloader process, a pod watch that records every
// transition in order, generations, Events. The workload objects must never be written (I1), every
// pod must end up newer than the change (I2), and no pod may be recycled twice (I3).
import { type V1DaemonSet, type V1Pod, type V1StatefulSet, Watch } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { createArgoObject, readArgoObject } from '../support/argo.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, waitForEvent } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { validateAgainstUpstream } from '../support/upstream-schema.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, isReady } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES_APP_CONFIG = { envFrom: [{ configMapRef: { name: 'app-config' } }] };
const container = { name: 'app', image: 'registry.invalid/app:1', ...USES_APP_CONFIG };

function statefulSet(
  name: string,
  replicas: number,
  updateStrategy: 'RollingUpdate' | 'OnDelete',
): V1StatefulSet {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, labels, annotations: AUTO },
    spec: {
      replicas,
      serviceName: name,
      selector: { matchLabels: labels },
      updateStrategy: { type: updateStrategy },
      template: { metadata: { labels }, spec: { containers: [container] } },
    },
  };
}

function daemonSet(name: string): V1DaemonSet {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name, labels, annotations: AUTO },
    spec: {
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [container] } },
    },
  };
}

interface PodState {
  name: string;
  uid: string;
  node: string | undefined;
  createdAt: number;
  ready: boolean;
  terminating: boolean;
}

interface Frame {
  /** What happened: e.g. "ADDED web-2". */
  what: string;
  pod: PodState;
  /** Every pod that exists after this event, by uid. */
  pods: Map<string, PodState>;
}

function state(p: V1Pod): PodState {
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    node: p.spec?.nodeName || undefined,
    createdAt: new Date(p.metadata?.creationTimestamp ?? 0).getTime(),
    ready: isReady(p),
    terminating: Boolean(p.metadata?.deletionTimestamp),
  };
}

/** Every pod event of an app, in the order the API server sent them, with the world after each. */
class PodTimeline {
  readonly frames: Frame[] = [];
  readonly initial = new Map<string, PodState>();
  #pods = new Map<string, PodState>();
  #abort: AbortController | undefined;

  static async start(kube: Kube, namespace: string, app: string): Promise<PodTimeline> {
    const t = new PodTimeline();
    const list = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
    for (const p of list.items) t.#pods.set(p.metadata?.uid ?? '', state(p));
    for (const [k, v] of t.#pods) t.initial.set(k, v);
    t.#abort = await new Watch(kube.kc).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { labelSelector: `app=${app}`, resourceVersion: list.metadata?.resourceVersion },
      (type: string, obj: V1Pod) => t.#on(type, obj),
      () => {},
    );
    return t;
  }

  #on(type: string, obj: V1Pod) {
    const s = state(obj);
    if (type === 'DELETED') this.#pods.delete(s.uid);
    else this.#pods.set(s.uid, s);
    this.frames.push({ what: `${type} ${s.name}`, pod: s, pods: new Map(this.#pods) });
  }

  /** Pods not in the initial list, in the order they first appeared, as last seen (bound to a node). */
  replacements(): PodState[] {
    const seen = new Map<string, PodState>();
    for (const f of this.frames) if (!this.initial.has(f.pod.uid)) seen.set(f.pod.uid, f.pod);
    return [...seen.values()];
  }

  /** Index of the first frame where `uid` matches the predicate. */
  firstIndex(uid: string, pred: (p: PodState | undefined) => boolean): number {
    return this.frames.findIndex((f) => f.pod.uid === uid && pred(f.pods.get(uid)));
  }

  /** The most slots (ordinals or nodes) without a Ready, live pod at once, over every frame. */
  maxMissing(slots: string[], slotOf: (p: PodState) => string | undefined): number {
    let max = 0;
    for (const f of this.frames) {
      const served = new Set<string>();
      for (const p of f.pods.values()) if (p.ready && !p.terminating) served.add(slotOf(p) ?? '');
      max = Math.max(max, slots.filter((s) => !served.has(s)).length);
    }
    return max;
  }

  stop() {
    this.#abort?.abort();
  }
}

/** Live, Ready pods of `app` once there are exactly `count` and none of `old` is left. */
async function waitSettled(
  kube: Kube,
  namespace: string,
  app: string,
  count: number,
  old: Set<string> = new Set(),
) {
  return waitFor(
    async () => {
      const pods = (await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items.map(
        state,
      );
      const done = pods.length === count && pods.every((p) => p.ready && !p.terminating && !old.has(p.uid));
      return done ? pods : pending(pods.map((p) => `${p.name}${p.ready ? '' : ' (not Ready)'}`));
    },
    { describe: `${count} Ready pods of ${app}${old.size > 0 ? ', all replaced' : ''}`, timeout: 60_000 },
  );
}

async function startReloader(namespace: string) {
  const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return svc;
}

async function changeConfig(kube: Kube, namespace: string): Promise<number> {
  const at = Date.now();
  await kube.core.replaceNamespacedConfigMap({
    name: 'app-config',
    namespace,
    body: configMap('app-config', { LEVEL: 'debug' }),
  });
  return at;
}

/** The earliest creationTimestamp a pod made after `ms` can carry (it has whole seconds). */
const secondOf = (ms: number) => Math.floor(ms / 1000) * 1000;

describe('restart strategy for other workload kinds', () => {
  it('restarts a StatefulSet highest ordinal first, each pod Ready before the next, without writing it', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: configMap('app-config', { LEVEL: 'info' }),
    });
    await kube.apps.createNamespacedStatefulSet({ namespace, body: statefulSet('web', 3, 'RollingUpdate') });
    const before = await waitSettled(kube, namespace, 'web', 3);
    const svc = await startReloader(namespace);
    const generation = (await kube.apps.readNamespacedStatefulSet({ name: 'web', namespace })).metadata
      ?.generation;
    const timeline = await PodTimeline.start(kube, namespace, 'web');

    const changedAt = await changeConfig(kube, namespace);
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    const after = await waitSettled(kube, namespace, 'web', 3, new Set(before.map((p) => p.uid)));
    const tookMs = Date.now() - changedAt;
    timeline.stop();

    // Replaced in order 2, 1, 0: each replacement (same name, new uid) appeared after the previous
    // one, and became Ready before the next old pod was evicted.
    const fresh = timeline.replacements();
    expect(fresh.map((p) => p.name)).toEqual(['web-2', 'web-1', 'web-0']);
    const oldByName = new Map(before.map((p) => [p.name, p.uid]));
    for (let i = 0; i + 1 < fresh.length; i++) {
      const readyAt = timeline.firstIndex(fresh[i]!.uid, (p) => Boolean(p?.ready));
      const nextOld = oldByName.get(fresh[i + 1]!.name)!;
      const nextEvictedAt = timeline.firstIndex(nextOld, (p) => !p || p.terminating);
      expect(
        readyAt,
        `${fresh[i]!.name} Ready before ${fresh[i + 1]!.name} is evicted`,
      ).toBeGreaterThanOrEqual(0);
      expect(readyAt).toBeLessThan(nextEvictedAt);
    }
    // At most one ordinal without a Ready pod at any moment.
    expect(timeline.maxMissing(['web-0', 'web-1', 'web-2'], (p) => p.name)).toBe(1);
    // I3: exactly one replacement per pod. I2: all newer than the change. I1: generation unmoved.
    expect(fresh).toHaveLength(3);
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(secondOf(changedAt));
    expect((await kube.apps.readNamespacedStatefulSet({ name: 'web', namespace })).metadata?.generation).toBe(
      generation,
    );
    expect(reloaded.message).toMatch(/ConfigMap\/app-config changed; replaced 3 pods, highest ordinal first/);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
    const done = await svc.waitForLog('reload complete', (l) => l.msg === 'reload complete');
    expect(done.replaced).toBe(3);
    console.log(`[restart] StatefulSet 3 replicas: change to all Ready in ${tookMs} ms`);
  });

  it('restarts an OnDelete StatefulSet whose revisions stay apart after a template change', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: configMap('app-config', { LEVEL: 'info' }),
    });
    await kube.apps.createNamespacedStatefulSet({ namespace, body: statefulSet('db', 2, 'OnDelete') });
    await waitSettled(kube, namespace, 'db', 2);
    // A template change under OnDelete replaces no pod, and currentRevision never catches up.
    const s = await kube.apps.readNamespacedStatefulSet({ name: 'db', namespace });
    s.spec!.template.metadata!.annotations = { 'example.com/tier': 'gold' };
    await kube.apps.replaceNamespacedStatefulSet({ name: 'db', namespace, body: s });
    const split = await waitFor(
      async () => {
        const x = await kube.apps.readNamespacedStatefulSet({ name: 'db', namespace });
        const st = x.status;
        return st?.observedGeneration === x.metadata?.generation && st?.currentRevision !== st?.updateRevision
          ? x
          : pending(st);
      },
      { describe: 'db to report currentRevision != updateRevision', timeout: 60_000 },
    );
    const before = await waitSettled(kube, namespace, 'db', 2);
    await startReloader(namespace);

    const changedAt = await changeConfig(kube, namespace);
    await waitForEvent(kube, namespace, 'Reloaded', 'db');
    const after = await waitSettled(kube, namespace, 'db', 2, new Set(before.map((p) => p.uid)));
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(secondOf(changedAt));
    const now = await kube.apps.readNamespacedStatefulSet({ name: 'db', namespace });
    expect(now.metadata?.generation).toBe(split.metadata?.generation);
    console.log(
      `[restart] OnDelete StatefulSet 2 replicas: change to all Ready in ${Date.now() - changedAt} ms`,
    );
  });

  it('restarts a DaemonSet node by node, each replacement Ready before the next node', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: configMap('app-config', { LEVEL: 'info' }),
    });
    await kube.apps.createNamespacedDaemonSet({ namespace, body: daemonSet('agent') });
    const nodes = (await kube.core.listNode()).items.map((n) => n.metadata?.name ?? '').sort();
    const before = await waitSettled(kube, namespace, 'agent', nodes.length);
    const svc = await startReloader(namespace);
    const generation = (await kube.apps.readNamespacedDaemonSet({ name: 'agent', namespace })).metadata
      ?.generation;
    const timeline = await PodTimeline.start(kube, namespace, 'agent');

    const changedAt = await changeConfig(kube, namespace);
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'agent');
    const after = await waitSettled(
      kube,
      namespace,
      'agent',
      nodes.length,
      new Set(before.map((p) => p.uid)),
    );
    const tookMs = Date.now() - changedAt;
    timeline.stop();

    const fresh = timeline.replacements();
    // One replacement per node (I3), every node once, and in node-name order.
    expect(fresh.map((p) => p.node ?? '?')).toEqual(nodes);
    const oldByNode = new Map(before.map((p) => [p.node, p.uid]));
    for (let i = 0; i + 1 < fresh.length; i++) {
      const readyAt = timeline.firstIndex(fresh[i]!.uid, (p) => Boolean(p?.ready));
      const nextEvictedAt = timeline.firstIndex(
        oldByNode.get(fresh[i + 1]!.node)!,
        (p) => !p || p.terminating,
      );
      expect(
        readyAt,
        `the pod on ${fresh[i]!.node} Ready before ${fresh[i + 1]!.node} is touched`,
      ).toBeGreaterThanOrEqual(0);
      expect(readyAt).toBeLessThan(nextEvictedAt);
    }
    expect(timeline.maxMissing(nodes, (p) => p.node)).toBe(1);
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(secondOf(changedAt));
    expect((await kube.apps.readNamespacedDaemonSet({ name: 'agent', namespace })).metadata?.generation).toBe(
      generation,
    );
    expect(reloaded.message).toMatch(/replaced 3 pods on 3 nodes, node by node/);
    expect(await events(kube, namespace, 'Reloaded', 'agent')).toHaveLength(1);
    await svc.waitForLog('reload complete', (l) => l.msg === 'reload complete');
    console.log(`[restart] DaemonSet on ${nodes.length} nodes: change to all Ready in ${tookMs} ms`);
  });

  it('restarts an Argo Rollout by setting spec.restartAt only, leaving the pod template byte-identical', async ({
    kube,
    namespace,
  }) => {
    interface Rollout {
      apiVersion: string;
      kind: string;
      metadata: {
        name: string;
        namespace: string;
        generation?: number;
        annotations?: Record<string, string>;
        labels?: Record<string, string>;
      };
      spec: { template: unknown; restartAt?: string; [k: string]: unknown };
      [k: string]: unknown;
    }
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: configMap('app-config', { LEVEL: 'info' }),
    });
    const body: Rollout = {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Rollout',
      // Our write alone is under test here, so the real Argo Rollouts controller of test/cluster (no
      // instance id) is kept off this Rollout: it would write the template back through its Go
      // types. Its restart is tested in test/argocd/real/rollouts.test.ts.
      metadata: {
        name: 'shop',
        namespace,
        annotations: AUTO,
        labels: { 'argo-rollouts.argoproj.io/controller-instance-id': 'unmanaged' },
      },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'shop' } },
        template: { metadata: { labels: { app: 'shop' } }, spec: { containers: [container] } },
        strategy: { canary: { steps: [{ setWeight: 50 }] } },
      },
    };
    await createArgoObject(kube.custom, body);
    const before = await readArgoObject<Rollout>(kube.custom, 'Rollout', namespace, 'shop');
    const svc = await startReloader(namespace);

    const changedAt = await changeConfig(kube, namespace);
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'shop');
    const after = await readArgoObject<Rollout>(kube.custom, 'Rollout', namespace, 'shop');

    expect(JSON.stringify(after.spec.template)).toBe(JSON.stringify(before.spec.template));
    expect(before.spec.restartAt).toBeUndefined();
    const restartAt = after.spec.restartAt as string;
    expect(restartAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // restartAt is the cutoff or later, so it covers every pod that predates the change.
    expect(Date.parse(restartAt)).toBeGreaterThanOrEqual(secondOf(changedAt));
    // The one spec write is restartAt: generation moves by exactly 1, and nothing else in spec changed.
    expect(after.metadata.generation).toBe((before.metadata.generation ?? 0) + 1);
    const { restartAt: _set, ...rest } = after.spec;
    expect(JSON.stringify(rest)).toBe(JSON.stringify(before.spec));
    // The value is valid against the upstream Argo Rollouts schema (format date-time).
    await validateAgainstUpstream(kube.custom, { ...body, spec: { ...body.spec, restartAt } });
    expect(reloaded.message).toContain(`set spec.restartAt=${restartAt}`);
    expect(reloaded.message).toContain('Argo Rollouts controller restarts every pod created before it');
    await svc.waitForLog('reload complete', (l) => l.msg === 'reload complete');
    expect(await events(kube, namespace, 'Reloaded', 'shop')).toHaveLength(1);
  });
});
