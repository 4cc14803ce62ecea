import { describe, expect, it } from 'vitest';
import { median, medianPairRatio, oursFirst, ratioOfMedians } from './ratio.ts';

describe('median', () => {
  it('takes the middle value, or the mean of the middle two', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeNaN();
  });
});

describe('ratioOfMedians', () => {
  it('divides the median of ours by the median of native', () => {
    expect(ratioOfMedians([10, 30, 20], [8, 12, 10])).toBe(2);
    expect(ratioOfMedians([1], [3])).toBe(0.333);
  });

  it('is null when a side has no measurement or a zero median', () => {
    expect(ratioOfMedians([], [1])).toBeNull();
    expect(ratioOfMedians([1], [])).toBeNull();
    expect(ratioOfMedians([1], [0])).toBeNull();
  });
});

describe('medianPairRatio', () => {
  it('is the median of the per-pair ratios, not the ratio of the medians', () => {
    // Ratios 1, 5 and 0.75: median 1. The medians alone (3 and 2) would give 1.5.
    const pairs = [
      { ours_s: 1, native_s: 1 },
      { ours_s: 10, native_s: 2 },
      { ours_s: 3, native_s: 4 },
    ];
    expect(medianPairRatio(pairs)).toBe(1);
    expect(ratioOfMedians([1, 10, 3], [1, 2, 4])).toBe(1.5);
    expect(medianPairRatio([{ ours_s: 3, native_s: 4 }])).toBe(0.75);
    expect(medianPairRatio([])).toBeNull();
  });
});

describe('oursFirst', () => {
  it('alternates, ours first on the first run', () => {
    expect([0, 1, 2, 3].map(oursFirst)).toEqual([true, false, true, false]);
  });
});
