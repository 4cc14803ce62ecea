import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import { RateGate, TokenBucket } from './token-bucket.ts';

describe('TokenBucket', () => {
  it('lets a burst through at once, then spaces callers 1/qps apart, in order', () => {
    const clock = { now: 0 };
    const b = new TokenBucket({ qps: 10, burst: 3, now: () => clock.now });
    expect([b.reserve(), b.reserve(), b.reserve()]).toEqual([0, 0, 0]);
    // The 4th, 5th and 6th wait for the 1st, 2nd and 3rd token to come back: 100, 200, 300 ms.
    expect([b.reserve(), b.reserve(), b.reserve()]).toEqual([100, 200, 300]);
    expect(b.available()).toBe(-3);
  });

  it('refills at qps up to burst, never above it', () => {
    const clock = { now: 0 };
    const b = new TokenBucket({ qps: 2, burst: 4, now: () => clock.now });
    for (let i = 0; i < 4; i++) b.reserve();
    clock.now = 1000; // 2 tokens back
    expect(b.available()).toBeCloseTo(2);
    clock.now = 60_000; // a long quiet spell: still only burst
    expect(b.available()).toBe(4);
    expect([b.reserve(), b.reserve(), b.reserve(), b.reserve(), b.reserve()]).toEqual([0, 0, 0, 0, 500]);
  });

  it('never lets more than burst + qps × window through in any window', () => {
    const clock = { now: 0 };
    const qps = 20;
    const burst = 30;
    const b = new TokenBucket({ qps, burst, now: () => clock.now });
    // 500 callers arrive in uneven clumps over 10 s; each passes at arrival + its wait.
    const passes: number[] = [];
    for (let i = 0; i < 500; i++) {
      clock.now = Math.floor(i / 50) * 1000 + (i % 7);
      passes.push(clock.now + b.reserve());
    }
    passes.sort((a, b2) => a - b2);
    for (const w of [100, 1000, 5000]) {
      for (let i = 0; i < passes.length; i++) {
        const from = passes[i] as number;
        const inWindow = passes.filter((p) => p >= from && p < from + w).length;
        expect(inWindow).toBeLessThanOrEqual(burst + Math.ceil((qps * w) / 1000));
      }
    }
    // And it is not slower than it must be: the last pass is when the rate allows it.
    expect(passes.at(-1)).toBeLessThanOrEqual(Math.ceil(((500 - burst) / qps) * 1000));
  });

  it('refuses nonsense limits', () => {
    expect(() => new TokenBucket({ qps: 0, burst: 1 })).toThrow(/qps/);
    expect(() => new TokenBucket({ qps: 1, burst: 0 })).toThrow(/burst/);
    expect(() => new TokenBucket({ qps: Number.NaN, burst: 1 })).toThrow(/qps/);
  });
});

describe('RateGate', () => {
  it('passes the burst at once and the rest at the rate, first come first served, reporting each wait', async () => {
    const t = fakeTimers();
    const waits: number[] = [];
    const g = new RateGate({ qps: 10, burst: 2, timers: t.timers, onPass: (ms) => waits.push(ms) });
    const passed: Array<[number, number]> = [];
    const all = [0, 1, 2, 3, 4].map((n) => g.pass().then(() => passed.push([n, t.clock.now])));
    await Promise.resolve();
    expect(passed).toEqual([
      [0, 0],
      [1, 0],
    ]);
    expect(g.waiting).toBe(3);
    await t.advance(1000);
    await Promise.all(all);
    expect(passed).toEqual([
      [0, 0],
      [1, 0],
      [2, 100],
      [3, 200],
      [4, 300],
    ]);
    expect(waits).toEqual([0, 0, 100, 200, 300]);
    expect(g.waiting).toBe(0);
  });

  it('rejects a waiting caller whose signal aborts, and it never passes', async () => {
    const t = fakeTimers();
    const g = new RateGate({ qps: 1, burst: 1, timers: t.timers });
    await g.pass();
    const ac = new AbortController();
    let passed = false;
    const p = g.pass(ac.signal).then(() => {
      passed = true;
    });
    ac.abort(new Error('term ended'));
    await expect(p).rejects.toThrow('term ended');
    await t.advance(5000);
    expect(passed).toBe(false);
    expect(t.pending).toHaveLength(0);
    expect(g.waiting).toBe(0);
    // An already aborted signal never takes a token.
    await expect(g.pass(ac.signal)).rejects.toThrow('term ended');
  });
});
