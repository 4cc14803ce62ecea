import { describe, expect, it } from 'vitest';
import {
  expectedReplacedBeforeHalt,
  firstWave,
  gateCost,
  replacedBelowFloor,
  type WaveMember,
  waveSizes,
} from './progressive.ts';

const m = (name: string, o: Partial<WaveMember> = {}): WaveMember => ({
  namespace: 'ns',
  name,
  priority: 0,
  replicas: 2,
  maxSurge: '25%',
  maxUnavailable: '25%',
  ...o,
});

describe('firstWave', () => {
  it('takes the highest priority, then namespace, then name', () => {
    const members = [m('b'), m('a', { namespace: 'z' }), m('c', { priority: 5 }), m('a')];
    expect(firstWave(members, 3).map((x) => `${x.namespace}/${x.name}`)).toEqual(['ns/c', 'ns/a', 'ns/b']);
  });
});

describe('replacedBelowFloor', () => {
  it('is 0 for 2 replicas under the default 25%/25% (maxUnavailable rounds down to 0)', () => {
    expect(replacedBelowFloor(m('a'))).toBe(0);
    expect(replacedBelowFloor(m('a', { maxSurge: undefined, maxUnavailable: undefined }))).toBe(0);
  });
  it('is maxUnavailable when it allows evictions', () => {
    expect(replacedBelowFloor(m('a', { replicas: 10 }))).toBe(2); // 25% of 10, rounded down
    expect(replacedBelowFloor(m('a', { replicas: 4, maxSurge: 0, maxUnavailable: 1 }))).toBe(1);
  });
  it('keeps one Ready pod: a single replica with 100% unavailable replaces none', () => {
    expect(replacedBelowFloor(m('a', { replicas: 1, maxSurge: 0, maxUnavailable: '100%' }))).toBe(0);
  });
  it('both 0: the Deployment controller makes maxUnavailable 1', () => {
    expect(replacedBelowFloor(m('a', { replicas: 3, maxSurge: 0, maxUnavailable: 0 }))).toBe(1);
  });
});

describe('expectedReplacedBeforeHalt', () => {
  it('counts the first wave only', () => {
    const members = [m('b', { replicas: 10 }), m('a', { replicas: 4, maxSurge: 0, maxUnavailable: 1 })];
    expect(expectedReplacedBeforeHalt(members, 1)).toBe(1); // a, first by name
    expect(expectedReplacedBeforeHalt(members, 2)).toBe(3);
    expect(
      expectedReplacedBeforeHalt(
        Array.from({ length: 100 }, (_, i) => m(`p-${i}`)),
        1,
      ),
    ).toBe(0);
  });
});

describe('waveSizes', () => {
  it('doubles from the first wave and ends with what is left', () => {
    expect(waveSizes(100, 1)).toEqual([1, 2, 4, 8, 16, 32, 37]);
    expect(waveSizes(20, 1)).toEqual([1, 2, 4, 8, 5]);
    expect(waveSizes(3, 5)).toEqual([3]);
  });
});

describe('gateCost', () => {
  it('holds when the difference is at most the settle time', () => {
    expect(gateCost(30.5, 26, 5)).toEqual({ difference_s: 4.5, settle_s: 5, within_settle: true });
    expect(gateCost(40, 26, 5)).toEqual({ difference_s: 14, settle_s: 5, within_settle: false });
    expect(gateCost(20, 26, 5).within_settle).toBe(true);
  });
});
