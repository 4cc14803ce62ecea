// One level-triggered step of a drift-free Deployment restart: from what the cluster looks like now,
// decide which old pods to evict next, or why to wait. The caller acts, re-reads the world and calls
// again; a crash between steps loses nothing because the same input yields the same step.

import { DEFAULT_SKEW_MARGIN_MS, isBeforeCutoff, waitBeforeActingMs } from './cutoff.ts';

/** An IntOrString as the apps/v1 API holds it: a count (5) or a percentage string ("25%"). */
export type IntOrPercent = number | string;

export interface RestartPod {
  name: string;
  uid: string;
  /** metadata.creationTimestamp as RFC 3339 (whole seconds, as the API server writes it). */
  createdAt: string;
  /** The pod's Ready condition is True. */
  ready: boolean;
  /** metadata.deletionTimestamp is set. */
  terminating: boolean;
  /**
   * A temporary surge pod of this restart (not a ReplicaSet's): never old, counts toward the Ready
   * budget and toward the surge allowance.
   */
  surge?: boolean;
  /**
   * A surge pod this restart made from the current ReplicaSet's template, which it may hand over to
   * that ReplicaSet (docs/adr/0019).
   */
  handable?: boolean;
}

export interface DeploymentRestartInput {
  /** spec.replicas. */
  replicas: number;
  /** spec.strategy.rollingUpdate.maxUnavailable (the API server defaults it to "25%"). */
  maxUnavailable: IntOrPercent;
  /** spec.strategy.rollingUpdate.maxSurge (the API server defaults it to "25%"). */
  maxSurge: IntOrPercent;
  /**
   * spec.strategy.type is Recreate: two generations of pods must never run together, so no surge pod;
   * where only a surge pod could keep a pod Ready (a single replica), the old pod goes anyway.
   */
  recreate?: boolean;
  /** Surge pods this restart creates may be handed over to the ReplicaSet (docs/adr/0019). */
  handover?: boolean;
  /** The cutoff T from effectiveCutoff: every pod created before it must be replaced. */
  cutoffMs: number;
  /** From isRolloutInProgress: a template rollout is under way, so the Deployment controller is busy. */
  rolloutInProgress: boolean;
  /**
   * Every pod that serves for the Deployment: its ReplicaSets' pods plus any temporary surge pods.
   * Surge pods are new (created after T), so they are never evicted, but when Ready they add to the
   * availability budget: that is how a surge pod makes room to evict the last old pod.
   */
  pods: readonly RestartPod[];
  /**
   * Our wall clock (epoch ms). When given, the step waits ('before-cutoff') until waitBeforeActingMs
   * allows acting, so replacements can never be stamped before T. Pass it: without it the caller
   * must do that wait itself.
   */
  nowMs?: number;
  /** The skew margin used with nowMs; must match the one given to effectiveCutoff. Default 1 s. */
  skewMarginMs?: number;
  /**
   * The uids of the pods to replace, snapshotted when the restart began. When given, they alone are
   * old (cutoffMs is not consulted) and there is no before-cutoff wait: see OldPodRule in cutoff.ts.
   */
  targets?: ReadonlySet<string>;
  /**
   * Progressive reloads (docs/progressive-reloads.md): until one replacement is Ready, replace one pod only,
   * so a restart into a bad config stops at its first replacement, not at its availability floor.
   */
  canary?: boolean;
}

