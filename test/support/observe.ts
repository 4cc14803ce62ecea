// What a user can observe about a workload: its pods, its Events, its generation.
import { type CoreV1Event, type V1Pod, Watch } from '@kubernetes/client-node';
import type { Kube } from './kube.ts';
import { pending, waitFor } from './wait-for.ts';
import { isReady } from './workloads.ts';

export interface PodView {
  name: string;
  uid: string;
  createdAt: number;
  ready: boolean;
  /** A temporary surge pod of gitops-reloader (not a replacement). */
  surge: boolean;
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

export async function events(
  kube: Kube,
  namespace: string,
  reason: string,
  name?: string,
): Promise<CoreV1Event[]> {
  const list = await kube.core.listNamespacedEvent({ namespace });
  return list.items.filter(
    (e) => e.reason === reason && (name === undefined || e.involvedObject.name === name),
  );
}

export async function waitForEvent(
  kube: Kube,
  namespace: string,
  reason: string,
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
    { describe: `Event ${reason} on ${name}`, timeout },
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
    if (uid && !this.seen.has(uid)) this.seen.set(uid, view(p));
  }

  /** Replacement pods first seen that were not in `before` (surge pods are listed by surgePods). */
  newSince(before: readonly PodView[]): PodView[] {
    const old = new Set(before.map((p) => p.uid));
    return [...this.seen.values()].filter((p) => !old.has(p.uid) && !p.surge);
  }

  surgePods(): PodView[] {
    return [...this.seen.values()].filter((p) => p.surge);
  }

  stop() {
    this.#stopped = true;
    this.#abort?.abort();
  }
}

/**
 * Follows an app's pods through a real watch and records the fewest Ready pods seen at any moment
 * (every watch event is a moment): availability is measured exactly, not sampled.
 */
export class ReadyMonitor {
  readonly #ready = new Map<string, boolean>();
  #abort: AbortController | undefined;
  min = Number.POSITIVE_INFINITY;
  readonly history: number[] = [];

  static async start(kube: Kube, namespace: string, app: string): Promise<ReadyMonitor> {
    const m = new ReadyMonitor();
    const list = await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
    for (const p of list.items) if (p.metadata?.uid) m.#ready.set(p.metadata.uid, isReady(p));
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
    const uid = p.metadata?.uid;
    if (!uid) return;
    if (type === 'DELETED') this.#ready.delete(uid);
    else this.#ready.set(uid, isReady(p));
    this.#record();
  }

  #record() {
    const n = [...this.#ready.values()].filter(Boolean).length;
    this.history.push(n);
    this.min = Math.min(this.min, n);
  }

  stop() {
    this.#abort?.abort();
  }
}
