// What every restart strategy does the same way: evict pods through the Eviction API, back off
// after a refusal (429: a PodDisruptionBudget), report a stall once when blocked longer than
// --stall-after, and pace the level-triggered loop.
import type { V1Pod } from '@kubernetes/client-node';
import { evictPod } from '../kube/eviction.ts';
import { pause, type StrategyContext } from './types.ts';

const MAX_BACKOFF_MS = 16_000;
/** Re-plan at least this often even when nothing changed: a safety net, not the pace. */
export const IDLE_REPLAN_MS = 5_000;

export function readiness(p: V1Pod): { ready: boolean; readySince?: string } {
  const c = p.status?.conditions?.find((x) => x.type === 'Ready');
  const ready = c?.status === 'True';
  const t = c?.lastTransitionTime;
  return ready && t ? { ready, readySince: new Date(t).toISOString() } : { ready };
}

export function controlledBy(p: V1Pod, ownerUid: string): boolean {
  return Boolean(p.metadata?.ownerReferences?.some((o) => o.controller && o.uid === ownerUid));
}

/** A pod to evict: the uid is a precondition, and so is the resourceVersion when given. */
export interface Evictee {
  name: string;
  uid: string;
  resourceVersion?: string;
}

/** What the evictor paces on: the restart's watched views (a RestartSession). */
export interface Views {
  /** Waits for the next change of what the restart watches, or at most `ms`. */
  changed(ms: number): Promise<void>;
  /** Why the views are not current, if they are not: waiting on them then counts towards a stall. */
  readonly failing: string | undefined;
  /**
   * Resolves once the pending reload (with the pods it replaces) is durable in the ledger; rejects
   * when that write failed. Nothing is evicted before it resolves (crash safety, ADR 0008).
   */
  durable(): Promise<void>;
}

const nothing = () => {};

/**
 * Takes the restart-budget slot of one pod replaced in `namespace` (none without --restart-budget),
 * telling the status while the reload waits for it. Call the returned function once the
 * replacement's write is answered (RestartBudget.take).
 */
export async function budgetSlot(ctx: StrategyContext, namespace: string): Promise<() => void> {
  if (!ctx.budget) return nothing;
  let waited = false;
  try {
    return await ctx.budget.take(namespace, ctx.signal, ctx.progress, () => {
      waited = true;
      ctx.onWait?.('budget', true);
    });
  } finally {
    if (waited) ctx.onWait?.('budget', false);
  }
}

export class PodEvictor {
  /** Uids of the pods this reload evicted. */
  readonly evicted = new Set<string>();
  readonly #ctx: StrategyContext;
  readonly #namespace: string;
  readonly #workload: string;
  readonly #views: Views;
  #blockedSince: number | undefined;
  #stalled = false;
  #backoffMs = 0;
  /** A PodDisruptionBudget refused the last eviction (the status shows the reload waiting: 'pdb'). */
  #refused = false;

  constructor(ctx: StrategyContext, namespace: string, workload: string, views: Views) {
    this.#ctx = ctx;
    this.#namespace = namespace;
    this.#workload = workload;
    this.#views = views;
  }

