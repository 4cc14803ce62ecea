// One level-triggered step of a drift-free DaemonSet restart: node by node, within maxUnavailable.
// A node counts as unavailable while it has no available daemon pod, so with the default budget of
// one node the replacement must be Ready (for minReadySeconds) on its node before the next node's
// pod goes. Pure: the same input always yields the same step.

import { isOldUnderRule, type OldPodRule, waitUnderRule } from './cutoff.ts';
import { type IntOrPercent, scaledValue } from './rolling.ts';
import { type AvailabilityPod, availableInMs } from './rolling-statefulset.ts';

export interface NodePod extends AvailabilityPod {
  /** spec.nodeName; undefined while the pod is not yet bound. */
  node: string | undefined;
}

export interface DaemonSetBudget {
  maxUnavailable: number;
  /**
   * The DaemonSet asks for no unavailability (maxUnavailable 0, so it surges on template rollouts).
   * We do not create surge pods for DaemonSets: each node in turn is briefly without its pod.
   */
  surgeIgnored: boolean;
}

/**
 * The number of nodes that may be without an available daemon pod, resolved as the DaemonSet
 * controller does (pkg/controller/daemon/util UnavailableCount and rollingUpdate): a percentage of
 * desiredNumberScheduled rounds UP. Unlike the controller, absent (OnDelete, or no rollingUpdate)
 * means 1, and 0 becomes 1: we pace the restart ourselves and have no surge.
 */
export function resolveDaemonSetBudget(value: IntOrPercent | undefined, desired: number): DaemonSetBudget {
  const n = value === undefined ? 1 : scaledValue(value, desired, true);
  return { maxUnavailable: Math.max(1, n), surgeIgnored: n === 0 };
}

/** The DaemonSet fields isDaemonSetRolloutInProgress reads; absent counts are 0. */
export interface DaemonSetRolloutState {
  generation?: number;
  observedGeneration?: number;
  /** spec.updateStrategy.type: 'RollingUpdate' (the default) or 'OnDelete'. */
  updateStrategy?: string;
  desiredNumberScheduled?: number;
  updatedNumberScheduled?: number;
}

/**
 * Whether the DaemonSet controller is rolling out a template: kubectl's rollout status without its
 * "numberAvailable < desired" clause (our own evictions cause that, and an unhealthy pod would
 * hold it forever), and never for OnDelete, whose controller replaces nothing by itself: there an
 * updatedNumberScheduled below desired lasts until someone deletes the pods.
 */
export function isDaemonSetRolloutInProgress(s: DaemonSetRolloutState): boolean {
  if ((s.generation ?? 0) > (s.observedGeneration ?? 0)) return true;
  if (s.updateStrategy === 'OnDelete') return false;
  return (s.updatedNumberScheduled ?? 0) < (s.desiredNumberScheduled ?? 0);
}

export interface DaemonSetRestartInput {
  /** status.desiredNumberScheduled: the nodes that should run the daemon pod. */
  desired: number;
  /**
   * Progressive reloads: one node's Ready old pods go alone until a replacement is available (then
   * maxUnavailable applies), so the restart stops at its first replacement that fails.
   */
  canary?: boolean;
  /** spec.updateStrategy.rollingUpdate.maxUnavailable (RollingUpdate only). */
  maxUnavailable?: IntOrPercent;
  /** spec.minReadySeconds */
  minReadySeconds?: number;
  cutoffMs: number;
  /** From isDaemonSetRolloutInProgress. */
  rolloutInProgress: boolean;
  /** The pods the DaemonSet controls (terminating ones included). */
  pods: readonly NodePod[];
  nowMs: number;
  skewMarginMs?: number;
  /** The uids to replace, snapshotted when the restart began; when given, no cutoff wait (OldPodRule). */
  targets?: ReadonlySet<string>;
}

