import { describe, expect, it } from 'vitest';
import { MAX_UNHEALTHY_PODS, type PodHealthFacts, unhealthy } from './pod-health.ts';

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