  /**
   * Evicts the pods in order, stopping at the first refusal. The uid precondition makes sure a pod
   * recreated under the same name is never evicted by mistake. Returns false when one was refused.
   */
  async evict(pods: ReadonlyArray<Evictee>): Promise<boolean> {
    if (pods.length > 0) await this.#views.durable();
    for (const p of pods) {
      const used = await budgetSlot(this.#ctx, this.#namespace);
      const r = await evictPod(this.#ctx.core, this.#namespace, p.name, {
        uid: p.uid,
        ...(p.resourceVersion ? { resourceVersion: p.resourceVersion } : {}),
        signal: this.#ctx.signal,
      }).finally(used);
      if (r.outcome === 'changed') {
        // Evicted as not Ready on a view that has fallen behind: it may be Ready now, and evicting it
        // could take the Ready count under the floor (I4). Plan again once the view has caught up.
        this.#ctx.log.debug(
          { workload: this.#workload, namespace: this.#namespace, pod: p.name },
          'pod changed since it was seen not Ready; not evicted',
        );
        return false;
      }
      if (r.outcome === 'blocked') {
        this.blocked(`eviction of pod ${p.name} refused: ${r.last.message}`);
        if (r.last.cause === 'disruption-budget') this.refused(true);
        this.#backoffMs = Math.min(Math.max(this.#backoffMs * 2, 1000), MAX_BACKOFF_MS);
        return false;
      }
      this.#backoffMs = 0;
      this.#blockedSince = undefined;
      this.refused(false);
      if (r.outcome === 'evicted') {
        this.evicted.add(p.uid);
        this.#ctx.progress();
        this.#ctx.log.debug(
          { workload: this.#workload, namespace: this.#namespace, pod: p.name },
          'pod evicted',
        );
      }
    }
    return true;
  }

  /**
   * Evicts, then paces: after an eviction the next step plans at once (the evicted pods count as
   * terminating); when none was evicted (refused, or already gone) it waits for the views to move.
   */
  async evictAndPace(pods: ReadonlyArray<Evictee>): Promise<void> {
    const before = this.evicted.size;
    const all = await this.evict(pods);
    if (!all || this.evicted.size === before) await this.next();
  }

  /**
   * evictAndPace for the pods the planner named, as it chose them from `pods`. A pod it chose while
   * not Ready (an eviction that costs no availability, outside the budget) goes only as it was seen:
   * its resourceVersion is a precondition, so one that has become Ready since is not evicted.
   */
  async evictNamedAndPace(names: readonly string[], pods: readonly V1Pod[]): Promise<void> {
    const byName = new Map(pods.map((p) => [p.metadata?.name, p]));
    await this.evictAndPace(
      names.flatMap((name) => {
        const p = byName.get(name);
        const uid = p?.metadata?.uid;
        if (!p || !uid) return [];
        const rv = p.metadata?.resourceVersion;
        return [{ name, uid, ...(!readiness(p).ready && rv ? { resourceVersion: rv } : {}) }];
      }),
    );
  }

  /**
   * The planner's wait: waiting out the cutoff or a pod's minReadySeconds (a `retryAfterMs`) is
   * progress; anything else counts towards a stall.
   */
  async wait(step: { reason: string; retryAfterMs?: number }): Promise<void> {
    if (step.retryAfterMs === undefined) this.blocked(`waiting: ${step.reason}`);
    await this.next(
      step.retryAfterMs !== undefined ? Math.min(step.retryAfterMs, IDLE_REPLAN_MS) : undefined,
    );
  }

  /** Whether a PodDisruptionBudget refuses this reload's evictions now: told to the status on a change. */
  refused(now: boolean): void {
    if (now === this.#refused) return;
    this.#refused = now;
    this.#ctx.onWait?.('pdb', now);
  }

  /** Notes that the reload cannot progress; reports a stall once it lasts --stall-after. */
  blocked(why: string): void {
    this.#blockedSince ??= Date.now();
    if (!this.#stalled && Date.now() - this.#blockedSince >= this.#ctx.stallAfterMs) {
      this.#stalled = true;
      this.#ctx.onStall(why);
    }
  }

  /**
   * Waits before the next step: out the backoff after a refused eviction; else until something
   * watched changes, or `retryAfterMs` when the planner gave one (else IDLE_REPLAN_MS).
   */
  async next(retryAfterMs?: number): Promise<void> {
    const failing = this.#views.failing;
    if (failing) this.blocked(`watch failing: ${failing}`);
    if (this.#backoffMs > 0) await pause(this.#backoffMs, this.#ctx.signal);
    else await this.#views.changed(retryAfterMs !== undefined ? Math.max(50, retryAfterMs) : IDLE_REPLAN_MS);
  }
}

export function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}
