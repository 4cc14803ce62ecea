import { describe, expect, it } from 'vitest';
import {
  availableInMs,
  isStatefulSetRolloutInProgress,
  type OrdinalPod,
  planStatefulSetRestartStep,
  podOrdinal,
  resolveStatefulSetMaxUnavailable,
  type StatefulSetRestartInput,
  type StatefulSetRestartStep,
} from './rolling-statefulset.ts';

const T = Date.parse('2026-01-01T10:00:00Z');
/** Late enough after T that the before-cutoff wait is over. */
const NOW = T + 5_000;
const iso = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString();

/** Pod `web-<ordinal>`, created `secondsFromT` from the cutoff (negative: old), Ready long ago. */
function pod(ordinal: number, secondsFromT: number, o: Partial<OrdinalPod> = {}): OrdinalPod {
  return {
    name: `web-${ordinal}`,
    uid: `uid-${ordinal}-${secondsFromT}`,
    createdAt: iso(T + secondsFromT * 1000),
    ready: true,
    readySince: iso(T - 3_600_000),
    terminating: false,
    ordinal,
    ...o,
  };
}

function plan(
  o: Partial<StatefulSetRestartInput> & Pick<StatefulSetRestartInput, 'pods'>,
): StatefulSetRestartStep {
  return planStatefulSetRestartStep({ replicas: 3, cutoffMs: T, rolloutInProgress: false, nowMs: NOW, ...o });
}

describe('resolveStatefulSetMaxUnavailable (getStatefulSetMaxUnavailable)', () => {
  it('defaults to 1', () => {
    expect(resolveStatefulSetMaxUnavailable(undefined, 5)).toBe(1);
  });
  it('takes a count as is', () => {
    expect(resolveStatefulSetMaxUnavailable(2, 5)).toBe(2);
  });
  it('rounds a percentage down, but never below 1', () => {
    expect(resolveStatefulSetMaxUnavailable('50%', 5)).toBe(2);
    expect(resolveStatefulSetMaxUnavailable('10%', 3)).toBe(1);
    expect(resolveStatefulSetMaxUnavailable('100%', 4)).toBe(4);
  });
});

describe('availableInMs (podutil.IsPodAvailable)', () => {
  const p = pod(0, -10, { readySince: iso(NOW - 4_000) });
  it('is 0 for a Ready pod when minReadySeconds is 0', () => {
    expect(availableInMs(p, 0, NOW)).toBe(0);
  });
  it('counts down minReadySeconds from the Ready transition', () => {
    expect(availableInMs(p, 10, NOW)).toBe(6_000);
    expect(availableInMs(p, 4, NOW)).toBe(0);
  });
  it('is Infinity for a pod that is not Ready, terminating, or has no Ready time to count from', () => {
    expect(availableInMs({ ...p, ready: false }, 0, NOW)).toBe(Number.POSITIVE_INFINITY);
    expect(availableInMs({ ...p, terminating: true }, 0, NOW)).toBe(Number.POSITIVE_INFINITY);
    const { readySince: _dropped, ...noTime } = p;
    expect(availableInMs(noTime, 5, NOW)).toBe(Number.POSITIVE_INFINITY);
    expect(availableInMs(noTime, 0, NOW)).toBe(0);
  });
});

describe('isStatefulSetRolloutInProgress', () => {
  const settled = {
    generation: 4,
    observedGeneration: 4,
    replicas: 3,
    currentRevision: 'web-a',
    updateRevision: 'web-a',
    updatedReplicas: 3,
  };
  it('is false when the controller has caught up and the revisions agree', () => {
    expect(isStatefulSetRolloutInProgress(settled)).toBe(false);
  });
  it('is true while the controller has not observed the latest spec, whatever the strategy', () => {
    expect(isStatefulSetRolloutInProgress({ ...settled, generation: 5 })).toBe(true);
    expect(isStatefulSetRolloutInProgress({ ...settled, generation: 5, updateStrategy: 'OnDelete' })).toBe(
      true,
    );
  });
  it('is true while a RollingUpdate has pods left to move to updateRevision', () => {
    const rolling = { ...settled, updateRevision: 'web-b', updatedReplicas: 1 };
    expect(isStatefulSetRolloutInProgress(rolling)).toBe(true);
    expect(isStatefulSetRolloutInProgress({ ...rolling, updateStrategy: 'RollingUpdate' })).toBe(true);
    expect(isStatefulSetRolloutInProgress({ ...rolling, updatedReplicas: 0 })).toBe(true);
  });
  it('is false once every pod is on updateRevision even if one is not Ready (revisions still differ)', () => {
    expect(isStatefulSetRolloutInProgress({ ...settled, updateRevision: 'web-b', updatedReplicas: 3 })).toBe(
      false,
    );
  });
  it('is false under OnDelete, whose currentRevision never catches up by itself', () => {
    expect(
      isStatefulSetRolloutInProgress({
        ...settled,
        updateStrategy: 'OnDelete',
        updateRevision: 'web-b',
        updatedReplicas: 0,
      }),
    ).toBe(false);
  });
  it('counts only the ordinals at or above the partition as still to update', () => {
    const staged = { ...settled, partition: 2, updateRevision: 'web-b' };
    expect(isStatefulSetRolloutInProgress({ ...staged, updatedReplicas: 0 })).toBe(true);
    expect(isStatefulSetRolloutInProgress({ ...staged, updatedReplicas: 1 })).toBe(false);
    expect(isStatefulSetRolloutInProgress({ ...staged, partition: 5, updatedReplicas: 0 })).toBe(false);
  });
  it('treats absent status (a new StatefulSet) as no rollout once observed', () => {
    expect(isStatefulSetRolloutInProgress({ generation: 1, observedGeneration: 1 })).toBe(false);
    expect(isStatefulSetRolloutInProgress({ generation: 1 })).toBe(true);
  });
});

