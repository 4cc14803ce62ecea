import { describe, expect, it } from 'vitest';
import {
  MAX_UNHEALTHY_PODS,
  notJudgedAtAdmission,
  type PodHealthFacts,
  replacementsFailed,
  unhealthy,
} from './pod-health.ts';

const pod = (name: string, over: Partial<PodHealthFacts> = {}): PodHealthFacts => ({
  name,
  createdMs: 2_000,
  ready: true,
  restarts: 0,
  terminating: false,
  ...over,
});

describe('unhealthy', () => {
  it('is healthy when every live pod is Ready and no replacement restarted', () => {
    expect(unhealthy([pod('a'), pod('b', { createdMs: 500, restarts: 4 })], 1_000)).toBeUndefined();
    expect(unhealthy([], 1_000)).toBeUndefined();
  });

  it('names the pods that are not Ready, ignoring those being deleted', () => {
    expect(
      unhealthy([pod('a', { ready: false }), pod('b', { ready: false, terminating: true })], 1_000),
    ).toEqual({ why: 'not Ready: a', pods: ['a'], restarted: false });
  });

  it('names a replacement that restarted, even while it is Ready (a crash loop between crashes)', () => {
    expect(unhealthy([pod('a', { restarts: 2 })], 1_000)).toEqual({
      why: 'restarted: a (2×)',
      pods: ['a'],
      restarted: true,
    });
  });

  it('keeps the message short for a large workload', () => {
    const many = ['a', 'b', 'c', 'd', 'e'].map((n) => pod(n, { ready: false }));
    expect(unhealthy(many, 1_000)).toEqual({
      why: 'not Ready: a, b, c and 2 more',
      pods: ['a', 'b', 'c', 'd', 'e'],
      restarted: false,
    });
  });

  it('names each failing pod once, sorted, and at most MAX_UNHEALTHY_PODS of them', () => {
    const both = [pod('z', { ready: false, restarts: 1 }), pod('y', { restarts: 3 })];
    expect(unhealthy(both, 1_000)?.pods).toEqual(['y', 'z']);
    const many = Array.from({ length: MAX_UNHEALTHY_PODS + 5 }, (_, i) =>
      pod(`p${String(i).padStart(2, '0')}`, { ready: false }),
    );
    expect(unhealthy(many, 1_000)?.pods).toHaveLength(MAX_UNHEALTHY_PODS);
  });
});

describe('replacementsFailed', () => {
  const since = 10_500; // admitted within second 10
  it('judges only the pods the reload created: an old pod not Ready is not its fault', () => {
    const pods = [pod('old', { createdMs: 1_000, ready: false }), pod('new', { createdMs: 10_000 })];
    expect(replacementsFailed(pods, since, 60_000, 5_000)).toEqual({});
  });

  it('fails a new pod that runs without becoming Ready for the grace, counted from the end of its second', () => {
    const pods = [pod('new', { createdMs: 10_000, ready: false, started: true })];
    expect(replacementsFailed(pods, since, 15_999, 5_000)).toEqual({ againAt: 16_000 });
    expect(replacementsFailed(pods, since, 16_000, 5_000).failed).toEqual({
      why: 'not Ready: new',
      pods: ['new'],
      restarted: false,
    });
  });

  it('does not judge a new pod that has not started (an image pull): the deadline does', () => {
    const pods = [pod('new', { createdMs: 10_000, ready: false, started: false })];
    expect(replacementsFailed(pods, since, 600_000, 5_000)).toEqual({});
  });

  it('fails a new pod that restarted at once', () => {
    const pods = [pod('new', { createdMs: 11_000, ready: false, restarts: 1 })];
    expect(replacementsFailed(pods, since, 11_500, 5_000).failed?.restarted).toBe(true);
  });
});

describe('notJudgedAtAdmission', () => {
  const ok = {
    kind: 'Deployment',
    generation: 3,
    replicas: 2,
    status: { observedGeneration: 3, replicas: 2, updatedReplicas: 2, readyReplicas: 2 },
  };
  it('judges a settled workload whose pods are all Ready', () => {
    expect(notJudgedAtAdmission(ok)).toBeUndefined();
    expect(notJudgedAtAdmission({ ...ok, kind: 'DaemonSet' })).toBeUndefined();
    expect(notJudgedAtAdmission({ ...ok, replicas: 0, status: {} })).toBeUndefined();
  });

  it('excuses a workload with pods not Ready, or its own rollout under way', () => {
    expect(notJudgedAtAdmission({ ...ok, status: { ...ok.status, readyReplicas: 0 } })).toBe(
      '2 of 2 pods were not Ready before the change reached it',
    );
    expect(notJudgedAtAdmission({ ...ok, status: { ...ok.status, observedGeneration: 2 } })).toMatch(
      /own rollout/,
    );
    expect(notJudgedAtAdmission({ ...ok, status: { ...ok.status, updatedReplicas: 1 } })).toMatch(
      /own rollout.*1 of 2 pods updated/,
    );
    expect(
      notJudgedAtAdmission({
        ...ok,
        kind: 'StatefulSet',
        status: { ...ok.status, currentRevision: 'r1', updateRevision: 'r2' },
      }),
    ).toMatch(/own rollout/);
  });
});
