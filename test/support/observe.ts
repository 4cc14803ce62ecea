// What a user can observe about a workload: its pods, its Events, its generation.
import { type CoreV1Event, type V1Pod, Watch } from '@kubernetes/client-node';
import type { Kube as FullKube } from './kube.ts';

/** What these observers use of a client: the core and apps APIs and the config (the bench's client has them too). */
type Kube = Pick<FullKube, 'core' | 'apps' | 'kc'>;

import { pending, waitFor } from './wait-for.ts';
import { isReady } from './workloads.ts';

export interface PodView {
  name: string;
  uid: string;
  createdAt: number;
  ready: boolean;
  /** A temporary surge pod of gitops-reloader (not a replacement). */
  surge: boolean;
  /** A surge pod later handed to the ReplicaSet (ADR 0019): it replaced an old pod. PodTracker only. */
  handedOver?: boolean;
}

function view(p: V1Pod): PodView {
  return {
    name: p.metadata?.name ?? '',
    uid: p.metadata?.uid ?? '',
    createdAt: new Date(p.metadata?.creationTimestamp ?? 0).getTime(),
    ready: isReady(p),
    surge: p.metadata?.labels?.['gitops-reloader.io/surge'] !== undefined,
  };
}

/** Pods of an app that are not being deleted. */
export async function livePods(kube: Kube, namespace: string, app: string): Promise<PodView[]> {
  const list = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp).map(view);
}

/** The surge pods (label gitops-reloader.io/surge) in `namespace` not being deleted; of one Deployment uid if given. */
export async function surgePods(kube: Kube, namespace: string, owner?: string): Promise<V1Pod[]> {
  const labelSelector = owner ? `gitops-reloader.io/surge=${owner}` : 'gitops-reloader.io/surge';
  return (await kube.core.listNamespacedPod({ namespace, labelSelector })).items.filter(
    (p) => !p.metadata?.deletionTimestamp,
  );
}

export async function waitReadyPods(
  kube: Kube,
  namespace: string,
  app: string,
  count: number,
): Promise<PodView[]> {
  return waitFor(
    async () => {
      const pods = await livePods(kube, namespace, app);
      const ready = pods.filter((p) => p.ready);
      return ready.length === count && pods.length === count ? ready : pending(pods);
    },
    { describe: `${count} Ready pods of ${app}`, timeout: 60_000 },
  );
}

/**
 * Waits until the Deployment's rollout is complete and its controller has said so: every replica
 * updated and available, and the Progressing condition at NewReplicaSetAvailable. After that the
 * deployment controller has no more status to write, so the object's resourceVersion only moves if
 * someone else writes it (what "wrote nothing" assertions compare against).
 */
export async function waitRolledOut(kube: Kube, namespace: string, name: string, replicas: number) {
  return waitFor(
    async () => {
      const d = await kube.apps.readNamespacedDeployment({ name, namespace });
      const s = d.status;
      const progressing = s?.conditions?.find((c) => c.type === 'Progressing');
      const done =
        s?.observedGeneration === d.metadata?.generation &&
        s?.updatedReplicas === replicas &&
        s?.availableReplicas === replicas &&
        s?.replicas === replicas &&
        progressing?.reason === 'NewReplicaSetAvailable';
      return done ? d : pending(s);
    },
    { describe: `Deployment ${name} rolled out`, timeout: 120_000 },
  );
}

/** Waits until the app has `count` pods, all Ready and none of `before` (surge pods still count). */
export async function waitAllReplaced(
  kube: Kube,
  namespace: string,
  app: string,
  before: readonly { uid: string }[],
  count: number,
): Promise<PodView[]> {
  const old = new Set(before.map((p) => p.uid));
  return waitFor(
    async () => {
      const pods = await livePods(kube, namespace, app);
      const done = pods.length === count && pods.every((p) => p.ready && !old.has(p.uid));
      return done ? pods : pending(pods);
    },
    { describe: `every pod of ${app} replaced and Ready`, timeout: 60_000 },
  );
}

/** Events of a reason (or of any of several) in a namespace, optionally on one object. */
export async function events(
  kube: Kube,
  namespace: string,
  reason: string | readonly string[],
  name?: string,
): Promise<CoreV1Event[]> {
  const list = await kube.core.listNamespacedEvent({ namespace });
  const reasons = typeof reason === 'string' ? [reason] : reason;
  return list.items.filter(
    (e) => reasons.includes(e.reason ?? '') && (name === undefined || e.involvedObject.name === name),
  );
}