describe('planStatefulSetRestartStep', () => {
  it('canary (progressive reloads): one pod alone until a replacement is Ready, then maxUnavailable', () => {
    const olds = [pod(0, -60), pod(1, -60), pod(2, -60)];
    // maxUnavailable 3 would take all three at once; the first replacement goes alone.
    expect(plan({ maxUnavailable: 3, canary: true, pods: olds })).toEqual({ kind: 'evict', pods: ['web-2'] });
    // Its replacement is starting: nothing more, however large maxUnavailable.
    const starting = [pod(0, -60), pod(1, -60), pod(2, 2, { ready: false, readySince: undefined })];
    expect(plan({ maxUnavailable: 3, canary: true, pods: starting })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    // Ready: the rest go together, as maxUnavailable allows.
    const ready = [pod(0, -60), pod(1, -60), pod(2, 2, { readySince: iso(T + 3_000) })];
    expect(plan({ maxUnavailable: 3, canary: true, pods: ready })).toEqual({
      kind: 'evict',
      pods: ['web-1', 'web-0'],
    });
    // Without canary, as before.
    expect(plan({ maxUnavailable: 3, pods: olds })).toEqual({
      kind: 'evict',
      pods: ['web-2', 'web-1', 'web-0'],
    });
  });

  it('evicts the highest ordinal first, one at a time', () => {
    expect(plan({ pods: [pod(0, -60), pod(1, -60), pod(2, -60)] })).toEqual({
      kind: 'evict',
      pods: ['web-2'],
    });
  });

  it('walks 2, 1, 0, each only once its predecessor is replaced and available', () => {
    // web-2 evicted: terminating, then missing, then recreated but not Ready: all hold the budget.
    expect(plan({ pods: [pod(0, -60), pod(1, -60), pod(2, -60, { terminating: true })] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    expect(plan({ pods: [pod(0, -60), pod(1, -60)] })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    expect(plan({ pods: [pod(0, -60), pod(1, -60), pod(2, 2, { ready: false })] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    // The replacement is Ready: next is web-1, then web-0, then done.
    expect(plan({ pods: [pod(0, -60), pod(1, -60), pod(2, 2)] })).toEqual({ kind: 'evict', pods: ['web-1'] });
    expect(plan({ pods: [pod(0, -60), pod(1, 3), pod(2, 2)] })).toEqual({ kind: 'evict', pods: ['web-0'] });
    expect(plan({ pods: [pod(0, 4), pod(1, 3), pod(2, 2)] })).toEqual({ kind: 'done' });
  });

  it('is done while the last evicted pod is still terminating (nothing old is left to evict)', () => {
    expect(plan({ pods: [pod(0, -60, { terminating: true }), pod(1, 3), pod(2, 2)] })).toEqual({
      kind: 'done',
    });
  });

  it('judges a pod recreated under the same name by its own creationTimestamp', () => {
    // Same name web-2, new uid, created after T: it is new, so web-1 is next.
    const recreated = pod(2, 1, { uid: 'uid-new' });
    expect(plan({ pods: [pod(0, -60), pod(1, -60), recreated] })).toEqual({ kind: 'evict', pods: ['web-1'] });
  });

  it('treats a pod created in the cutoff second as new (creationTimestamp has whole seconds)', () => {
    expect(plan({ pods: [pod(0, 0), pod(1, 0), pod(2, 0)] })).toEqual({ kind: 'done' });
    expect(plan({ pods: [pod(0, 0), pod(1, 0), pod(2, -1)] })).toEqual({ kind: 'evict', pods: ['web-2'] });
  });

  it('waits for minReadySeconds after a replacement turns Ready, and says how long', () => {
    const justReady = pod(2, 2, { readySince: iso(NOW - 3_000) });
    expect(plan({ minReadySeconds: 10, pods: [pod(0, -60), pod(1, -60), justReady] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
      retryAfterMs: 7_000,
    });
    expect(plan({ minReadySeconds: 3, pods: [pod(0, -60), pod(1, -60), justReady] })).toEqual({
      kind: 'evict',
      pods: ['web-1'],
    });
  });

  it('evicts maxUnavailable pods at once, highest ordinals first', () => {
    const all = [0, 1, 2, 3, 4].map((i) => pod(i, -60));
    expect(plan({ replicas: 5, maxUnavailable: 2, pods: all })).toEqual({
      kind: 'evict',
      pods: ['web-4', 'web-3'],
    });
    expect(plan({ replicas: 5, maxUnavailable: '40%', pods: all })).toEqual({
      kind: 'evict',
      pods: ['web-4', 'web-3'],
    });
    // One of two slots still taken by a starting replacement: one more goes.
    const mid = [pod(0, -60), pod(1, -60), pod(2, -60), pod(3, 2, { ready: false }), pod(4, 2)];
    expect(plan({ replicas: 5, maxUnavailable: 2, pods: mid })).toEqual({ kind: 'evict', pods: ['web-2'] });
  });

  it('evicts old pods that are not Ready at once and for free, even out of ordinal order', () => {
    const pods = [pod(0, -60, { ready: false }), pod(1, -60), pod(2, -60)];
    // web-0 is unavailable already, so the budget of 1 is spent: only web-0 goes.
    expect(plan({ pods })).toEqual({ kind: 'evict', pods: ['web-0'] });
    const twoBroken = [pod(0, -60, { ready: false }), pod(1, -60, { ready: false }), pod(2, -60)];
    expect(plan({ pods: twoBroken })).toEqual({ kind: 'evict', pods: ['web-1', 'web-0'] });
  });

  it('waits while a new pod is unhealthy: it holds the whole budget', () => {
    expect(plan({ pods: [pod(0, -60), pod(1, -60), pod(2, 2, { ready: false })] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
  });

  it('waits for a template rollout, then for the cutoff, before anything else', () => {
    const pods = [pod(0, -60), pod(1, -60), pod(2, -60)];
    expect(plan({ rolloutInProgress: true, pods })).toEqual({ kind: 'wait', reason: 'rollout-in-progress' });
    expect(plan({ nowMs: T + 200, pods })).toEqual({
      kind: 'wait',
      reason: 'before-cutoff',
      retryAfterMs: 800,
    });
    expect(plan({ nowMs: T + 200, skewMarginMs: 0, pods })).toEqual({ kind: 'evict', pods: ['web-2'] });
  });

  it('with a snapshot of target uids, acts at once and never counts a recreated pod as old', () => {
    const old = [pod(0, -60), pod(1, -60), pod(2, -60)];
    const targets = new Set(old.map((p) => p.uid));
    expect(plan({ nowMs: T - 1500, pods: old, targets })).toEqual({ kind: 'evict', pods: ['web-2'] });
    // web-2 came back under the same name in the same second: a new uid, so it is not old.
    const recreated = [pod(0, -60), pod(1, -60), pod(2, -60, { uid: 'uid-2-new' })];
    expect(plan({ nowMs: T - 1500, pods: recreated, targets })).toEqual({ kind: 'evict', pods: ['web-1'] });
  });

  it('leaves pods outside the ordinal range to the controller (a scale-down in progress)', () => {
    expect(plan({ replicas: 2, pods: [pod(0, 5), pod(1, 5), pod(2, -60)] })).toEqual({ kind: 'done' });
    expect(plan({ replicas: 0, pods: [pod(0, -60)] })).toEqual({ kind: 'done' });
  });

  it('honours spec.ordinals.start', () => {
    const pods = [pod(5, -60), pod(6, -60), pod(7, -60)];
    expect(plan({ ordinalStart: 5, pods })).toEqual({ kind: 'evict', pods: ['web-7'] });
    expect(plan({ pods })).toEqual({ kind: 'done' });
  });

  it('ignores pods whose ordinal is unknown', () => {
    expect(plan({ pods: [pod(0, 5), pod(1, 5), pod(2, 5), { ...pod(9, -60), ordinal: undefined }] })).toEqual(
      {
        kind: 'done',
      },
    );
  });

  it('rejects a replica count the API server could not hold', () => {
    expect(() => plan({ replicas: -1, pods: [] })).toThrow(RangeError);
    expect(() => plan({ replicas: 1.5, pods: [] })).toThrow(RangeError);
  });

  it('rejects a cutoff that is not a whole second', () => {
    expect(() => plan({ cutoffMs: T + 1, nowMs: T + 5_000, pods: [pod(0, -60)] })).toThrow(RangeError);
  });
});

describe('podOrdinal', () => {
  it('reads the apps.kubernetes.io/pod-index label first', () => {
    expect(podOrdinal('web', 'web-3', { 'apps.kubernetes.io/pod-index': '3' })).toBe(3);
    expect(podOrdinal('web', 'other', { 'apps.kubernetes.io/pod-index': '7' })).toBe(7);
  });
  it('falls back to the name suffix after "<set>-"', () => {
    expect(podOrdinal('web', 'web-12')).toBe(12);
    expect(podOrdinal('my-db', 'my-db-0', null)).toBe(0);
  });
  it('is undefined for a name it cannot parse', () => {
    expect(podOrdinal('web', 'web-x')).toBeUndefined();
    expect(podOrdinal('web', 'api-1')).toBeUndefined();
    expect(podOrdinal('web', 'web-', { 'apps.kubernetes.io/pod-index': 'nope' })).toBeUndefined();
  });
});
