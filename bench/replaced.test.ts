import { describe, expect, it } from 'vitest';
import type { PodRecord } from './pods.ts';
import { replacedAndReady } from './replaced.ts';

function pod(uid: string, o: Partial<PodRecord> = {}): PodRecord {
  return {
    uid,
    name: uid,
    namespace: 'ns',
    app: 'web',
    surge: false,
    createdAsSurge: false,
    createdAt: 0,
    firstSeenAt: 0,
    ready: true,
    ...o,
  };
}

describe('replacedAndReady', () => {
  const old = new Set(['a', 'b']);

  it('holds when every live pod is new and Ready and there are replicas of them', () => {
    expect(replacedAndReady([pod('c'), pod('d')], old, 2)).toBe(true);
  });

  it('does not hold while an old pod is still live', () => {
    expect(replacedAndReady([pod('a'), pod('d')], old, 2)).toBe(false);
  });

  it('does not hold while a new pod is not Ready', () => {
    expect(replacedAndReady([pod('c'), pod('d', { ready: false })], old, 2)).toBe(false);
  });

  it('does not hold with too few or too many pods, or with a surge pod still there', () => {
    expect(replacedAndReady([pod('c')], old, 2)).toBe(false);
    expect(replacedAndReady([pod('c'), pod('d'), pod('e')], old, 2)).toBe(false);
    expect(replacedAndReady([pod('c'), pod('s', { surge: true })], old, 2)).toBe(false);
  });

  it('counts a surge pod handed to the ReplicaSet (ADR 0019) as one of its pods', () => {
    expect(replacedAndReady([pod('c'), pod('s', { surge: false, createdAsSurge: true })], old, 2)).toBe(true);
  });
});
