// One level-triggered step of a drift-free StatefulSet restart: from the pods as they are now,
// decide which old pods to evict next (highest ordinal first), or why to wait. Like the Deployment
// planner in rolling.ts, the same input always yields the same step, so a crash loses nothing.
//
// A StatefulSet recreates an evicted pod under the same name, so "old" is always judged on the pod
// that exists now: a recreated pod has a new uid and a creationTimestamp after the cutoff.

import { isOldUnderRule, type OldPodRule, waitUnderRule } from './cutoff.ts';
import { type IntOrPercent, type RestartPod, scaledValue } from './rolling.ts';

/** A pod with what availability needs: when it became Ready (for minReadySeconds). */
export interface AvailabilityPod extends RestartPod {
  /** lastTransitionTime of the Ready condition (RFC 3339), when Ready. */
  readySince?: string;
}

export interface OrdinalPod extends AvailabilityPod {
  /** The pod's ordinal (label apps.kubernetes.io/pod-index, or the name's suffix); undefined if unknown. */
  ordinal: number | undefined;
}

/**
 * 0 when the pod is available now: Ready, not terminating, and Ready for minReadySeconds, as
 * podutil.IsPodAvailable judges it. Else the ms until it will be, or Infinity when that depends on
 * something other than time (not Ready, terminating, or no Ready transition time to count from).
 */
export function availableInMs(pod: AvailabilityPod, minReadySeconds: number, nowMs: number): number {
  if (!pod.ready || pod.terminating) return Number.POSITIVE_INFINITY;
  if (minReadySeconds <= 0) return 0;
  const since = pod.readySince === undefined ? Number.NaN : Date.parse(pod.readySince);
  if (Number.isNaN(since)) return Number.POSITIVE_INFINITY;
  return Math.max(0, since + minReadySeconds * 1000 - nowMs);
}

/**
 * spec.updateStrategy.rollingUpdate.maxUnavailable resolved as the StatefulSet controller does
 * (pkg/controller/statefulset, getStatefulSetMaxUnavailable): absent means 1, a percentage of
 * replicas rounds DOWN (the API reference says up; the controller rounds down), and never below 1.
 */
export function resolveStatefulSetMaxUnavailable(value: IntOrPercent | undefined, replicas: number): number {
  return Math.max(1, scaledValue(value ?? 1, replicas, false));
}

/** The StatefulSet fields isStatefulSetRolloutInProgress reads; absent counts are 0, as the API omits zeros. */
export interface StatefulSetRolloutState {
  generation?: number;
  observedGeneration?: number;
  /** spec.updateStrategy.type: 'RollingUpdate' (the default) or 'OnDelete'. */
  updateStrategy?: string;
  /** spec.updateStrategy.rollingUpdate.partition */
  partition?: number;
  /** spec.replicas */
  replicas?: number;
  currentRevision?: string;
  updateRevision?: string;
  updatedReplicas?: number;
}

/**
 * Whether the StatefulSet controller is rolling out a template, so a restart must wait:
 * - the controller has not yet seen the latest spec (observedGeneration < generation); or
 * - RollingUpdate, currentRevision != updateRevision, and fewer pods are on updateRevision than the
 *   rollout will update (replicas − partition).
 *
 * Two cases keep currentRevision != updateRevision for good, with no rollout under way, and must not
 * block a reload forever:
 * - OnDelete: the controller never sets currentRevision to updateRevision (completeRollingUpdate only
 *   runs for RollingUpdate); pods move to the new revision only when deleted, which our restart does.
 * - RollingUpdate whose every pod to update is updated but one is not Ready (the crash a config fix may
 *   cure), or a partition that leaves lower ordinals on the old revision. The controller is not
 *   replacing anything then; the planner still paces on readiness.
 */
export function isStatefulSetRolloutInProgress(s: StatefulSetRolloutState): boolean {
  if ((s.generation ?? 0) > (s.observedGeneration ?? 0)) return true;
  if (s.updateStrategy === 'OnDelete') return false;
  if (!s.currentRevision || !s.updateRevision || s.currentRevision === s.updateRevision) return false;
  const toUpdate = Math.max(0, (s.replicas ?? 1) - (s.partition ?? 0));
  return (s.updatedReplicas ?? 0) < toUpdate;
}

export interface StatefulSetRestartInput {
  /** spec.replicas */
  replicas: number;
  /**
   * Progressive reloads: one Ready old pod goes alone until a replacement is Ready (then
   * maxUnavailable applies), so the restart stops at its first replacement that fails.
   */
  canary?: boolean;
  /** spec.ordinals.start (default 0): the set's ordinals are start … start+replicas−1. */
  ordinalStart?: number;
  /** spec.updateStrategy.rollingUpdate.maxUnavailable, when set (else 1). */
  maxUnavailable?: IntOrPercent;
  /** spec.minReadySeconds */
  minReadySeconds?: number;
  /** The cutoff T from effectiveCutoff. */
  cutoffMs: number;
  /** From isStatefulSetRolloutInProgress. */
  rolloutInProgress: boolean;
  /** The pods the StatefulSet controls (terminating ones included). */
  pods: readonly OrdinalPod[];
  /** Our wall clock (epoch ms): for the before-cutoff wait and minReadySeconds. */
  nowMs: number;
  /** Must match the margin given to effectiveCutoff. Default 1 s. */
  skewMarginMs?: number;
  /** The uids to replace, snapshotted when the restart began; when given, no cutoff wait (OldPodRule). */
  targets?: ReadonlySet<string>;
}

