// Every reload any service process of the run started, from its logs ('reload started' / 'reload
// complete' / 'reload failed', fields workload and namespace), and which workloads the bench expects
// to reload because it changed one of their configs in a way that matters. From these and the pod
// record come the precision figures: spurious reloads and pods recycled twice in one reload.
import type { PodObserver } from './pods.ts';
import type { LogLine, ServiceProcess } from './service.ts';

export interface ReloadWindow {
  /** namespace/name of the Deployment. */
  key: string;
  /** Which service process ran it (a label from the bench). */
  process: string;
  startedAt: number;
  /** The 'reload started' line's own time (the service's clock, same machine), before any action. */
  loggedAt: number;
  cutoffMs: number;
  resumed: boolean;
  completedAt?: number;
  replaced?: number;
  failedAt?: number;
}

const keyOf = (l: LogLine): string | undefined => {
  const w = typeof l.workload === 'string' ? l.workload : undefined;
  const ns = typeof l.namespace === 'string' ? l.namespace : undefined;
  if (!w || !ns) return undefined;
  const slash = w.indexOf('/');
  return `${ns}/${slash >= 0 ? w.slice(slash + 1) : w}`;
};

export class ReloadLog {
  readonly windows: ReloadWindow[] = [];
  readonly expected = new Set<string>();
  readonly #open = new Map<string, ReloadWindow>();
  readonly #listeners = new Set<(w: ReloadWindow, e: 'started' | 'complete' | 'failed') => void>();

  /** Follows one service process's log. */
  follow(svc: ServiceProcess, label: string): void {
    svc.onLog((l) => {
      const key = keyOf(l);
      if (!key) return;
      if (l.msg === 'reload started') {
        const w: ReloadWindow = {
          key,
          process: label,
          startedAt: l.seenAt,
          loggedAt: typeof l.time === 'string' ? Date.parse(l.time) : l.seenAt,
          cutoffMs: typeof l.cutoff === 'string' ? Date.parse(l.cutoff) : Number.NaN,
          resumed: l.resumed === true,
        };
        this.windows.push(w);
        this.#open.set(key, w);
        this.#emit(w, 'started');
      } else if (l.msg === 'reload complete' || l.msg === 'reload failed') {
        const w = this.#open.get(key);
        if (!w) return;
        this.#open.delete(key);
        if (l.msg === 'reload complete') {
          w.completedAt = l.seenAt;
          w.replaced = typeof l.replaced === 'number' ? l.replaced : undefined;
          this.#emit(w, 'complete');
        } else {
          w.failedAt = l.seenAt;
          this.#emit(w, 'failed');
        }
      }
    });
  }

  on(fn: (w: ReloadWindow, e: 'started' | 'complete' | 'failed') => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  #emit(w: ReloadWindow, e: 'started' | 'complete' | 'failed'): void {
    for (const fn of this.#listeners) fn(w, e);
  }

  /** The bench changed something this workload uses: a reload of it is not spurious. */
  expect(namespace: string, name: string): void {
    this.expected.add(`${namespace}/${name}`);
  }

  /** Reloads running now (started, neither complete nor failed). */
  inFlight(): number {
    return this.#open.size;
  }

  of(namespace: string, name: string): ReloadWindow[] {
    const key = `${namespace}/${name}`;
    return this.windows.filter((w) => w.key === key);
  }

  /** Reloads of workloads the bench never changed anything for. */
  spurious(): ReloadWindow[] {
    return this.windows.filter((w) => !this.expected.has(w.key));
  }

  /**
   * Pods recycled twice within one reload: a (non-surge) pod deleted while its workload's reload ran,
   * although it was already a replacement: the bench first saw it after the reload had started, or it
   * was created at or after the reload's cutoff T. (A restart that snapshots its pods acts before T,
   * so its replacements are stamped before T too: the timestamp alone would never catch them.)
   */
  doubleRecycles(pods: PodObserver): Array<{ pod: string; key: string }> {
    const out: Array<{ pod: string; key: string }> = [];
    const byKey = new Map<string, ReloadWindow[]>();
    for (const w of this.windows) {
      const list = byKey.get(w.key) ?? [];
      list.push(w);
      byKey.set(w.key, list);
    }
    for (const p of pods.pods.values()) {
      if (p.surge || p.deletingAt === undefined) continue;
      const windows = byKey.get(`${p.namespace}/${p.app}`);
      if (!windows) continue;
      const at = p.deletingAt;
      // The reload in effect: the latest one started before the deletion (a second of slack each
      // side, as the log line and the pod event travel different pipes).
      const during = windows
        .filter((w) => w.startedAt - 1000 <= at)
        .sort((a, b) => b.startedAt - a.startedAt)
        .find((w) => at <= (w.completedAt ?? w.failedAt ?? Number.POSITIVE_INFINITY) + 1000);
      if (!during) continue;
      const replacement =
        p.firstSeenAt > during.loggedAt ||
        (Number.isFinite(during.cutoffMs) && p.createdAt >= during.cutoffMs);
      if (replacement) {
        out.push({ pod: `${p.namespace}/${p.name}`, key: during.key });
      }
    }
    return out;
  }
}
