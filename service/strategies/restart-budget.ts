// The restart budget (docs/progressive-reloads.md): a ceiling on the pods the restarts replace per minute,
// cluster-wide (--restart-budget) and per namespace (--restart-budget-per-namespace), on top of the API
// write rate (ADR 0018). Every eviction of an old pod takes a slot of both first; a reload waiting for
// one is not stuck, so the wait counts as progress and --reload-deadline does not cut it.

import { realTimers, type Timers } from '../core/batcher.ts';
import { WindowLimit } from '../core/window-limit.ts';

const MINUTE_MS = 60_000;
/** A reload waiting for its slot reports progress at least this often. */
const PROGRESS_EVERY_MS = 10_000;

export interface RestartBudgetOptions {
  /** Pods per minute in the whole cluster; 0: no ceiling. */
  perMinute: number;
  /** Pods per minute in one namespace; 0: no ceiling. */
  perNamespacePerMinute: number;
  timers?: Timers;
  /** Told of every wait for a slot: the scope that made it wait and for how long. */
  onWait?(scope: 'cluster' | 'namespace', ms: number): void;
}

export class RestartBudget {
  readonly #o: RestartBudgetOptions;
  readonly #timers: Timers;
  readonly #cluster: WindowLimit | undefined;
  readonly #namespaces = new Map<string, WindowLimit>();

  constructor(o: RestartBudgetOptions) {
    this.#o = o;
    this.#timers = o.timers ?? realTimers;
    this.#cluster = o.perMinute > 0 ? new WindowLimit(o.perMinute, MINUTE_MS) : undefined;
  }

  /** The budget of the flags, or undefined when neither sets a ceiling. */
  static of(o: RestartBudgetOptions): RestartBudget | undefined {
    return o.perMinute > 0 || o.perNamespacePerMinute > 0 ? new RestartBudget(o) : undefined;
  }

  /**
   * Waits for the slot of one pod replaced in `namespace`. Rejects when `signal` aborts. `waiting` is
   * told once, before a wait, when the slot is not free now. The caller calls the returned `used()`
   * once the replacement's write is answered: the slot then counts from that moment, so a write that
   * waited (the API write rate, a busy server) does not let the next minute's pods go early.
   */
  async take(
    namespace: string,
    signal: AbortSignal,
    progress: () => void,
    waiting?: () => void,
  ): Promise<() => void> {
    const now = this.#timers.now();
    const ns = this.#namespace(namespace, now);
    // When each slot is served (a reservation's wait from now).
    const slot = (l: WindowLimit | undefined) => (l ? now + l.reserve(now) : undefined);
    const at = { cluster: slot(this.#cluster), namespace: slot(ns) };
    const used = () => {
      const t = this.#timers.now();
      if (at.cluster !== undefined) this.#cluster?.used(at.cluster, t);
      if (at.namespace !== undefined) ns?.used(at.namespace, t);
    };
    const waits = { cluster: (at.cluster ?? now) - now, namespace: (at.namespace ?? now) - now };
    const ms = Math.max(waits.cluster, waits.namespace);
    if (ms <= 0) return used;
    this.#o.onWait?.(waits.cluster >= waits.namespace ? 'cluster' : 'namespace', ms);
    waiting?.();
    const until = now + ms;
    while (this.#timers.now() < until) {
      signal.throwIfAborted();
      progress();
      await this.#sleep(Math.min(PROGRESS_EVERY_MS, until - this.#timers.now()), signal);
    }
    signal.throwIfAborted();
    return used;
  }

  #namespace(namespace: string, now: number): WindowLimit | undefined {
    const per = this.#o.perNamespacePerMinute;
    if (per <= 0) return undefined;
    // Forget the limiters of quiet namespaces: memory follows the namespaces that restart.
    if (this.#namespaces.size > 64)
      for (const [n, l] of this.#namespaces) if (l.idle(now)) this.#namespaces.delete(n);
    let l = this.#namespaces.get(namespace);
    if (!l) {
      l = new WindowLimit(per, MINUTE_MS);
      this.#namespaces.set(namespace, l);
    }
    return l;
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const t = this.#timers.set(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      const onAbort = () => {
        this.#timers.clear(t);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}
