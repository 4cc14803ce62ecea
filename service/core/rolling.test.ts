import { describe, expect, it } from 'vitest';
import { effectiveCutoff, isBeforeCutoff } from './cutoff.ts';
import {
  type DeploymentRestartInput,
  type DeploymentRestartStep,
  deploymentRolloutPhase,
  isRolloutInProgress,
  minReadyDuringRestart,
  planDeploymentRestartStep,
  type RestartPod,
  resolveFenceposts,
  scaledValue,
  surgeAllowance,
} from './rolling.ts';

const T = Date.parse('2026-01-01T10:00:00Z');
const iso = (ms: number): string =>
  new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

/** A pod created `secondsFromT` seconds from the cutoff (negative: old). */
function pod(name: string, secondsFromT: number, o: Partial<RestartPod> = {}): RestartPod {
  return {
    name,
    uid: `uid-${name}`,
    createdAt: iso(T + secondsFromT * 1000),
    ready: true,
    terminating: false,
    ...o,
  };
}

/** An act step that only evicts. */
const evicts = (names: string[]): DeploymentRestartStep => ({ kind: 'act', surge: 0, evict: names });

function plan(
  o: Partial<DeploymentRestartInput> & Pick<DeploymentRestartInput, 'pods'>,
): DeploymentRestartStep {
  return planDeploymentRestartStep({
    replicas: 3,
    maxUnavailable: 1,
    maxSurge: 0,
    cutoffMs: T,
    rolloutInProgress: false,
    ...o,
  });
}

describe('scaledValue (intstr.GetScaledValueFromIntOrPercent)', () => {
  it('takes a count as is, whatever the total', () => {
    expect(scaledValue(3, 10, false)).toBe(3);
    expect(scaledValue(3, 1, true)).toBe(3);
  });

  it('scales a percentage and rounds it the way it is told', () => {
    expect(scaledValue('25%', 3, false)).toBe(0);
    expect(scaledValue('25%', 3, true)).toBe(1);
    expect(scaledValue('50%', 5, false)).toBe(2);
    expect(scaledValue('50%', 5, true)).toBe(3);
    expect(scaledValue('100%', 7, false)).toBe(7);
    expect(scaledValue('0%', 7, true)).toBe(0);
    expect(scaledValue('10%', 30, true)).toBe(3); // exact, no float drift to 4
    expect(scaledValue('+20%', 10, false)).toBe(2); // strconv.Atoi accepts a sign
  });

  it('refuses what the API server would never accept', () => {
    expect(() => scaledValue('5', 10, false)).toThrow(/not an integer or a percentage/);
    expect(() => scaledValue('12.5%', 10, false)).toThrow(/not an integer or a percentage/);
    expect(() => scaledValue(' 5%', 10, false)).toThrow(/not an integer or a percentage/);
    expect(() => scaledValue('-5%', 10, false)).toThrow(/negative/);
    expect(() => scaledValue(-1, 10, false)).toThrow(/non-negative integer/);
    expect(() => scaledValue(1.5, 10, false)).toThrow(/non-negative integer/);
  });
});

describe('resolveFenceposts (deployment util ResolveFenceposts)', () => {
  it.each([
    // The examples in the Go doc comment of ResolveFenceposts.
    { desired: 2, surge: '0%', unavailable: '1%', want: { maxSurge: 0, maxUnavailable: 1 } },
    { desired: 1, surge: '0%', unavailable: '1%', want: { maxSurge: 0, maxUnavailable: 1 } },
    { desired: 2, surge: '1%', unavailable: '25%', want: { maxSurge: 1, maxUnavailable: 0 } },
    { desired: 1, surge: '1%', unavailable: '25%', want: { maxSurge: 1, maxUnavailable: 0 } },
    { desired: 2, surge: '1%', unavailable: '0%', want: { maxSurge: 1, maxUnavailable: 0 } },
    { desired: 1, surge: '1%', unavailable: '0%', want: { maxSurge: 1, maxUnavailable: 0 } },
    // The apps/v1 defaults (25% / 25%): maxUnavailable is 0 below 4 replicas.
    { desired: 1, surge: '25%', unavailable: '25%', want: { maxSurge: 1, maxUnavailable: 0 } },
    { desired: 3, surge: '25%', unavailable: '25%', want: { maxSurge: 1, maxUnavailable: 0 } },
    { desired: 4, surge: '25%', unavailable: '25%', want: { maxSurge: 1, maxUnavailable: 1 } },
    { desired: 10, surge: '25%', unavailable: '25%', want: { maxSurge: 3, maxUnavailable: 2 } },
    // Counts pass through; both zero becomes maxUnavailable 1; absent means 0.
    { desired: 5, surge: 0, unavailable: 2, want: { maxSurge: 0, maxUnavailable: 2 } },
    { desired: 5, surge: 0, unavailable: 0, want: { maxSurge: 0, maxUnavailable: 1 } },
    { desired: 5, surge: undefined, unavailable: undefined, want: { maxSurge: 0, maxUnavailable: 1 } },
    { desired: 0, surge: '25%', unavailable: '25%', want: { maxSurge: 0, maxUnavailable: 1 } },
  ])(
    'desired $desired, maxSurge $surge, maxUnavailable $unavailable → $want',
    ({ desired, surge, unavailable, want }) => {
      expect(resolveFenceposts(surge, unavailable, desired)).toEqual(want);
    },
  );
});