export type StatefulSetRestartStep =
  /** No live pod in the set's ordinal range predates T. Replacements may still be starting. */
  | { kind: 'done' }
  | { kind: 'wait'; reason: 'rollout-in-progress' }
  | { kind: 'wait'; reason: 'before-cutoff'; retryAfterMs: number }
  /**
   * maxUnavailable pods are already unavailable (a replacement is starting or serving less than
   * minReadySeconds, or some pod is unhealthy). retryAfterMs, when given, is when a pod's
   * minReadySeconds runs out.
   */
  | { kind: 'wait'; reason: 'waiting-for-ready'; retryAfterMs?: number }
  /** Evict these pods (by name), in this order. */
  | { kind: 'evict'; pods: string[] };

const byOrdinalDesc = (a: OrdinalPod, b: OrdinalPod): number => (b.ordinal ?? 0) - (a.ordinal ?? 0);

/**
 * The next step of restarting a StatefulSet's pods created before input.cutoffMs. Pure.
 *
 * Old pods that are not Ready go first and cost nothing: they serve nobody and already count as
 * unavailable (and a broken pod may be what the new config fixes). Then Ready old pods, highest
 * ordinal first, as many as maxUnavailable minus the pods unavailable now allows. A missing
 * ordinal (evicted, not yet recreated) counts as unavailable, so with the default maxUnavailable
 * of 1 each replacement is Ready for minReadySeconds before the next pod goes.
 *
 * Pods outside the ordinal range are being scaled away by the controller and are left to it.
 */
export function planStatefulSetRestartStep(input: StatefulSetRestartInput): StatefulSetRestartStep {
  const { replicas, cutoffMs, nowMs } = input;
  if (!Number.isInteger(replicas) || replicas < 0) {
    throw new RangeError(`replicas must be a non-negative integer, got ${replicas}`);
  }
  const minReadySeconds = input.minReadySeconds ?? 0;
  if (input.rolloutInProgress) return { kind: 'wait', reason: 'rollout-in-progress' };

  const rule: OldPodRule = input.targets
    ? { targets: input.targets }
    : { cutoffMs, nowMs, ...(input.skewMarginMs !== undefined ? { skewMarginMs: input.skewMarginMs } : {}) };
  const retryAfterMs = waitUnderRule(rule);
  if (retryAfterMs > 0) return { kind: 'wait', reason: 'before-cutoff', retryAfterMs };

  const start = input.ordinalStart ?? 0;
  const inSet = input.pods.filter(
    (p) => !p.terminating && p.ordinal !== undefined && p.ordinal >= start && p.ordinal < start + replicas,
  );
  const old = inSet.filter((p) => isOldUnderRule(p, rule)).sort(byOrdinalDesc);
  if (old.length === 0) return { kind: 'done' };

  let soonest = Number.POSITIVE_INFINITY;
  // Two live pods can never share an ordinal, but count ordinals, not pods, to be safe.
  const availableOrdinals = new Set<number>();
  for (const p of inSet) {
    const inMs = availableInMs(p, minReadySeconds, nowMs);
    if (inMs === 0) availableOrdinals.add(p.ordinal as number);
    else soonest = Math.min(soonest, inMs);
  }
  const unavailable = replicas - availableOrdinals.size;
  let budget = Math.max(0, resolveStatefulSetMaxUnavailable(input.maxUnavailable, replicas) - unavailable);
  if (input.canary) {
    // No replacement Ready yet: one goes alone, and none more while it starts.
    const fresh = inSet.filter((p) => !old.includes(p));
    if (!fresh.some((p) => p.ready)) budget = Math.min(budget, fresh.length > 0 ? 0 : 1);
  }

  const notReadyOld = old.filter((p) => !p.ready);
  const readyOld = old.filter((p) => p.ready);
  const evict = [...notReadyOld, ...readyOld.slice(0, budget)].map((p) => p.name);
  if (evict.length > 0) return { kind: 'evict', pods: evict };
  return Number.isFinite(soonest)
    ? { kind: 'wait', reason: 'waiting-for-ready', retryAfterMs: soonest }
    : { kind: 'wait', reason: 'waiting-for-ready' };
}

/** A StatefulSet pod's ordinal: the apps.kubernetes.io/pod-index label, else the `<set>-<n>` name. */
export function podOrdinal(
  setName: string,
  podName: string,
  labels?: Record<string, string> | null,
): number | undefined {
  const fromLabel = labels?.['apps.kubernetes.io/pod-index'];
  if (fromLabel !== undefined && /^\d+$/.test(fromLabel)) return Number(fromLabel);
  const prefix = `${setName}-`;
  if (!podName.startsWith(prefix)) return undefined;
  const rest = podName.slice(prefix.length);
  return /^\d+$/.test(rest) ? Number(rest) : undefined;
}