export type DeploymentRestartStep =
  /** No live pod predates T. Replacements may still be starting: 'done' means nothing left to evict. */
  | { kind: 'done' }
  /** The Deployment controller is rolling out a template; its rollout replaces the pods anyway. */
  | { kind: 'wait'; reason: 'rollout-in-progress' }
  /** The wall clock has not yet passed T by the skew margin; try again after retryAfterMs. */
  | { kind: 'wait'; reason: 'before-cutoff'; retryAfterMs: number }
  /** The budget is used up and pods are still starting (replacements, surge pods) or unhealthy. */
  | { kind: 'wait'; reason: 'waiting-for-ready' }
  /**
   * Every pod is Ready, the budget is used up and no surge pod fits under the pod-count ceiling
   * (replicas + the surge allowance). Only a change of the world (a pod going) makes room.
   */
  | { kind: 'wait'; reason: 'no-room' }
  /**
   * Create `surge` surge pods and evict the pods named in `evict` (in this order: not-Ready ones
   * first, then the oldest Ready ones), both now; at least one of the two is non-empty. `downtime`
   * marks a Recreate Deployment's eviction below the Ready floor.
   */
  | { kind: 'act'; surge: number; evict: string[]; downtime?: true }
  /**
   * Hand each Ready surge pod to the ReplicaSet in place of one Ready old pod (docs/adr/0019): the
   * old pod is marked to go first, the surge pod joins the ReplicaSet, and the ReplicaSet, one pod
   * over its count, deletes the marked one. Nothing else happens in the same step.
   */
  | { kind: 'handover'; pairs: Array<{ surge: string; old: string }> };

export type WaitReason = Extract<DeploymentRestartStep, { kind: 'wait' }>['reason'];

export interface Fenceposts {
  maxSurge: number;
  maxUnavailable: number;
}

/**
 * An IntOrString scaled against `total`, as apimachinery's intstr.GetScaledValueFromIntOrPercent:
 * a number is taken as is; "N%" is N*total/100, rounded up or down. Any other string is an error,
 * as it is there (the API server's validation never lets one through).
 */
export function scaledValue(value: IntOrPercent, total: number, roundUp: boolean): number {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) {
      throw new RangeError(`invalid IntOrString ${value}: must be a non-negative integer`);
    }
    return value;
  }
  // Go: strings.HasSuffix(s, "%") then strconv.Atoi on the rest (an optional sign, then digits).
  const m = /^([+-]?\d+)%$/.exec(value);
  if (!m)
    throw new RangeError(`invalid IntOrString ${JSON.stringify(value)}: not an integer or a percentage`);
  const pct = Number(m[1]);
  if (pct < 0) throw new RangeError(`invalid IntOrString ${JSON.stringify(value)}: negative percentage`);
  // Same operation order as Go's float64(value) * float64(total) / 100, so rounding agrees exactly.
  const scaled = (pct * total) / 100;
  return roundUp ? Math.ceil(scaled) : Math.floor(scaled);
}

/**
 * Resolves maxSurge and maxUnavailable against the desired replicas the way the Deployment
 * controller does (k8s.io/kubernetes pkg/controller/deployment/util/deployment_util.go,
 * ResolveFenceposts): an absent value counts as 0, maxSurge percentages round up, maxUnavailable
 * percentages round down, and if both come out 0, maxUnavailable becomes 1.
 */
export function resolveFenceposts(
  maxSurge: IntOrPercent | undefined,
  maxUnavailable: IntOrPercent | undefined,
  desired: number,
): Fenceposts {
  const surge = scaledValue(maxSurge ?? 0, desired, true);
  let unavailable = scaledValue(maxUnavailable ?? 0, desired, false);
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { maxSurge: surge, maxUnavailable: unavailable };
}

/**
 * The fewest Ready pods the restart keeps: replicas − maxUnavailable, with maxUnavailable capped at
 * replicas as in the controller's MaxUnavailable(). Unlike the controller we never go below one
 * Ready pod while replicas ≥ 1: a reload must not cause an outage (invariant I4), so a
 * single-replica Deployment, or one allowing 100% unavailable, waits for a surge pod instead.
 */
export function minReadyDuringRestart(replicas: number, f: Fenceposts): number {
  const unavailable = Math.min(f.maxUnavailable, replicas);
  const floor = replicas - unavailable;
  return replicas >= 1 ? Math.max(floor, 1) : floor;
}

/**
 * How many surge pods the restart may run at once: the Deployment's own maxSurge, so that there are
 * never more than replicas + maxSurge pods that are not terminating, as in its rolling update. One
 * exception, for invariant I4: a single replica with maxSurge 0 (where no eviction keeps a pod Ready)
 * gets one surge pod. Recreate gets none: two generations of pods must never run together.
 */
export function surgeAllowance(replicas: number, f: Fenceposts, recreate = false): number {
  if (recreate || replicas < 1) return 0;
  if (f.maxSurge > 0) return f.maxSurge;
  return minReadyDuringRestart(replicas, f) >= replicas ? 1 : 0;
}

