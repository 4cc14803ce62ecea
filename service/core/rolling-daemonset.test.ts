import { describe, expect, it } from 'vitest';
import {
  type DaemonSetRestartInput,
  type DaemonSetRestartStep,
  isDaemonSetRolloutInProgress,
  type NodePod,
  planDaemonSetRestartStep,
  resolveDaemonSetBudget,
} from './rolling-daemonset.ts';

const T = Date.parse('2026-01-01T10:00:00Z');
const NOW = T + 5_000;
const iso = (ms: number): string => new Date(Math.floor(ms / 1000) * 1000).toISOString();

/** The daemon pod on node `n<i>`, created `secondsFromT` from the cutoff (negative: old), Ready long ago. */
function pod(node: number, secondsFromT: number, o: Partial<NodePod> = {}): NodePod {
  return {
    name: `agent-${node}-${secondsFromT < 0 ? 'old' : 'new'}`,
    uid: `uid-${node}-${secondsFromT}`,
    createdAt: iso(T + secondsFromT * 1000),
    ready: true,
    readySince: iso(T - 3_600_000),
    terminating: false,
    node: `n${node}`,
    ...o,
  };
}

function plan(o: Partial<DaemonSetRestartInput> & Pick<DaemonSetRestartInput, 'pods'>): DaemonSetRestartStep {
  return planDaemonSetRestartStep({ desired: 3, cutoffMs: T, rolloutInProgress: false, nowMs: NOW, ...o });
}

describe('resolveDaemonSetBudget', () => {
  it('defaults to one node (OnDelete, or no rollingUpdate)', () => {
    expect(resolveDaemonSetBudget(undefined, 10)).toEqual({ maxUnavailable: 1, surgeIgnored: false });
  });
  it('rounds a percentage of the desired nodes up, as the DaemonSet controller does', () => {
    expect(resolveDaemonSetBudget('10%', 3).maxUnavailable).toBe(1);
    expect(resolveDaemonSetBudget('50%', 3).maxUnavailable).toBe(2);
    expect(resolveDaemonSetBudget(2, 3).maxUnavailable).toBe(2);
  });
  it('turns 0 (a surging DaemonSet) into 1 and says surge was not honoured', () => {
    expect(resolveDaemonSetBudget(0, 3)).toEqual({ maxUnavailable: 1, surgeIgnored: true });
    expect(resolveDaemonSetBudget('0%', 3)).toEqual({ maxUnavailable: 1, surgeIgnored: true });
  });
});

describe('isDaemonSetRolloutInProgress', () => {
  const settled = {
    generation: 2,
    observedGeneration: 2,
    desiredNumberScheduled: 3,
    updatedNumberScheduled: 3,
  };
  it('is false once every desired node runs the current template', () => {
    expect(isDaemonSetRolloutInProgress(settled)).toBe(false);
  });
  it('is true while the spec is not observed or nodes still run the old template', () => {
    expect(isDaemonSetRolloutInProgress({ ...settled, generation: 3 })).toBe(true);
    expect(isDaemonSetRolloutInProgress({ ...settled, updatedNumberScheduled: 2 })).toBe(true);
  });
  it('is false under OnDelete, where old-template pods stay until someone deletes them', () => {
    expect(
      isDaemonSetRolloutInProgress({ ...settled, updateStrategy: 'OnDelete', updatedNumberScheduled: 0 }),
    ).toBe(false);
    expect(isDaemonSetRolloutInProgress({ ...settled, updateStrategy: 'OnDelete', generation: 3 })).toBe(
      true,
    );
  });
});