export type DaemonSetRestartStep =
  /** No live pod predates T. Replacements may still be starting. */
  | { kind: 'done' }
  | { kind: 'wait'; reason: 'rollout-in-progress' }
  | { kind: 'wait'; reason: 'before-cutoff'; retryAfterMs: number }
  /** The budget is spent by nodes without an available pod; retryAfterMs as for StatefulSets. */
  | { kind: 'wait'; reason: 'waiting-for-ready'; retryAfterMs?: number }
  /** Evict these pods (by name): every old pod on the chosen nodes. `nodes` names the nodes. */
  | { kind: 'evict'; pods: string[]; nodes: string[] };

/** Unbound pods are grouped alone, under a key no node name can have. */
const nodeKey = (p: NodePod): string => p.node ?? `<unbound>/${p.name}`;

/** The next step of restarting a DaemonSet's pods created before input.cutoffMs. Pure. */
export function planDaemonSetRestartStep(input: DaemonSetRestartInput): DaemonSetRestartStep {
  const { desired, cutoffMs, nowMs } = input;
  if (!Number.isInteger(desired) || desired < 0) {
    throw new RangeError(`desired must be a non-negative integer, got ${desired}`);
  }
  if (input.rolloutInProgress) return { kind: 'wait', reason: 'rollout-in-progress' };
  const rule: OldPodRule = input.targets
    ? { targets: input.targets }
    : { cutoffMs, nowMs, ...(input.skewMarginMs !== undefined ? { skewMarginMs: input.skewMarginMs } : {}) };
  const retryAfterMs = waitUnderRule(rule);
  if (retryAfterMs > 0) return { kind: 'wait', reason: 'before-cutoff', retryAfterMs };

  const live = input.pods.filter((p) => !p.terminating);
  const minReady = input.minReadySeconds ?? 0;
  const nodes = new Map<string, { old: NodePod[]; availableNow: boolean; availableAfter: boolean }>();
  let soonest = Number.POSITIVE_INFINITY;
  for (const p of live) {
    const key = nodeKey(p);
    const n = nodes.get(key) ?? { old: [], availableNow: false, availableAfter: false };
    nodes.set(key, n);
    const isOld = isOldUnderRule(p, rule);
    if (isOld) n.old.push(p);
    const inMs = availableInMs(p, minReady, nowMs);
    if (inMs === 0) {
      n.availableNow = true;
      if (!isOld) n.availableAfter = true;
    } else soonest = Math.min(soonest, inMs);
  }
  const withOld = [...nodes.entries()].filter(([, n]) => n.old.length > 0);
  if (withOld.length === 0) return { kind: 'done' };

  let availableNodes = 0;
  for (const n of nodes.values()) if (n.availableNow) availableNodes++;
  const unavailable = Math.max(0, desired - availableNodes);
  let budget = Math.max(
    0,
    resolveDaemonSetBudget(input.maxUnavailable, desired).maxUnavailable - unavailable,
  );
  if (input.canary && ![...nodes.values()].some((n) => n.availableAfter)) {
    // No replacement available yet: one node goes alone, and none more while its pod starts.
    const starting = live.some((p) => !isOldUnderRule(p, rule));
    budget = Math.min(budget, starting ? 0 : 1);
  }

  // A node costs budget only if evicting its old pods takes away its last available pod. Nodes
  // whose old pods serve nobody (or that also run an available new pod) go first, for free.
  const byName = ([a]: [string, unknown], [b]: [string, unknown]) => (a < b ? -1 : a > b ? 1 : 0);
  const free = withOld.filter(([, n]) => !n.availableNow || n.availableAfter).sort(byName);
  const costly = withOld.filter(([, n]) => n.availableNow && !n.availableAfter).sort(byName);
  const chosen = [...free, ...costly.slice(0, budget)];
  if (chosen.length > 0) {
    return {
      kind: 'evict',
      nodes: chosen.map(([key]) => key),
      pods: chosen.flatMap(([, n]) => n.old.map((p) => p.name)),
    };
  }
  return Number.isFinite(soonest)
    ? { kind: 'wait', reason: 'waiting-for-ready', retryAfterMs: soonest }
    : { kind: 'wait', reason: 'waiting-for-ready' };
}
