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

function plan(
  o: Partial<DeploymentRestartInput> & Pick<DeploymentRestartInput, 'pods'>,
): DeploymentRestartStep {
  return planDeploymentRestartStep({
    replicas: 3,
    maxUnavailable: 1,
    maxSurge: 1,
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
    expect(plan({ replicas: 3, maxUnavailable: 3, pods })).toEqual({ kind: 'evict', pods: ['old'] });
  });

  it('evicts one Ready old pod at a time with maxUnavailable 1, oldest first', () => {
    const pods = [pod('b', -10), pod('a', -20), pod('c', -10)];
    expect(plan({ pods })).toEqual({ kind: 'evict', pods: ['a'] });
  });

  it('breaks creation-time ties by name, so the same input always gives the same step', () => {
    const pods = [pod('c', -10), pod('b', -10), pod('a', -10)];
    expect(plan({ maxUnavailable: 2, pods })).toEqual({ kind: 'evict', pods: ['a', 'b'] });
    expect(plan({ maxUnavailable: 2, pods: [...pods].reverse() })).toEqual({
      kind: 'evict',
      pods: ['a', 'b'],
    });
  });

  it('evicts not-Ready old pods first and all at once, since they cost no availability', () => {
    const pods = [
      pod('r1', -30),
      pod('r2', -30),
      pod('u1', -5, { ready: false }),
      pod('u2', -1, { ready: false }),
    ];
    // replicas 4, maxUnavailable 1: Ready 2, floor 3, so no Ready pod may go, but the broken ones may.
    expect(plan({ replicas: 4, pods })).toEqual({ kind: 'evict', pods: ['u1', 'u2'] });
  });

  it('adds Ready old pods after the not-Ready ones while the budget allows', () => {
    const pods = [pod('r1', -30), pod('r2', -20), pod('r3', -10), pod('u1', -5, { ready: false })];
    // replicas 4, maxUnavailable 2: Ready 3, floor 2, so one Ready pod may go along with u1.
    expect(plan({ replicas: 4, maxUnavailable: 2, pods })).toEqual({ kind: 'evict', pods: ['u1', 'r1'] });
  });

  it('counts new Ready pods toward availability but never evicts them', () => {
    const pods = [pod('new1', 1), pod('new2', 1), pod('old1', -10), pod('old2', -9)];
    // replicas 4, maxUnavailable 2: Ready 4, floor 2: both old pods may go.
    expect(plan({ replicas: 4, maxUnavailable: 2, pods })).toEqual({ kind: 'evict', pods: ['old1', 'old2'] });
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
    expect(plan({ pods: readyAgain })).toEqual({ kind: 'evict', pods: ['a'] });
  });

  it('resolves percentages like the Deployment controller', () => {
    const ten = Array.from({ length: 10 }, (_, i) => pod(`p${i}`, -10 - i));
    // 25% of 10 rounds down to 2.
    expect(plan({ replicas: 10, maxUnavailable: '25%', maxSurge: '25%', pods: ten })).toEqual({
      kind: 'evict',
      pods: ['p9', 'p8'],
    });
    // 19% of 10 rounds down to 1.
    expect(plan({ replicas: 10, maxUnavailable: '19%', maxSurge: '25%', pods: ten })).toEqual({
      kind: 'evict',
      pods: ['p9'],
    });
    // 5% of 10 rounds down to 0, maxSurge 0% too: the controller's fencepost rule makes it 1.
    expect(plan({ replicas: 10, maxUnavailable: '5%', maxSurge: '0%', pods: ten })).toEqual({
      kind: 'evict',
      pods: ['p9'],
    });
  });

  it('asks for a surge pod when maxUnavailable resolves to 0 and every pod is Ready', () => {
    const pods = [pod('a', -10), pod('b', -10), pod('c', -10)];
    expect(plan({ maxUnavailable: 0, maxSurge: 1, pods })).toEqual({
      kind: 'wait',
      reason: 'needs-surge',
      maxSurge: 1,
    });
    // The apps/v1 defaults on 3 replicas: 25% of 3 rounds down to 0.
    expect(plan({ maxUnavailable: '25%', maxSurge: '25%', pods })).toEqual({
      kind: 'wait',
      reason: 'needs-surge',
      maxSurge: 1,
    });
  });

  it('asks for a surge pod for a single replica, even when maxUnavailable would allow an outage', () => {
    expect(plan({ replicas: 1, maxUnavailable: '25%', maxSurge: '25%', pods: [pod('only', -10)] })).toEqual({
      kind: 'wait',
      reason: 'needs-surge',
      maxSurge: 1,
    });
    expect(plan({ replicas: 1, maxUnavailable: 1, maxSurge: 0, pods: [pod('only', -10)] })).toEqual({
      kind: 'wait',
      reason: 'needs-surge',
      maxSurge: 0,
    });
  });

  it('evicts the single old pod once a Ready surge pod stands beside it', () => {
    const pods = [pod('only', -10), pod('surge', 2)];
    expect(plan({ replicas: 1, maxUnavailable: 0, maxSurge: 1, pods })).toEqual({
      kind: 'evict',
      pods: ['only'],
    });
    // Not while the surge pod is still starting.
    const starting = [pod('only', -10), pod('surge', 2, { ready: false })];
    expect(plan({ replicas: 1, maxUnavailable: 0, maxSurge: 1, pods: starting })).toEqual({
      kind: 'wait',
      reason: 'needs-surge',
      maxSurge: 1,
    });
  });

  it('evicts a not-Ready single pod without a surge pod: it serves nobody', () => {
    const pods = [pod('only', -10, { ready: false })];
    expect(plan({ replicas: 1, maxUnavailable: 0, pods })).toEqual({ kind: 'evict', pods: ['only'] });
  });

  it('waits for readiness, not a surge, while replacements are still starting', () => {
    const pods = [pod('old1', -10), pod('old2', -10), pod('fresh', 2, { ready: false })];
    expect(plan({ maxUnavailable: 0, pods })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
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
    expect(plan({ pods, nowMs: T + 1000 })).toEqual({ kind: 'evict', pods: ['a'] });
    expect(plan({ pods, nowMs: T, skewMarginMs: 0 })).toEqual({ kind: 'evict', pods: ['a'] });
  });

  it('with a snapshot of target uids, replaces exactly those, at once, whatever the timestamps say', () => {
    // Replacement 'r' was stamped in the same second as the old pods: the cutoff rule alone could not
    // tell it apart, the snapshot can.
    const pods = [pod('a', -10), pod('b', -10), pod('r', -10, { ready: false })];
    const targets = new Set(['uid-a', 'uid-b']);
    expect(plan({ pods, nowMs: T - 200 })).toMatchObject({ kind: 'wait', reason: 'before-cutoff' });
    expect(plan({ pods, nowMs: T - 200, targets })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    const allReady = [pod('a', -10), pod('b', -10), pod('r', -10)];
    expect(plan({ pods: allReady, nowMs: T - 200, targets })).toEqual({ kind: 'evict', pods: ['a'] });
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
    for (let round = 0; round < 2000; round++) {
      const replicas = rand(8);
      const pods = Array.from({ length: rand(12) }, (_, i) =>
        pod(`p${i}`, rand(20) - 10, { ready: rand(3) > 0, terminating: rand(5) === 0 }),
      );
      const input: DeploymentRestartInput = {
        replicas,
        maxUnavailable: intOrPct(),
        maxSurge: intOrPct(),
        cutoffMs: T,
        rolloutInProgress: false,
        pods,
      };
      const step = planDeploymentRestartStep(input);
      const live = pods.filter((p) => !p.terminating);
      const old = live.filter((p) => isBeforeCutoff(p.createdAt, T));
      const ctx = JSON.stringify({ input, step });
      if (step.kind === 'done') {
        expect(old, ctx).toEqual([]);
        continue;
      }
      expect(old.length, ctx).toBeGreaterThan(0);
      if (step.kind !== 'evict') {
        expect(
          old.every((p) => p.ready),
          ctx,
        ).toBe(true);
        continue;
      }
      const chosen = step.pods.map((n) => pods.find((p) => p.name === n) as RestartPod);
      expect(new Set(step.pods).size, ctx).toBe(step.pods.length);
      // Only old, live pods; every not-Ready old pod; Ready ones only within the budget.
      expect(
        chosen.every((p) => old.includes(p)),
        ctx,
      ).toBe(true);
      expect(
        old.filter((p) => !p.ready).every((p) => step.pods.includes(p.name)),
        ctx,
      ).toBe(true);
      const readyBefore = live.filter((p) => p.ready).length;
      const readyAfter = readyBefore - chosen.filter((p) => p.ready).length;
      const floor = minReadyDuringRestart(
        replicas,
        resolveFenceposts(input.maxSurge, input.maxUnavailable, replicas),
      );
      if (chosen.some((p) => p.ready)) expect(readyAfter, ctx).toBeGreaterThanOrEqual(floor);
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
  /** Create a surge pod when the planner asks for one, delete it when done (what a later issue adds). */
  surge?: boolean;
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
  for (let i = 0; i < 10_000; i++) {
    const step = planDeploymentRestartStep({
      replicas: o.replicas,
      maxUnavailable: o.maxUnavailable,
      maxSurge: o.maxSurge,
      cutoffMs: cutoff,
      rolloutInProgress: false,
      pods: pods.map(({ name, uid, createdAt, ready, terminating }) => ({
        name,
        uid,
        createdAt,
        ready,
        terminating,
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
      for (const p of pods.filter((p) => p.surge)) {
        p.terminating = true;
        p.goneAtMs = now + deleteAfter;
      }
      tick(deleteAfter);
      return { evicted, original, pods, steps, minReady, cutoff };
    }
    if (step.kind === 'evict') {
      for (const name of step.pods) {
        const p = pods.find((x) => x.name === name);
        if (!p) throw new Error(`planner chose ${name}, which does not exist`);
        evicted.push(name);
        p.terminating = true;
        p.ready = false;
        p.goneAtMs = now + deleteAfter;
        create(); // the ReplicaSet replaces it
      }
    } else if (step.kind === 'wait' && step.reason === 'needs-surge') {
      if (!o.surge) return { evicted, original, pods, steps, minReady, cutoff };
      if (!pods.some((p) => p.surge)) create(true);
    }
    minReady = Math.min(minReady, pods.filter((p) => p.ready && !p.terminating).length);
    tick(step.kind === 'wait' && step.reason === 'before-cutoff' ? step.retryAfterMs : 100);
    minReady = Math.min(minReady, pods.filter((p) => p.ready && !p.terminating).length);
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

  it('replaces a 10-replica Deployment with default fenceposts keeping 8 Ready pods', () => {
    const r = simulate({ replicas: 10, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0] });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(r.minReady).toBeGreaterThanOrEqual(8);
  });

  it('stops and asks for a surge pod on a default 3-replica Deployment, evicting nothing', () => {
    const r = simulate({ replicas: 3, maxUnavailable: '25%', maxSurge: '25%', observedAtMs: [0] });
    expect(r.evicted).toEqual([]);
    expect(r.steps.at(-1)).toEqual({ kind: 'wait', reason: 'needs-surge', maxSurge: 1 });
  });

  it('restarts a single replica behind a surge pod without ever dropping to zero Ready pods', () => {
    const r = simulate({
      replicas: 1,
      maxUnavailable: '25%',
      maxSurge: '25%',
      observedAtMs: [0],
      surge: true,
    });
    expect([...r.evicted]).toEqual([...r.original]);
    expect(r.minReady).toBeGreaterThanOrEqual(1);
    expect(r.pods.filter((p) => !p.terminating).map((p) => p.surge)).toEqual([false]);
  });

  it('restarts a default 3-replica Deployment behind a surge pod, each pod once', () => {
    const r = simulate({
      replicas: 3,
      maxUnavailable: '25%',
      maxSurge: '25%',
      observedAtMs: [0, 10, 20],
      surge: true,
    });
    expect([...r.evicted].sort()).toEqual([...r.original].sort());
    expect(r.minReady).toBeGreaterThanOrEqual(3);
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
    expect(r.steps.find((s) => s.kind === 'evict')).toEqual({ kind: 'evict', pods: ['web-0'] });
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
