// What the three pod-evicting restarts (Deployment, StatefulSet, DaemonSet) share besides eviction:
//  - a live view of the workload and one of its pods, each kept by a single watch that opens with the
//    current state, so a step reads memory instead of sending a GET and a LIST every poll;
//  - the snapshot of the pods to replace, taken from the first complete view and written with the
//    pending reload before the first eviction, so neither a replacement nor a crash can make a pod
//    count twice, and nothing waits for creationTimestamp's whole seconds (OldPodRule in core/cutoff.ts);
//  - the pacing between steps: the next change of either view, or a deadline.
import type { V1Pod } from '@kubernetes/client-node';
import { MAX_TARGETS } from '../core/ledger-entry.ts';
import { selectorString } from '../core/records.ts';
import { type LiveView, openLiveView } from '../kube/live-view.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import { IDLE_REPLAN_MS, PodEvictor } from './evictor.ts';
import type { ReloadRequest, StrategyContext } from './types.ts';

/** How long a view may take to show the current state before the reload fails (and is retried). */
const VIEW_READY_MS = 30_000;

const PLURAL = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' } as const;

/**
 * Objects as the watch delivers them: plain JSON, typed with the client's model interfaces. Their
 * timestamps are RFC 3339 strings, not Dates; every reader here goes through `new Date(...)` or
 * Date.parse, which take both.
 */
const asIs = <T>(raw: RawObject): T => raw as unknown as T;

export class RestartSession<W extends { metadata?: { uid?: string } }> {
  readonly #ctx: StrategyContext;
  readonly #req: ReloadRequest;
  readonly #workload: LiveView<W>;
  readonly #pods: LiveView<V1Pod>;
  #targets: ReadonlySet<string> | undefined;
  #decided = false;
  #durable: Promise<void> | undefined;

  private constructor(
    ctx: StrategyContext,
    req: ReloadRequest,
    workload: LiveView<W>,
    pods: LiveView<V1Pod>,
  ) {
    this.#ctx = ctx;
    this.#req = req;
    this.#workload = workload;
    this.#pods = pods;
  }

  /** Opens both views and waits until they hold the current state. */
  static async open<W extends { metadata?: { uid?: string } }>(
    ctx: StrategyContext,
    req: ReloadRequest,
  ): Promise<RestartSession<W>> {
    const { kind, namespace, name } = req.workload.ref;
    const plural = PLURAL[kind as keyof typeof PLURAL];
    if (!plural) throw new Error(`no restart session for kind ${kind}`);
    const workload = openLiveView<W>(ctx.kc, {
      path: `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/${plural}`,
      fieldSelector: `metadata.name=${name}`,
      transform: asIs,
      signal: ctx.signal,
    });
    // The selector of an apps/v1 workload is immutable, so the one we cached is the one in force.
    const pods = openLiveView<V1Pod>(ctx.kc, {
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
      labelSelector: selectorString(req.workload.selector),
      transform: asIs,
      signal: ctx.signal,
    });
    const session = new RestartSession<W>(ctx, req, workload, pods);
    try {
      const timeout = new Promise<never>((_, reject) => {
        const t = setTimeout(
          () =>
            reject(
              new Error(
                `could not watch ${kind} ${namespace}/${name} and its pods within ${VIEW_READY_MS / 1000}s` +
                  `${(workload.failing ?? pods.failing) ? `: ${workload.failing ?? pods.failing}` : ''}`,
              ),
            ),
          VIEW_READY_MS,
        );
        // Both outcomes clear the timer; a rejection (the views stopped: the reload was interrupted,
        // e.g. leadership lost) is the race's to report, and must not be an unhandled one here, which
        // would end the process.
        const clear = () => clearTimeout(t);
        Promise.all([workload.ready, pods.ready]).then(clear, clear);
      });
      await Promise.race([Promise.all([workload.ready, pods.ready]), timeout]);
    } catch (err) {
      await session.close();
      throw err;
    }
    return session;
  }

