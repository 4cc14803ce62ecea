import { describe, expect, it } from 'vitest';
import { WindowLimit } from './window-limit.ts';

describe('WindowLimit', () => {
  it('lets `limit` through at once, then each next one when the oldest leaves the window', () => {
    const w = new WindowLimit(3, 60_000);
    expect([w.reserve(0), w.reserve(0), w.reserve(10)]).toEqual([0, 0, 0]);
    expect(w.reserve(20)).toBe(60_000 - 20); // served at 60 000: the first left the window
    expect(w.reserve(30)).toBe(60_000 - 30); // at 60 000 too: the second also left then
    expect(w.reserve(40)).toBe(60_010 - 40);
  });

  it('never holds more than `limit` in any window, whatever the arrivals', () => {
    const w = new WindowLimit(5, 1_000);
    const served: number[] = [];
    let now = 0;
    for (let i = 0; i < 200; i++) {
      now += (i * 37) % 120;
      served.push(now + w.reserve(now));
    }
    served.sort((a, b) => a - b);
    for (let i = 5; i < served.length; i++) {
      expect((served[i] as number) - (served[i - 5] as number)).toBeGreaterThanOrEqual(1_000);
    }
  });

  it('serves reservations in the order they came', () => {
    const w = new WindowLimit(1, 100);
    const at = [0, 1, 2, 3].map((now) => now + w.reserve(now));
    expect(at).toEqual([0, 100, 200, 300]);
  });

  it('is idle once its last reservation left the window', () => {
    const w = new WindowLimit(1, 100);
    expect(w.idle(0)).toBe(true);
    w.reserve(0);
    expect(w.idle(50)).toBe(false);
    expect(w.idle(100)).toBe(true);
  });

  it('counts the window from when a reserved action really happened', () => {
    const w = new WindowLimit(2, 60_000);
    const first = w.reserve(0);
    const second = w.reserve(0);
    // The first action's write is answered 3 s after its slot: the third slot is a minute after that.
    w.used(first, 3_000);
    w.used(second, 500);
    expect(1_000 + w.reserve(1_000)).toBe(60_500);
    expect(1_000 + w.reserve(1_000)).toBe(63_000);
  });

  it('ignores a use earlier than its slot, or of a slot it no longer holds', () => {
    const w = new WindowLimit(1, 100);
    const a = w.reserve(0);
    w.used(a, -5);
    w.used(12_345, 50_000);
    expect(w.reserve(0)).toBe(100);
  });

  it('refuses a limit below one', () => {
    expect(() => new WindowLimit(0, 1)).toThrow(RangeError);
  });
});