/** The first Event of `reason` (or of any of several, to see which came) on `name`. */
export async function waitForEvent(
  kube: Kube,
  namespace: string,
  reason: string | readonly string[],
  name: string,
  timeout = 60_000,
): Promise<CoreV1Event> {
  return waitFor(
    async () => {
      const found = await events(kube, namespace, reason, name);
      if (found[0]) return found[0];
      const all = await kube.core.listNamespacedEvent({ namespace });
      return pending(all.items.map((e) => `${e.involvedObject.name}:${e.reason}`));
    },
    { describe: `Event ${typeof reason === 'string' ? reason : reason.join(' or ')} on ${name}`, timeout },
  );
}

/**
 * Records every pod of an app that ever exists while it runs, through a real watch, so a test can
 * count replacements exactly (a pod recycled twice shows up as an extra uid).
 */
export class PodTracker {
  readonly seen = new Map<string, PodView>();
  /** Times the watch ended on its own and was re-opened from a fresh LIST. */
  restarts = 0;
  #abort: AbortController | undefined;
  #stopped = false;

  static async start(kube: Kube, namespace: string, app: string): Promise<PodTracker> {
    const t = new PodTracker();
    await t.#follow(kube, namespace, app);
    return t;
  }

  /**
   * LIST, then WATCH from the list's resourceVersion. A watch can end on its own (the server's
   * timeout, a connection reset on a busy machine); it is then re-opened from a new LIST, so a pod
   * created in between is still seen as long as it still exists.
   */
  async #follow(kube: Kube, namespace: string, app: string): Promise<void> {
    const list = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
    for (const p of list.items) this.#record(p);
    this.#abort = await new Watch(kube.kc).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { labelSelector: `app=${app}`, resourceVersion: list.metadata?.resourceVersion },
      (_type: string, obj: V1Pod) => this.#record(obj),
      () => {
        if (this.#stopped) return;
        this.restarts++;
        void this.#follow(kube, namespace, app).catch(() => undefined);
      },
    );
  }

  #record(p: V1Pod) {
    const uid = p.metadata?.uid;
    if (!uid) return;
    const first = this.seen.get(uid);
    if (!first) this.seen.set(uid, view(p));
    else if (first.surge && !view(p).surge && !p.metadata?.deletionTimestamp) first.handedOver = true;
  }

  /**
   * Pods that replaced old ones and were not in `before`: the ReplicaSet's new pods, and surge pods
   * handed over to it. Surge pods are all listed by surgePods.
   */
  newSince(before: readonly PodView[]): PodView[] {
    const old = new Set(before.map((p) => p.uid));
    return [...this.seen.values()].filter((p) => !old.has(p.uid) && (!p.surge || p.handedOver));
  }

  /** Every surge pod seen, handed over or not. */
  surgePods(): PodView[] {
    return [...this.seen.values()].filter((p) => p.surge);
  }

  /** The surge pods handed over to the ReplicaSet. */
  handedOver(): PodView[] {
    return [...this.seen.values()].filter((p) => p.handedOver);
  }

  stop() {
    this.#stopped = true;
    this.#abort?.abort();
  }
}

/**
 * Follows an app's pods through a real watch and records the fewest Ready pods, and the most pods
 * not being deleted, seen at any moment (every watch event is a moment): availability and the pod
 * count are measured exactly, not sampled.
 */
export class ReadyMonitor {
  readonly #ready = new Map<string, boolean>();
  /** Uids of pods without a deletionTimestamp. */
  readonly #live = new Set<string>();
  #abort: AbortController | undefined;
  min = Number.POSITIVE_INFINITY;
  /** The most pods without a deletionTimestamp at once (surge pods included). */
  maxLive = 0;
  readonly history: number[] = [];

  static async start(kube: Kube, namespace: string, app: string): Promise<ReadyMonitor> {
    const m = new ReadyMonitor();
    const list = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
    for (const p of list.items) m.#note('ADDED', p);
    m.#record();
    m.#abort = await new Watch(kube.kc).watch(
      `/api/v1/namespaces/${namespace}/pods`,
      { labelSelector: `app=${app}`, resourceVersion: list.metadata?.resourceVersion },
      (type: string, obj: V1Pod) => m.#see(type, obj),
      () => {},
    );
    return m;
  }

  #see(type: string, p: V1Pod) {
    this.#note(type, p);
    this.#record();
  }

  #note(type: string, p: V1Pod) {
    const uid = p.metadata?.uid;
    if (!uid) return;
    if (type === 'DELETED') this.#ready.delete(uid);
    else this.#ready.set(uid, isReady(p));
    if (type === 'DELETED' || p.metadata?.deletionTimestamp) this.#live.delete(uid);
    else this.#live.add(uid);
  }

  #record() {
    const n = [...this.#ready.values()].filter(Boolean).length;
    this.history.push(n);
    this.min = Math.min(this.min, n);
    this.maxLive = Math.max(this.maxLive, this.#live.size);
  }

  stop() {
    this.#abort?.abort();
  }
}