  /**
   * Opens a session, runs one restart with it and an evictor paced on its views, and closes it
   * however the restart ends.
   */
  static async run<W extends { metadata?: { uid?: string } }, R>(
    ctx: StrategyContext,
    req: ReloadRequest,
    restart: (
      session: RestartSession<W>,
      evictor: PodEvictor,
      ctx: StrategyContext,
      req: ReloadRequest,
    ) => Promise<R>,
  ): Promise<R> {
    const { kind, namespace, name } = req.workload.ref;
    const session = await RestartSession.open<W>(ctx, req);
    try {
      const result = await restart(
        session,
        new PodEvictor(ctx, namespace, `${kind}/${name}`, session),
        ctx,
        req,
      );
      // The pending write must land before the reconciler records the reload as done.
      await session.durable();
      return result;
    } finally {
      // However the restart ended, the pending write settles first, so no later ledger write of this
      // reload (done, or a retry's) can land before it and be overwritten by it.
      await session.durable().catch(() => undefined);
      await session.close();
    }
  }

  /** The workload as it is now; throws when it was deleted or replaced (another uid). */
  workload(): W {
    const { kind, namespace, name, uid } = this.#req.workload.ref;
    const w = this.#workload.items.get(name);
    if (!w) throw new Error(`${kind} ${namespace}/${name} was deleted`);
    if (w.metadata?.uid !== uid) throw new Error(`${kind} ${namespace}/${name} was replaced`);
    return w;
  }

  /** Every pod the workload's selector matches now (terminating ones included). */
  pods(): V1Pod[] {
    return [...this.#pods.items.values()];
  }

  /**
   * The pods this restart replaces, decided once: the snapshot a resumed reload carries, else the
   * uids `old` names now (at most MAX_TARGETS; beyond that the cutoff rule decides, and the result
   * is undefined). The pending reload is written with them at once, but not awaited here: a surge
   * pod (which disrupts nothing) may be created while the write is in flight, and every eviction
   * waits for it (`durable`). That takes one API write off the path to the first action.
   */
  async targets(old: () => string[]): Promise<ReadonlySet<string> | undefined> {
    if (this.#decided) return this.#targets;
    const resumed = this.#req.targets;
    const uids = resumed ?? [...new Set(old())];
    this.#targets = uids.length <= MAX_TARGETS ? new Set(uids) : undefined;
    this.#durable = this.#ctx.begin(this.#targets ? [...this.#targets] : undefined);
    // Whoever needs it awaits durable(); until then a failed write must not count as unhandled.
    this.#durable.catch(() => undefined);
    this.#decided = true;
    return this.#targets;
  }

  /**
   * Resolves once the pending reload is in the ledger (rejects if that write failed); see targets().
   * Before targets() nothing was written, and nothing may be evicted: every restart decides its
   * targets before its first step.
   */
  durable(): Promise<void> {
    return this.#durable ?? Promise.resolve();
  }

  /** Why the views are not current, for a stall report; undefined when both watch normally. */
  get failing(): string | undefined {
    return this.#workload.failing ?? this.#pods.failing;
  }

  /** Waits for the next change of either view, or `ms`. */
  async changed(ms: number = IDLE_REPLAN_MS): Promise<void> {
    const first = new AbortController();
    await Promise.race([this.#workload.changed(ms, first.signal), this.#pods.changed(ms, first.signal)]);
    first.abort();
    this.#ctx.signal.throwIfAborted();
  }

  /** Waits until the pod view satisfies `pred` (read-your-writes after a create); false after `ms`. */
  untilPods(pred: (pods: ReadonlyMap<string, V1Pod>) => boolean, ms: number): Promise<boolean> {
    return this.#pods.until(pred, ms);
  }

  async close(): Promise<void> {
    await Promise.all([this.#workload.stop(), this.#pods.stop()]);
  }
}
