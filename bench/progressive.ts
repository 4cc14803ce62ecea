// What the progressive phase expects and reports, pure: how many old pods a bad shared change may
// replace before its halt, derived from the set-up (the Deployments as the API server stored them
// and the service's first wave), and whether the gate's cost to a good change stays within the
// first wave's settle time (issue 24's target; reported, never asserted).
import { type IntOrPercent, minReadyDuringRestart, resolveFenceposts } from '../service/core/rolling.ts';
import { waveOrder } from '../service/core/waves.ts';

export interface WaveMember {
  namespace: string;
  name: string;
  /** gitops-reloader.io/reload-priority (default 0). */
  priority: number;
  replicas: number;
  /** spec.strategy.rollingUpdate as stored (the API server defaults both to "25%"). */
  maxSurge?: IntOrPercent;
  maxUnavailable?: IntOrPercent;
}

/** The first wave as the service chooses it (service/core/waves.ts waveOrder): `size` workloads. */
export function firstWave(members: readonly WaveMember[], size: number): WaveMember[] {
  const id = (m: WaveMember) => `Deployment/${m.namespace}/${m.name}`;
  return [...members]
    .sort((a, b) =>
      waveOrder({ priority: a.priority, workload: id(a) }, { priority: b.priority, workload: id(b) }),
    )
    .slice(0, size);
}

/**
 * Old pods a restart replaces when no replacement ever becomes Ready: it evicts down to its floor
 * (replicas − maxUnavailable, never below one Ready pod) and stops there; with maxUnavailable 0 it
 * only adds surge pods and evicts nothing.
 */
export function replacedBelowFloor(m: WaveMember): number {
  const f = resolveFenceposts(m.maxSurge ?? '25%', m.maxUnavailable ?? '25%', m.replicas);
  return m.replicas - minReadyDuringRestart(m.replicas, f);
}

/**
 * The old pods a bad change replaces before its halt: only the first wave starts (the second waits for
 * it to settle healthy), and each of its workloads stops at its floor.
 */
export function expectedReplacedBeforeHalt(members: readonly WaveMember[], firstWaveSize: number): number {
  return firstWave(members, firstWaveSize).reduce((a, m) => a + replacedBelowFloor(m), 0);
}

/** The waves a change of `workloads` workloads takes: `first`, then each twice the one before. */
export function waveSizes(workloads: number, first: number): number[] {
  const out: number[] = [];
  let left = workloads;
  for (let size = Math.max(1, first); left > 0; size *= 2) {
    out.push(Math.min(size, left));
    left -= size;
  }
  return out;
}

/** Issue 24's target: the gate slows a good change by no more than the first wave's settle time. */
export function gateCost(onS: number, offS: number, settleS: number) {
  const difference = onS - offS;
  return {
    difference_s: Math.round(difference * 100) / 100,
    settle_s: settleS,
    within_settle: difference <= settleS,
  };
}