const byAge = (a: RestartPod, b: RestartPod): number => {
  const d = Date.parse(a.createdAt) - Date.parse(b.createdAt);
  if (d !== 0) return d;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
};

/**
 * The next step of restarting a Deployment's pods created before input.cutoffMs (or the snapshot's
 * uids). Pure. It uses both of the Deployment's rolling-update allowances at once, as its rolling
 * update does (docs/adr/0017):
 *  - maxUnavailable: evict old pods while the Ready count stays ≥ minReadyDuringRestart; a Ready
 *    surge pod or replacement adds to that count, so each one that becomes Ready lets one more go;
 *  - maxSurge: from the first step, a surge pod per allowed surge slot (surgeAllowance), never more
 *    than the old pods this step leaves, and never more than replicas + allowance live pods.
 */
export function planDeploymentRestartStep(input: DeploymentRestartInput): DeploymentRestartStep {
  const { replicas, cutoffMs, pods } = input;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new RangeError(`replicas must be a non-negative integer, got ${replicas}`);
  }
  if (input.rolloutInProgress) return { kind: 'wait', reason: 'rollout-in-progress' };

  if (input.nowMs !== undefined && !input.targets) {
    const retryAfterMs = waitBeforeActingMs(
      input.nowMs,
      cutoffMs,
      input.skewMarginMs ?? DEFAULT_SKEW_MARGIN_MS,
    );
    if (retryAfterMs > 0) return { kind: 'wait', reason: 'before-cutoff', retryAfterMs };
  }

  // Terminating pods are already on their way out: neither old (their replacement is coming) nor
  // available (Services stop routing to them).
  const live = pods.filter((p) => !p.terminating);
  const targets = input.targets;
  const old = live
    .filter((p) => !p.surge && (targets ? targets.has(p.uid) : isBeforeCutoff(p.createdAt, cutoffMs)))
    .sort(byAge);
  if (old.length === 0) return { kind: 'done' };

  // A Ready surge pod of the current template can take an old pod's place in the ReplicaSet: no
  // replacement has to start after the old pod goes (a pod start saved per surge pod). Only when the
  // ReplicaSet has all its pods and every one is Ready: it then deletes the pod ranked lowest, which
  // is the marked old pod; a pod still starting would rank lower and be deleted instead.
  // While a Ready surge pod waits for that moment, it is not spent as eviction budget: handed over,
  // it replaces an old pod with no pod start at all, where an eviction costs one.
  // An old pod that is not Ready serves nobody, so evicting it costs no availability.
  const notReadyOld = old.filter((p) => !p.ready);
  const readyOld = old.filter((p) => p.ready);
  const give = live.filter((p) => p.surge && p.handable && p.ready);
  if (give.length > 0) {
    const own = live.filter((p) => !p.surge);
    // An old pod that is not Ready serves nobody: it goes at once, and blocks the handover until then.
    if (notReadyOld.length > 0) return { kind: 'act', surge: 0, evict: notReadyOld.map((p) => p.name) };
    if (own.length === replicas && own.every((p) => p.ready)) {
      const n = Math.min(give.length, old.length);
      return {
        kind: 'handover',
        pairs: give.slice(0, n).map((s, i) => ({ surge: s.name, old: (old[i] as RestartPod).name })),
      };
    }
    return { kind: 'wait', reason: 'waiting-for-ready' };
  }

  const fenceposts = resolveFenceposts(input.maxSurge, input.maxUnavailable, replicas);
  const ready = live.filter((p) => p.ready).length;
  const allowance = surgeAllowance(replicas, fenceposts, input.recreate);
  // When surge pods can be handed over and there are no more old pods than surge slots, surge pods
  // replace them all in one round and nothing is evicted: no eviction to be refused by a strict PDB,
  // and no replacement pod to start after it. Not with a surge pod that may not be handed over (one
  // an earlier leader made): it only makes room for evictions.
  const coverAll =
    input.handover === true && old.length <= allowance && live.every((p) => !p.surge || p.handable === true);
  const budget = coverAll ? 0 : Math.max(0, ready - minReadyDuringRestart(replicas, fenceposts));
  const evict = [...notReadyOld, ...readyOld.slice(0, budget)].map((p) => p.name);

  // Surge pods stand in for the old pods this step cannot evict yet: once Ready, each lets one more
  // go. The ReplicaSet replaces each evicted pod one for one, so the live count before this step is
  // the count after it, plus the surge pods it creates.
  const liveSurge = live.filter((p) => p.surge).length;
  const wanted = Math.min(allowance, old.length - evict.length);
  const surge = Math.max(0, Math.min(wanted - liveSurge, replicas + allowance - live.length));
  if (input.canary) {
    // The first replacement alone: every pod that is not old is one (a surge pod, or the
    // ReplicaSet's pod for an evicted one). Old pods that are not Ready serve nobody and still go.
    const fresh = live.filter((p) => !old.includes(p));
    if (!fresh.some((p) => p.ready)) {
      const notReady = notReadyOld.map((p) => p.name);
      if (fresh.length > 0) {
        if (notReady.length > 0) return { kind: 'act', surge: 0, evict: notReady };
        return { kind: 'wait', reason: 'waiting-for-ready' };
      }
      const one =
        surge > 0
          ? { surge: 1, evict: notReady }
          : { surge: 0, evict: evict.slice(0, Math.max(1, notReady.length)) };
      if (one.surge > 0 || one.evict.length > 0) return { kind: 'act', ...one };
    }
  }
  if (evict.length > 0 || surge > 0) return { kind: 'act', surge, evict };

  const starting = live.some((p) => !p.ready) || live.filter((p) => !p.surge).length < replicas;
  if (starting) return { kind: 'wait', reason: 'waiting-for-ready' };
  // Every pod is Ready and nothing fits. Recreate accepts downtime here rather than a surge pod.
  if (input.recreate) return { kind: 'act', surge: 0, evict: old.map((p) => p.name), downtime: true };
  return { kind: 'wait', reason: 'no-room' };
}