describe('planDaemonSetRestartStep', () => {
  it('canary (progressive reloads): one node alone until a replacement is available, then maxUnavailable', () => {
    const olds = [pod(0, -60), pod(1, -60), pod(2, -60)];
    expect(plan({ maxUnavailable: 3, canary: true, pods: olds })).toEqual({
      kind: 'evict',
      nodes: ['n0'],
      pods: ['agent-0-old'],
    });
    const starting = [pod(0, 2, { ready: false, readySince: undefined }), pod(1, -60), pod(2, -60)];
    expect(plan({ maxUnavailable: 3, canary: true, pods: starting })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    const ready = [pod(0, 2, { readySince: iso(T + 3_000) }), pod(1, -60), pod(2, -60)];
    expect(plan({ maxUnavailable: 3, canary: true, pods: ready })).toEqual({
      kind: 'evict',
      nodes: ['n1', 'n2'],
      pods: ['agent-1-old', 'agent-2-old'],
    });
    expect(plan({ maxUnavailable: 3, pods: olds })).toMatchObject({ nodes: ['n0', 'n1', 'n2'] });
  });

  it('evicts one node at a time, in node-name order', () => {
    expect(plan({ pods: [pod(2, -60), pod(0, -60), pod(1, -60)] })).toEqual({
      kind: 'evict',
      nodes: ['n0'],
      pods: ['agent-0-old'],
    });
  });

  it('moves to the next node only once the replacement is available on the last one', () => {
    const rest = [pod(1, -60), pod(2, -60)];
    expect(plan({ pods: [pod(0, -60, { terminating: true }), ...rest] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    expect(plan({ pods: rest })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
    expect(plan({ pods: [pod(0, 2, { ready: false }), ...rest] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
    });
    expect(plan({ pods: [pod(0, 2), ...rest] })).toEqual({
      kind: 'evict',
      nodes: ['n1'],
      pods: ['agent-1-old'],
    });
    expect(plan({ pods: [pod(0, 2), pod(1, 3), pod(2, -60)] })).toEqual({
      kind: 'evict',
      nodes: ['n2'],
      pods: ['agent-2-old'],
    });
    expect(plan({ pods: [pod(0, 2), pod(1, 3), pod(2, 4)] })).toEqual({ kind: 'done' });
  });

  it('honours minReadySeconds on the replacement', () => {
    const justReady = pod(0, 2, { readySince: iso(NOW - 1_000) });
    expect(plan({ minReadySeconds: 5, pods: [justReady, pod(1, -60), pod(2, -60)] })).toEqual({
      kind: 'wait',
      reason: 'waiting-for-ready',
      retryAfterMs: 4_000,
    });
  });

  it('takes maxUnavailable nodes at once', () => {
    const pods = [0, 1, 2, 3].map((n) => pod(n, -60));
    expect(plan({ desired: 4, maxUnavailable: 2, pods })).toEqual({
      kind: 'evict',
      nodes: ['n0', 'n1'],
      pods: ['agent-0-old', 'agent-1-old'],
    });
    expect(plan({ desired: 4, maxUnavailable: '50%', pods })).toMatchObject({ nodes: ['n0', 'n1'] });
  });

  it('still goes one node at a time when the DaemonSet asks for maxUnavailable 0', () => {
    expect(plan({ maxUnavailable: 0, pods: [pod(0, -60), pod(1, -60), pod(2, -60)] })).toMatchObject({
      nodes: ['n0'],
    });
  });

  it('evicts an old pod that is not Ready at once and for free', () => {
    const pods = [pod(0, -60), pod(1, -60), pod(2, -60, { ready: false })];
    expect(plan({ pods })).toEqual({ kind: 'evict', nodes: ['n2'], pods: ['agent-2-old'] });
  });

  it('frees a node that already runs an available new pod beside its old one', () => {
    const pods = [pod(0, -60), pod(0, 2), pod(1, -60), pod(2, -60, { ready: false })];
    const step = plan({ pods });
    // n2 is already down (budget spent), n0 keeps its new pod: both go, n1 waits.
    expect(step).toEqual({ kind: 'evict', nodes: ['n0', 'n2'], pods: ['agent-0-old', 'agent-2-old'] });
  });

  it('counts a desired node with no pod at all as unavailable', () => {
    expect(plan({ pods: [pod(0, -60), pod(1, -60)] })).toEqual({ kind: 'wait', reason: 'waiting-for-ready' });
  });

  it('handles a pod not yet bound to a node on its own', () => {
    const unbound = pod(9, -60, { node: undefined, ready: false, name: 'agent-pending' });
    expect(plan({ pods: [pod(0, 2), pod(1, 2), pod(2, 2), unbound] })).toEqual({
      kind: 'evict',
      nodes: ['<unbound>/agent-pending'],
      pods: ['agent-pending'],
    });
  });

  it('waits for a template rollout, then for the cutoff', () => {
    const pods = [pod(0, -60), pod(1, -60), pod(2, -60)];
    expect(plan({ rolloutInProgress: true, pods })).toEqual({ kind: 'wait', reason: 'rollout-in-progress' });
    expect(plan({ nowMs: T + 500, pods })).toEqual({
      kind: 'wait',
      reason: 'before-cutoff',
      retryAfterMs: 500,
    });
  });

  it('with a snapshot of target uids, acts at once and is done when none of them is left', () => {
    const old = [pod(0, -60), pod(1, -60)];
    const targets = new Set(old.map((p) => p.uid));
    expect(plan({ desired: 2, nowMs: T - 1500, pods: old, targets })).toMatchObject({ kind: 'evict' });
    const replaced = [pod(0, -60, { uid: 'new-0' }), pod(1, -60, { uid: 'new-1' })];
    expect(plan({ desired: 2, nowMs: T - 1500, pods: replaced, targets })).toEqual({ kind: 'done' });
  });

  it('is done when nothing predates the cutoff, terminating pods aside', () => {
    expect(plan({ pods: [pod(0, 0), pod(1, 1), pod(2, 1), pod(2, -60, { terminating: true })] })).toEqual({
      kind: 'done',
    });
    expect(plan({ desired: 0, pods: [] })).toEqual({ kind: 'done' });
  });

  it('rejects a desired count the API server could not hold', () => {
    expect(() => plan({ desired: -1, pods: [] })).toThrow(RangeError);
  });
});
