// Every pod of the run, followed through one watch (label grb-run=<run>, all namespaces): when each
// was first seen, became Ready, got a deletionTimestamp (an eviction or a delete) and disappeared.
// Times are when the bench received the event (epoch ms), so a surge-pod create or an eviction is
// timed to the millisecond instead of creationTimestamp's whole second.
import { CoreV1Api, type KubeConfig, type V1Pod, Watch } from '@kubernetes/client-node';
import { RUN_POD_LABEL } from './fixture.ts';

export const SURGE_LABEL = 'gitops-reloader.io/surge';

export interface PodRecord {
  uid: string;
  name: string;
  namespace: string;
  app: string;
  /** Carries the surge label now: a temporary surge pod, not (or not yet) one of the ReplicaSet's. */
  surge: boolean;
  /**
   * Was created as a surge pod. One handed to the ReplicaSet (ADR 0019) loses the label and then
   * counts as a replacement; its creation is still the reload's first action.
   */
  createdAsSurge: boolean;
  /** creationTimestamp (whole seconds). */
  createdAt: number;
  firstSeenAt: number;
  readyAt?: number;
  ready: boolean;
  deletingAt?: number;
  goneAt?: number;
}

export type PodEvent = 'added' | 'ready' | 'deleting' | 'gone';

function isReady(p: V1Pod): boolean {
  return Boolean(p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

export class PodObserver {
  readonly pods = new Map<string, PodRecord>();
  readonly #byApp = new Map<string, Set<string>>();
  readonly #listeners = new Set<(r: PodRecord, e: PodEvent) => void>();
  readonly #kc: KubeConfig;
  readonly #selector: string;
  #abort: AbortController | undefined;
  #resourceVersion = '';
  #stopped = false;
  restarts = 0;

  constructor(kc: KubeConfig, run: string) {
    this.#kc = kc;
    this.#selector = `${RUN_POD_LABEL}=${run}`;
  }

  async start(): Promise<void> {
    await this.#listAndWatch();
  }

  stop(): void {
    this.#stopped = true;
    this.#abort?.abort();
  }

  on(fn: (r: PodRecord, e: PodEvent) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Pods of a workload: every one ever seen, newest last. */
  ofApp(namespace: string, app: string): PodRecord[] {
    const uids = this.#byApp.get(`${namespace}/${app}`) ?? new Set();
    return [...uids].map((u) => this.pods.get(u) as PodRecord).sort((a, b) => a.firstSeenAt - b.firstSeenAt);
  }

  /** Pods not being deleted. */
  live(namespace: string, app: string): PodRecord[] {
    return this.ofApp(namespace, app).filter((p) => p.deletingAt === undefined);
  }

  liveCount(): { live: number; ready: number } {
    let live = 0;
    let ready = 0;
    for (const p of this.pods.values()) {
      if (p.deletingAt !== undefined) continue;
      live++;
      if (p.ready) ready++;
    }
    return { live, ready };
  }

  async #listAndWatch(): Promise<void> {
    const core = this.#kc.makeApiClient(CoreV1Api);
    const list = await core.listPodForAllNamespaces({ labelSelector: this.#selector });
    const now = Date.now();
    const seen = new Set<string>();
    for (const p of list.items) {
      seen.add(p.metadata?.uid as string);
      this.#see('MODIFIED', p, now);
    }
    // Anything we knew that the list no longer has went away while we were not watching.
    for (const r of this.pods.values()) if (!seen.has(r.uid) && r.goneAt === undefined) this.#gone(r, now);
    this.#resourceVersion = list.metadata?.resourceVersion ?? '';
    this.#watch();
  }

  #watch(): void {
    if (this.#stopped) return;
    void new Watch(this.#kc)
      .watch(
        '/api/v1/pods',
        { labelSelector: this.#selector, resourceVersion: this.#resourceVersion, allowWatchBookmarks: true },
        (type: string, obj: V1Pod & { code?: number }) => {
          const now = Date.now();
          if (type === 'ERROR') {
            // 410 Gone (or anything else): relist when the stream ends.
            this.#resourceVersion = '';
            return;
          }
          const rv = obj.metadata?.resourceVersion;
          if (rv) this.#resourceVersion = rv;
          if (type === 'BOOKMARK') return;
          this.#see(type, obj, now);
        },
        () => {
          if (this.#stopped) return;
          this.restarts++;
          const again = () => (this.#resourceVersion ? this.#watch() : void this.#relist());
          setTimeout(again, 200);
        },
      )
      .then(
        (a) => {
          this.#abort = a;
          if (this.#stopped) a.abort();
        },
        () => {
          if (!this.#stopped) setTimeout(() => void this.#relist(), 1000);
        },
      );
  }

  async #relist(): Promise<void> {
    try {
      await this.#listAndWatch();
    } catch {
      if (!this.#stopped) setTimeout(() => void this.#relist(), 1000);
    }
  }

  #emit(r: PodRecord, e: PodEvent): void {
    for (const fn of this.#listeners) fn(r, e);
  }

  #gone(r: PodRecord, now: number): void {
    if (r.deletingAt === undefined) {
      r.deletingAt = now;
      this.#emit(r, 'deleting');
    }
    r.goneAt = now;
    r.ready = false;
    this.#emit(r, 'gone');
  }

  #see(type: string, p: V1Pod, now: number): void {
    const uid = p.metadata?.uid;
    if (!uid) return;
    let r = this.pods.get(uid);
    if (!r) {
      const namespace = p.metadata?.namespace ?? '';
      const app = p.metadata?.labels?.app ?? '';
      r = {
        uid,
        name: p.metadata?.name ?? '',
        namespace,
        app,
        surge: p.metadata?.labels?.[SURGE_LABEL] !== undefined,
        createdAsSurge: p.metadata?.labels?.[SURGE_LABEL] !== undefined,
        createdAt: new Date(p.metadata?.creationTimestamp ?? 0).getTime(),
        firstSeenAt: now,
        ready: false,
      };
      this.pods.set(uid, r);
      const key = `${namespace}/${app}`;
      const set = this.#byApp.get(key) ?? new Set<string>();
      set.add(uid);
      this.#byApp.set(key, set);
      this.#emit(r, 'added');
    }
    if (type === 'DELETED') {
      if (r.goneAt === undefined) this.#gone(r, now);
      return;
    }
    if (r.surge && p.metadata?.labels?.[SURGE_LABEL] === undefined) r.surge = false;
    if (p.metadata?.deletionTimestamp && r.deletingAt === undefined) {
      r.deletingAt = now;
      r.ready = false;
      this.#emit(r, 'deleting');
    }
    const ready = isReady(p) && r.deletingAt === undefined;
    if (ready && !r.ready) {
      r.ready = true;
      r.readyAt ??= now;
      this.#emit(r, 'ready');
    } else if (!ready) r.ready = false;
  }
}