/** The Deployment fields isRolloutInProgress reads; absent status counts are 0, as the API omits zeros. */
export interface DeploymentRolloutState {
  /** metadata.generation */
  generation?: number;
  /** status.observedGeneration */
  observedGeneration?: number;
  /** spec.replicas (the API server defaults it to 1) */
  replicas?: number;
  /** status.updatedReplicas */
  updatedReplicas?: number;
  /** status.replicas */
  statusReplicas?: number;
  /** status.availableReplicas */
  availableReplicas?: number;
}

export type RolloutPhase =
  | 'spec-not-observed'
  | 'updating-replicas'
  | 'old-replicas-pending-termination'
  | 'updated-replicas-unavailable'
  | 'complete';

/**
 * kubectl rollout status for a Deployment, clause by clause (k8s.io/kubectl
 * pkg/polymorphichelpers/rollout_status.go, DeploymentStatusViewer.Status), minus its
 * ProgressDeadlineExceeded error, which needs the conditions and says "stalled", not "done".
 */
export function deploymentRolloutPhase(d: DeploymentRolloutState): RolloutPhase {
  const generation = d.generation ?? 0;
  const observed = d.observedGeneration ?? 0;
  if (generation > observed) return 'spec-not-observed';
  const desired = d.replicas ?? 1;
  const updated = d.updatedReplicas ?? 0;
  if (updated < desired) return 'updating-replicas';
  if ((d.statusReplicas ?? 0) > updated) return 'old-replicas-pending-termination';
  if ((d.availableReplicas ?? 0) < updated) return 'updated-replicas-unavailable';
  return 'complete';
}

/**
 * Whether a template rollout is under way, so a restart must wait for it: kubectl's rollout
 * status, except that "updated replicas not yet available" does not count. That last clause is
 * not about the template: our own evictions cause it between steps (planDeploymentRestartStep
 * already paces on readiness), and a pod that never becomes Ready (the crash a config fix is meant
 * to cure) would hold it forever, so the reload that fixes it would never run.
 */
export function isRolloutInProgress(d: DeploymentRolloutState): boolean {
  const phase = deploymentRolloutPhase(d);
  return phase !== 'complete' && phase !== 'updated-replicas-unavailable';
}