describe('minReadyDuringRestart', () => {
  it('is replicas − maxUnavailable', () => {
    expect(minReadyDuringRestart(10, { maxSurge: 3, maxUnavailable: 2 })).toBe(8);
  });

  it('never lets a reload take a Deployment to zero Ready pods', () => {
    expect(minReadyDuringRestart(1, { maxSurge: 0, maxUnavailable: 1 })).toBe(1);
    expect(minReadyDuringRestart(3, { maxSurge: 0, maxUnavailable: 3 })).toBe(1);
    expect(minReadyDuringRestart(3, { maxSurge: 0, maxUnavailable: 5 })).toBe(1);
  });

  it('needs nothing of a Deployment scaled to zero', () => {
    expect(minReadyDuringRestart(0, { maxSurge: 0, maxUnavailable: 1 })).toBe(0);
  });
});

describe('planDeploymentRestartStep', () => {
  it('waits while a template rollout is in progress, whatever the pods look like', () => {
    expect(plan({ rolloutInProgress: true, pods: [pod('a', -5), pod('b', -5), pod('c', -5)] })).toEqual({
      kind: 'wait',
      reason: 'rollout-in-progress',
    });
  });

  it('is done when every pod is newer than the cutoff', () => {
    expect(plan({ pods: [pod('a', 0), pod('b', 1), pod('c', 30)] })).toEqual({ kind: 'done' });
  });

  it('is done when there are no pods at all', () => {
    expect(plan({ replicas: 0, pods: [] })).toEqual({ kind: 'done' });
  });

  it('is done when the only old pods are already terminating', () => {
    const pods = [
      pod('a', -5, { terminating: true }),
      pod('b', 2),
      pod('c', 2),
      pod('d', 3, { ready: false }),
    ];
    expect(plan({ pods })).toEqual({ kind: 'done' });
  });

  it('never chooses a pod created at or after the cutoff', () => {
    const pods = [pod('new-ready', 0), pod('new-unready', 1, { ready: false }), pod('old', -1)];
    expect(plan({ replicas: 3, maxUnavailable: 3, pods })).toEqual(evicts(['old']));
  });

  it('evicts one Ready old pod at a time with maxUnavailable 1, oldest first', () => {
    const pods = [pod('b', -10), pod('a', -20), pod('c', -10)];
    expect(plan({ pods })).toEqual(evicts(['a']));
  });

  it('breaks creation-time ties by name, so the same input always gives the same step', () => {
    const pods = [pod('c', -10), pod('b', -10), pod('a', -10)];
    expect(plan({ maxUnavailable: 2, pods })).toEqual(evicts(['a', 'b']));
    expect(plan({ maxUnavailable: 2, pods: [...pods].reverse() })).toEqual(evicts(['a', 'b']));
  });

  it('evicts not-Ready old pods first and all at once, since they cost no availability', () => {
    const pods = [
      pod('r1', -30),
      pod('r2', -30),
      pod('u1', -5, { ready: false }),
      pod('u2', -1, { ready: false }),
    ];
    // replicas 4, maxUnavailable 1: Ready 2, floor 3, so no Ready pod may go, but the broken ones may.
    expect(plan({ replicas: 4, pods })).toEqual(evicts(['u1', 'u2']));
  });

  it('adds Ready old pods after the not-Ready ones while the budget allows', () => {
    const pods = [pod('r1', -30), pod('r2', -20), pod('r3', -10), pod('u1', -5, { ready: false })];
    // replicas 4, maxUnavailable 2: Ready 3, floor 2, so one Ready pod may go along with u1.
    expect(plan({ replicas: 4, maxUnavailable: 2, pods })).toEqual(evicts(['u1', 'r1']));
  });

  it('counts new Ready pods toward availability but never evicts them', () => {
    const pods = [pod('new1', 1), pod('new2', 1), pod('old1', -10), pod('old2', -9)];
    // replicas 4, maxUnavailable 2: Ready 4, floor 2: both old pods may go.
    expect(plan({ replicas: 4, maxUnavailable: 2, pods })).toEqual(evicts(['old1', 'old2']));
  });

  it('ignores terminating pods: they neither count as Ready nor get evicted again', () => {
    const pods = [
      pod('gone', -10, { terminating: true }),
      pod('a', -10),
      pod('b', -10),
      pod('c', 1, { ready: false }),
    ];
    // Ready non-terminating: a, b = 2; floor 3 − 1 = 2; budget 0.
    expect(plan({ pods })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    const readyAgain = [pod('gone', -10, { terminating: true }), pod('a', -10), pod('b', -10), pod('c', 1)];
    expect(plan({ pods: readyAgain })).toEqual(evicts(['a']));
  });

  it('resolves percentages like the Deployment controller', () => {
    const ten = Array.from({ length: 10 }, (_, i) => pod(`p${i}`, -10 - i));
    // 25% of 10 rounds down to 2 unavailable, and up to 3 surge.
    expect(plan({ replicas: 10, maxUnavailable: '25%', maxSurge: '25%', pods: ten })).toEqual({
      kind: 'act',
      surge: 3,
      evict: ['p9', 'p8'],
    });
    // 19% of 10 rounds down to 1; 11% rounds up to 2.
    expect(plan({ replicas: 10, maxUnavailable: '19%', maxSurge: '11%', pods: ten })).toEqual({
      kind: 'act',
      surge: 2,
      evict: ['p9'],
    });
    // 5% of 10 rounds down to 0, maxSurge 0% too: the controller's fencepost rule makes it 1.
    expect(plan({ replicas: 10, maxUnavailable: '5%', maxSurge: '0%', pods: ten })).toEqual(evicts(['p9']));
  });

  describe('the three shapes of issue 15', () => {
    const old = (n: number) => Array.from({ length: n }, (_, i) => pod(`o${i}`, -10 - i));
    const surgePod = (name: string, ready = true) => pod(name, 1, { surge: true, ready });

    it('25%/25% on 10 replicas: 3 surge pods and 2 evictions at once, then as pods get Ready', () => {
      const shape = { replicas: 10, maxSurge: '25%', maxUnavailable: '25%' };
      expect(plan({ ...shape, pods: old(10) })).toEqual({ kind: 'act', surge: 3, evict: ['o9', 'o8'] });
      // Next step, before anything is Ready: nothing more fits (8 Ready, floor 8; 3 surge pods live).
      const starting = [
        ...old(8),
        pod('r1', 1, { ready: false }),
        pod('r2', 1, { ready: false }),
        surgePod('s1', false),
        surgePod('s2', false),
        surgePod('s3', false),
      ];
      expect(plan({ ...shape, pods: starting })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
      // All five Ready: 13 Ready, floor 8, so five more go; the three surge pods cover the three left.
      const ready = [...old(8), pod('r1', 1), pod('r2', 1), surgePod('s1'), surgePod('s2'), surgePod('s3')];
      expect(plan({ ...shape, pods: ready })).toEqual({
        kind: 'act',
        surge: 0,
        evict: ['o7', 'o6', 'o5', 'o4', 'o3'],
      });
    });

    it('maxSurge 1 / maxUnavailable 0 on 10 replicas: one surge pod, then one eviction per Ready pod', () => {
      const shape = { replicas: 10, maxSurge: 1, maxUnavailable: 0 };
      expect(plan({ ...shape, pods: old(10) })).toEqual({ kind: 'act', surge: 1, evict: [] });
      expect(plan({ ...shape, pods: [...old(10), surgePod('s', false)] })).toEqual({
        kind: 'wait',
        reason: 'waiting-for-ready',
      });
      expect(plan({ ...shape, pods: [...old(10), surgePod('s')] })).toEqual(evicts(['o9']));
      // The eviction is seen, the replacement not yet created: wait for it, no second surge pod.
      const gap = [...old(9), pod('gone', -10, { terminating: true }), surgePod('s')];
      expect(plan({ ...shape, pods: gap })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    });

    it('one replica (25%/25% resolves to surge 1, unavailable 0): a surge pod, then the eviction', () => {
      const shape = { replicas: 1, maxSurge: '25%', maxUnavailable: '25%' };
      expect(plan({ ...shape, pods: old(1) })).toEqual({ kind: 'act', surge: 1, evict: [] });
      expect(plan({ ...shape, pods: [...old(1), surgePod('s', false)] })).toEqual({
        kind: 'wait',
        reason: 'waiting-for-ready',
      });
      expect(plan({ ...shape, pods: [...old(1), surgePod('s')] })).toEqual(evicts(['o0']));
    });

    it('never has more than replicas + maxSurge live pods, counting surge pods a crash left', () => {
      const shape = { replicas: 10, maxSurge: '25%', maxUnavailable: '25%' };
      // Two surge pods already live (a previous leader's): only one more.
      expect(plan({ ...shape, pods: [...old(10), surgePod('s1', false), surgePod('s2', false)] })).toEqual({
        kind: 'act',
        surge: 1,
        evict: ['o9', 'o8'],
      });
      // The ReplicaSet runs one pod too many (11 live): one surge pod fewer, so 13 at most.
      const extra = [...old(10), pod('x', 1)];
      expect(plan({ ...shape, pods: extra })).toEqual({ kind: 'act', surge: 2, evict: ['o9', 'o8', 'o7'] });
      // Already 13 live (10 + 3 surge): none more, whatever the budget.
      const full = [...old(10), surgePod('s1'), surgePod('s2'), surgePod('s3')];
      const step = plan({ ...shape, pods: full });
      expect(step).toMatchObject({ kind: 'act', surge: 0 });
      // Three surge pods where the Deployment allows one: none more, and nothing waits on them.
      const over = [...old(3), surgePod('s1'), surgePod('s2'), surgePod('s3')];
      expect(plan({ replicas: 3, maxSurge: 1, maxUnavailable: 0, pods: over })).toEqual(
        evicts(['o2', 'o1', 'o0']),
      );
    });

    it('makes no more surge pods than old pods this step leaves', () => {
      // 4 replicas, maxUnavailable 3 (floor 1), maxSurge 3: three go now, one stays: one surge pod.
      expect(plan({ replicas: 4, maxUnavailable: 3, maxSurge: 3, pods: old(4) })).toEqual({
        kind: 'act',
        surge: 1,
        evict: ['o3', 'o2', 'o1'],
      });
      // Everything may go now: no surge pod at all.
      const mixed = [pod('o0', -10), pod('n1', 1), pod('n2', 1)];
      expect(plan({ replicas: 3, maxUnavailable: 1, maxSurge: 1, pods: mixed })).toEqual(evicts(['o0']));
    });
  });

  it('makes a surge pod for a single replica even when maxSurge is 0 (I4 over the pod-count ceiling)', () => {
    expect(plan({ replicas: 1, maxUnavailable: 1, maxSurge: 0, pods: [pod('only', -10)] })).toEqual({
      kind: 'act',
      surge: 1,
      evict: [],
    });
  });

  it('makes no surge pod for Recreate, and evicts a single Ready replica with downtime instead', () => {
    const only = [pod('only', -10)];
    expect(plan({ replicas: 1, maxUnavailable: '100%', maxSurge: 0, recreate: true, pods: only })).toEqual({
      kind: 'act',
      surge: 0,
      evict: ['only'],
      downtime: true,
    });
    // More replicas: all but one go at once, without downtime, and never a surge pod.
    const three = [pod('a', -10), pod('b', -11), pod('c', -12)];
    expect(plan({ replicas: 3, maxUnavailable: '100%', maxSurge: 0, recreate: true, pods: three })).toEqual(
      evicts(['c', 'b']),
    );
  });

  it('evicts a not-Ready single pod without a surge pod: it serves nobody', () => {
    const pods = [pod('only', -10, { ready: false })];
    expect(plan({ replicas: 1, maxUnavailable: 0, maxSurge: 1, pods })).toEqual(evicts(['only']));
  });

  it('never evicts a surge pod, even one stamped before the cutoff', () => {
    const pods = [pod('s', -10, { surge: true }), pod('a', 1), pod('b', 1), pod('c', 1)];
    expect(plan({ pods })).toEqual({ kind: 'done' });
  });

  it('waits for readiness while replacements are still starting', () => {
    const pods = [pod('old1', -10), pod('old2', -10), pod('fresh', 2, { ready: false })];
    expect(plan({ maxUnavailable: 0, maxSurge: 0, pods })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
  });

  it('waits until the wall clock has passed the cutoff by the skew margin, when given the clock', () => {
    const pods = [pod('a', -10), pod('b', -10), pod('c', -10)];
    expect(plan({ pods, nowMs: T - 200 })).toEqual({
      kind: 'wait',
      reason: 'before-cutoff',
      retryAfterMs: 1200,
    });
    expect(plan({ pods, nowMs: T + 999 })).toEqual({
      kind: 'wait',
      reason: 'before-cutoff',
      retryAfterMs: 1,
    });
    expect(plan({ pods, nowMs: T + 1000 })).toEqual(evicts(['a']));
    expect(plan({ pods, nowMs: T, skewMarginMs: 0 })).toEqual(evicts(['a']));
  });

  it('with a snapshot of target uids, replaces exactly those, at once, whatever the timestamps say', () => {
    // Replacement 'r' was stamped in the same second as the old pods: the cutoff rule alone could not
    // tell it apart, the snapshot can.
    const pods = [pod('a', -10), pod('b', -10), pod('r', -10, { ready: false })];
    const targets = new Set(['uid-a', 'uid-b']);
    expect(plan({ pods, nowMs: T - 200 })).toMatchObject({ kind: 'wait', reason: 'before-cutoff' });
    expect(plan({ pods, nowMs: T - 200, targets })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    const allReady = [pod('a', -10), pod('b', -10), pod('r', -10)];
    expect(plan({ pods: allReady, nowMs: T - 200, targets })).toEqual(evicts(['a']));
    expect(plan({ pods: [pod('r', -10), pod('s', -10), pod('t', -10)], targets })).toEqual({ kind: 'done' });
  });

  it('refuses a cutoff that is not a whole second', () => {
    expect(() => plan({ cutoffMs: T + 1, pods: [pod('a', -1)] })).toThrow(/whole second/);
  });

  it('refuses a negative or fractional replica count', () => {
    expect(() => plan({ replicas: -1, pods: [] })).toThrow(/replicas/);
    expect(() => plan({ replicas: 1.5, pods: [] })).toThrow(/replicas/);
  });

  it('keeps its invariants on arbitrary inputs', () => {
    let seed = 42;
    const rand = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const intOrPct = (): number | string => (rand(2) === 0 ? rand(4) : `${rand(101)}%`);
    for (let round = 0; round < 4000; round++) {
      const replicas = rand(8);
      const pods = Array.from({ length: rand(12) }, (_, i) => {
        const surge = rand(6) === 0;
        return pod(surge ? `s${i}` : `p${i}`, surge ? rand(5) : rand(20) - 10, {
          ready: rand(3) > 0,
          terminating: rand(5) === 0,
          surge,
          ...(surge && rand(2) === 0 ? { handable: true } : {}),
        });
      });
      const recreate = rand(8) === 0;
      const handover = rand(2) === 0;
      const input: DeploymentRestartInput = {
        handover,
        replicas,
        maxUnavailable: intOrPct(),
        maxSurge: intOrPct(),
        cutoffMs: T,
        rolloutInProgress: false,
        pods,
        ...(recreate ? { recreate } : {}),
      };
      const step = planDeploymentRestartStep(input);
      const live = pods.filter((p) => !p.terminating);
      const old = live.filter((p) => !p.surge && isBeforeCutoff(p.createdAt, T));
      const ctx = JSON.stringify({ input, step });
      if (step.kind === 'done') {
        expect(old, ctx).toEqual([]);
        continue;
      }
      expect(old.length, ctx).toBeGreaterThan(0);
      if (step.kind === 'handover') {
        // Only when the ReplicaSet has all its pods, all Ready (else it would delete a starting one);
        // each pair a Ready surge pod it may hand over and a live old pod, each pod used once.
        const own = live.filter((p) => !p.surge);
        expect(own.length === replicas && own.every((p) => p.ready), ctx).toBe(true);
        expect(step.pairs.length, ctx).toBeGreaterThan(0);
        const named = (n: string) => pods.find((p) => p.name === n) as RestartPod;
        for (const { surge, old: o } of step.pairs) {
          const sp = named(surge);
          expect(sp.surge && sp.handable && sp.ready && !sp.terminating, ctx).toBe(true);
          expect(old.includes(named(o)), ctx).toBe(true);
        }
        expect(new Set(step.pairs.map((x) => x.surge)).size, ctx).toBe(step.pairs.length);
        expect(new Set(step.pairs.map((x) => x.old)).size, ctx).toBe(step.pairs.length);
        continue;
      }
      if (step.kind !== 'act') {
        expect(
          old.every((p) => p.ready),
          ctx,
        ).toBe(true);
        continue;
      }
      expect(step.evict.length + step.surge, ctx).toBeGreaterThan(0);
      const chosen = step.evict.map((n) => pods.find((p) => p.name === n) as RestartPod);
      expect(new Set(step.evict).size, ctx).toBe(step.evict.length);
      // Only old, live pods; every not-Ready old pod; Ready ones only within the budget.
      expect(
        chosen.every((p) => old.includes(p)),
        ctx,
      ).toBe(true);
      expect(
        old.filter((p) => !p.ready).every((p) => step.evict.includes(p.name)),
        ctx,
      ).toBe(true);
      const readyBefore = live.filter((p) => p.ready).length;
      const readyAfter = readyBefore - chosen.filter((p) => p.ready).length;
      const fenceposts = resolveFenceposts(input.maxSurge, input.maxUnavailable, replicas);
      const floor = minReadyDuringRestart(replicas, fenceposts);
      if (chosen.some((p) => p.ready) && !step.downtime)
        expect(readyAfter, ctx).toBeGreaterThanOrEqual(floor);
      if (step.downtime) expect(recreate, ctx).toBe(true);
      // Surge pods: only within the allowance, the ceiling, and the old pods this step leaves.
      const allowance = surgeAllowance(replicas, fenceposts, recreate);
      const liveSurge = live.filter((p) => p.surge).length;
      if (step.surge > 0) {
        expect(liveSurge + step.surge, ctx).toBeLessThanOrEqual(allowance);
        expect(live.length + step.surge, ctx).toBeLessThanOrEqual(replicas + allowance);
        expect(liveSurge + step.surge, ctx).toBeLessThanOrEqual(old.length - step.evict.length);
        expect(recreate, ctx).toBe(false);
        if (fenceposts.maxSurge === 0) expect(replicas, ctx).toBe(1);
      }
      // And it is deterministic.
      expect(planDeploymentRestartStep({ ...input, pods: [...pods].reverse() }), ctx).toEqual(step);
    }
  });
});

// A small model of the cluster for whole passes: the API server stamps creationTimestamp in whole
// seconds, the ReplicaSet recreates an evicted pod at once, kwok-like delays for Ready and removal.
interface SimPod extends RestartPod {
  createdMs: number;
  readyAtMs: number;
  goneAtMs?: number;
  surge?: boolean;
}

interface SimOptions {
  replicas: number;
  maxUnavailable: number | string;
  maxSurge: number | string;
  observedAtMs: number[];
  readyAfterMs?: number;
  deleteAfterMs?: number;
  /** The skew margin for both the cutoff and the wait before acting (default 1 s). */
  skewMarginMs?: number;
  /** How many of the original pods never become Ready (a crash the config change is meant to fix). */
  brokenOriginals?: number;
}

function simulate(o: SimOptions) {
  const readyAfter = o.readyAfterMs ?? 300;
  const deleteAfter = o.deleteAfterMs ?? 300;
  let now = Date.parse('2026-01-01T09:59:00.000Z');
  let seq = 0;
  const pods: SimPod[] = [];
  const create = (surge = false): SimPod => {
    const p: SimPod = {
      name: `${surge ? 'surge' : 'web'}-${seq++}`,
      uid: `uid-${seq}`,
      createdMs: now,
      createdAt: iso(now),
      readyAtMs: now + readyAfter,
      ready: false,
      terminating: false,
      surge,
    };
    pods.push(p);
    return p;
  };
  const tick = (ms: number) => {
    now += ms;
    for (const p of pods) p.ready = !p.terminating && now >= p.readyAtMs;
    for (let i = pods.length - 1; i >= 0; i--) {
      const gone = pods[i]?.goneAtMs;
      if (gone !== undefined && now >= gone) pods.splice(i, 1);
    }
  };
  for (let i = 0; i < o.replicas; i++) {
    const p = create();
    if (i < (o.brokenOriginals ?? 0)) p.readyAtMs = Number.POSITIVE_INFINITY;
  }
  tick(readyAfter + 60_000); // the original pods have run for a while

  // The batcher gives the whole batch one cutoff: that of its latest observation.
  const base = now;
  const observations = o.observedAtMs.map((d) => base + d);
  const cutoff = effectiveCutoff(Math.max(...observations), o.skewMarginMs);
  tick(Math.max(...o.observedAtMs) - (now - base));
  const original = new Set(pods.map((p) => p.name));
  const evicted: string[] = [];
  const steps: DeploymentRestartStep[] = [];
  let minReady = Number.POSITIVE_INFINITY;
  let maxLive = 0;
  let firstActionMs: number | undefined;
  const observe = () => {
    const live = pods.filter((p) => !p.terminating);
    minReady = Math.min(minReady, live.filter((p) => p.ready).length);
    maxLive = Math.max(maxLive, live.length);
  };
  for (let i = 0; i < 10_000; i++) {
    const step = planDeploymentRestartStep({
      replicas: o.replicas,
      maxUnavailable: o.maxUnavailable,
      maxSurge: o.maxSurge,
      cutoffMs: cutoff,
      rolloutInProgress: false,
      pods: pods.map(({ name, uid, createdAt, ready, terminating, surge }) => ({
        name,
        uid,
        createdAt,
        ready,
        terminating,
        ...(surge ? { surge } : {}),
      })),
      nowMs: now,
      ...(o.skewMarginMs !== undefined ? { skewMarginMs: o.skewMarginMs } : {}),
    });
    steps.push(step);
    if (step.kind === 'done') {
      // A surge pod goes only once the replacements are all Ready.
      const replacementsReady =
        pods.filter((p) => !p.surge && !p.terminating && p.ready).length >= o.replicas;
      if (pods.some((p) => p.surge && !p.terminating) && !replacementsReady) {
        tick(100);
        continue;
      }
      // Every ReplicaSet pod is new and Ready: what the bench times.
      const elapsedMs = now - (firstActionMs ?? now);
      for (const p of pods.filter((p) => p.surge)) {
        p.terminating = true;
        p.goneAtMs = now + deleteAfter;
      }
      tick(deleteAfter);
      return { evicted, original, pods, steps, minReady, maxLive, elapsedMs, cutoff };
    }
    if (step.kind === 'act') {
      firstActionMs ??= now;
      for (let k = 0; k < step.surge; k++) create(true);
      for (const name of step.evict) {
        const p = pods.find((x) => x.name === name);
        if (!p) throw new Error(`planner chose ${name}, which does not exist`);
        evicted.push(name);
        p.terminating = true;
        p.ready = false;
        p.goneAtMs = now + deleteAfter;
        create(); // the ReplicaSet replaces it
      }
    } else if (step.kind === 'wait' && step.reason === 'no-room') {
      throw new Error('the planner found no room in a healthy cluster');
    }
    observe();
    tick(step.kind === 'wait' && step.reason === 'before-cutoff' ? step.retryAfterMs : 100);
    observe();
  }
  throw new Error('the pass did not finish in 10000 steps');
}

describe('a whole restart pass', () => {
  it('replaces each pod exactly once when three config changes arrive in one batch', () => {
    const r = simulate({ replicas: 4, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0, 200, 450] });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(new Set(r.evicted).size).toBe(r.evicted.length);
    // Every pod left was created after the cutoff (I2), and availability held (I4: 4 − 1).
    expect(r.pods.every((p) => p.createdMs >= r.cutoff)).toBe(true);
    expect(r.minReady).toBeGreaterThanOrEqual(3);
    expect(r.steps.at(-1)).toEqual({ kind: 'done' });
  });

  it('never evicts a replacement, even one created in the same second as the cutoff', () => {
    // Observations land mid-second and, with no skew margin, eviction starts right at the cutoff, so
    // replacements are created within the cutoff's own second and stamped exactly at it.
    for (const offset of [1, 250, 500, 999]) {
      const r = simulate({
        replicas: 5,
        maxUnavailable: 2,
        maxSurge: 0,
        observedAtMs: [offset],
        readyAfterMs: 50,
        deleteAfterMs: 50,
        skewMarginMs: 0,
      });
      expect(
        r.evicted.every((n) => r.original.has(n)),
        `offset ${offset}`,
      ).toBe(true);
      expect(r.evicted).toHaveLength(5);
      expect(r.pods.some((p) => p.createdAt === iso(r.cutoff) && p.createdMs > r.cutoff)).toBe(true);
    }
  });

  // The three shapes of issue 15, with pods Ready 300 ms after creation (kwok's default). Pod starts
  // in sequence are what a restart costs; the native rolling update needs 2, 10 and 1 of them.
  it('replaces a 10-replica 25%/25% Deployment in 3 pod starts, keeping 8 Ready and at most 13 pods', () => {
    const r = simulate({ replicas: 10, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0] });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(r.minReady).toBeGreaterThanOrEqual(8);
    expect(r.maxLive).toBe(13);
    expect(r.elapsedMs).toBeLessThanOrEqual(3 * 300);
    // Without the surge pods (maxUnavailable alone, the rule before ADR 0017) it took 5.
    const unavailableOnly = simulate({ replicas: 10, maxUnavailable: '25%', maxSurge: 0, observedAtMs: [0] });
    expect(unavailableOnly.elapsedMs).toBeGreaterThan(4 * 300);
  });

  it('replaces a 10-replica maxSurge 1 / maxUnavailable 0 Deployment with 10 Ready and at most 11 pods', () => {
    const r = simulate({ replicas: 10, maxUnavailable: 0, maxSurge: 1, observedAtMs: [0] });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(r.minReady).toBeGreaterThanOrEqual(10);
    expect(r.maxLive).toBe(11);
    expect(r.elapsedMs).toBeLessThanOrEqual(11 * 300);
  });

  it('restarts a single replica behind a surge pod without ever dropping to zero Ready pods', () => {
    const r = simulate({ replicas: 1, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0] });
    expect([...r.evicted]).toEqual([...r.original]);
    expect(r.minReady).toBeGreaterThanOrEqual(1);
    expect(r.maxLive).toBe(2);
    expect(r.elapsedMs).toBeLessThanOrEqual(2 * 300);
    expect(r.pods.filter((p) => !p.terminating).map((p) => p.surge)).toEqual([false]);
  });

  it('restarts a default 3-replica Deployment behind a surge pod, each pod once', () => {
    const r = simulate({ replicas: 3, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0, 10, 20] });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(r.minReady).toBeGreaterThanOrEqual(3);
    expect(r.maxLive).toBe(4);
  });

  it('replaces the broken pods of a partly crashing Deployment first, without touching the healthy ones', () => {
    const r = simulate({
      replicas: 4,
      maxUnavailable: 1,
      maxSurge: 1,
      observedAtMs: [0],
      brokenOriginals: 1,
    });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    // Ready 3 of 4 with maxUnavailable 1: only the broken pod may go in the first step.
    expect(r.steps.find((s) => s.kind === 'act')).toEqual({ kind: 'act', surge: 1, evict: ['web-0'] });
    expect(r.minReady).toBeGreaterThanOrEqual(3);
  });
});

describe('deploymentRolloutPhase / isRolloutInProgress (kubectl rollout status)', () => {
  const steady = {
    generation: 4,
    observedGeneration: 4,
    replicas: 3,
    updatedReplicas: 3,
    statusReplicas: 3,
    availableReplicas: 3,
  };

  it('is complete for a settled Deployment', () => {
    expect(deploymentRolloutPhase(steady)).toBe('complete');
    expect(isRolloutInProgress(steady)).toBe(false);
  });

  it('is in progress until the controller has observed the latest spec', () => {
    const d = { ...steady, generation: 5 };
    expect(deploymentRolloutPhase(d)).toBe('spec-not-observed');
    expect(isRolloutInProgress(d)).toBe(true);
  });

  it('is in progress while fewer replicas than desired are updated', () => {
    const d = { ...steady, updatedReplicas: 1, statusReplicas: 4 };
    expect(deploymentRolloutPhase(d)).toBe('updating-replicas');
    expect(isRolloutInProgress(d)).toBe(true);
  });

  it('is in progress while old replicas are still pending termination', () => {
    const d = { ...steady, statusReplicas: 4 };
    expect(deploymentRolloutPhase(d)).toBe('old-replicas-pending-termination');
    expect(isRolloutInProgress(d)).toBe(true);
  });

  it('reports unavailable updated replicas as kubectl does, but does not treat them as a rollout', () => {
    // A pod that never becomes Ready must not block the reload that may fix it.
    const d = { ...steady, availableReplicas: 2 };
    expect(deploymentRolloutPhase(d)).toBe('updated-replicas-unavailable');
    expect(isRolloutInProgress(d)).toBe(false);
  });

  it('reads absent status counts as 0 and absent spec.replicas as 1, like the API defaults', () => {
    expect(deploymentRolloutPhase({ generation: 1 })).toBe('spec-not-observed');
    expect(deploymentRolloutPhase({ generation: 1, observedGeneration: 1 })).toBe('updating-replicas');
    expect(deploymentRolloutPhase({ generation: 1, observedGeneration: 1, replicas: 0 })).toBe('complete');
    expect(
      deploymentRolloutPhase({
        generation: 1,
        observedGeneration: 1,
        updatedReplicas: 1,
        availableReplicas: 1,
      }),
    ).toBe('complete');
  });

  it('treats a controller that is ahead (observedGeneration > generation) as observed, like kubectl', () => {
    expect(deploymentRolloutPhase({ ...steady, observedGeneration: 5 })).toBe('complete');
  });
});

describe('planDeploymentRestartStep: handing surge pods to the ReplicaSet (ADR 0019)', () => {
  const one = { replicas: 1, maxUnavailable: '25%', maxSurge: '25%' } as const;

  it('hands a Ready surge pod over in place of the single old pod', () => {
    expect(plan({ ...one, pods: [pod('x', -5), pod('s', 1, { surge: true, handable: true })] })).toEqual({
      kind: 'handover',
      pairs: [{ surge: 's', old: 'x' }],
    });
  });

  it('waits for the surge pod to be Ready', () => {
    expect(
      plan({ ...one, pods: [pod('x', -5), pod('s', 1, { surge: true, handable: true, ready: false })] }),
    ).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
  });

  it('does not hand over a surge pod it may not (another template, another leader): it evicts instead', () => {
    expect(plan({ ...one, pods: [pod('x', -5), pod('s', 1, { surge: true })] })).toEqual(evicts(['x']));
  });

  it('never while a pod of the ReplicaSet is starting: the ReplicaSet would delete that one', () => {
    const pods = [
      pod('a', -5),
      pod('b', -5),
      pod('r', 1, { ready: false }),
      pod('s', 1, { surge: true, handable: true }),
    ];
    const step = plan({ replicas: 3, maxUnavailable: 0, maxSurge: 1, pods });
    expect(step.kind).not.toBe('handover');
  });

  it('never while the ReplicaSet is short of a pod (an evicted pod not yet replaced)', () => {
    const pods = [pod('a', -5), pod('b', -5), pod('s', 1, { surge: true, handable: true })];
    expect(plan({ replicas: 3, maxUnavailable: 0, maxSurge: 1, pods }).kind).not.toBe('handover');
  });

  it('evicts within the room a surge pod it may not hand over makes (an earlier leader made it)', () => {
    const pods = [pod('x', -5), pod('s', 1, { surge: true })];
    expect(plan({ ...one, handover: true, pods })).toEqual(evicts(['x']));
  });

  it('with few old pods left, covers them all with surge pods and evicts nothing', () => {
    const pods = [pod('a', -5), pod('b', -5), pod('n1', 1), pod('n2', 1)];
    expect(plan({ replicas: 4, maxUnavailable: 1, maxSurge: 2, handover: true, pods })).toEqual({
      kind: 'act',
      surge: 2,
      evict: [],
    });
  });

  it('pairs as many as there are Ready surge pods and old pods, oldest first', () => {
    const pods = [
      pod('a', -9),
      pod('b', -5),
      pod('n', 1),
      pod('s1', 1, { surge: true, handable: true }),
      pod('s2', 1, { surge: true, handable: true }),
      pod('s3', 1, { surge: true, handable: true }),
    ];
    expect(plan({ replicas: 3, maxUnavailable: 1, maxSurge: 3, pods })).toEqual({
      kind: 'handover',
      pairs: [
        { surge: 's1', old: 'a' },
        { surge: 's2', old: 'b' },
      ],
    });
  });
});

describe('planDeploymentRestartStep: the first replacement alone (progressive reloads)', () => {
  const eight = { replicas: 8, maxUnavailable: '25%', maxSurge: '25%' } as const;
  const olds = Array.from({ length: 8 }, (_, i) => pod(`o${i}`, -5));

  it('without it, the first step uses both allowances at once', () => {
    expect(plan({ ...eight, pods: olds })).toEqual({ kind: 'act', surge: 2, evict: ['o0', 'o1'] });
  });

  it('starts one replacement only, and no other until one is Ready', () => {
    expect(plan({ ...eight, canary: true, pods: olds })).toEqual({ kind: 'act', surge: 1, evict: [] });
    const starting = [...olds, pod('s', 1, { surge: true, handable: true, ready: false })];
    expect(plan({ ...eight, canary: true, pods: starting })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
  });

  it('goes on with both allowances once a replacement is Ready', () => {
    const replaced = [...olds.slice(1), pod('r', 2)];
    expect(plan({ ...eight, replicas: 8, canary: true, pods: replaced })).toEqual(
      plan({ ...eight, pods: replaced }),
    );
  });

  it('evicts one old pod when there is no surge slot, and old pods that are not Ready whenever', () => {
    const noSurge = { replicas: 4, maxUnavailable: 2, maxSurge: 0 } as const;
    const four = Array.from({ length: 4 }, (_, i) => pod(`o${i}`, -5));
    expect(plan({ ...noSurge, canary: true, pods: four })).toEqual(evicts(['o0']));
    const broken = [pod('o0', -5, { ready: false }), ...four.slice(1), pod('n', 1, { ready: false })];
    expect(plan({ ...noSurge, canary: true, pods: broken })).toEqual(evicts(['o0']));
  });
});
