import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import { RestartBudget } from './restart-budget.ts';

describe('RestartBudget', () => {
  it('is none when neither flag sets a ceiling', () => {
    expect(RestartBudget.of({ perMinute: 0, perNamespacePerMinute: 0 })).toBeUndefined();
  });

  it('holds the cluster to its pods per minute, and reports progress while a reload waits', async () => {
    const time = fakeTimers();
    const waits: string[] = [];
    const b = RestartBudget.of({
      perMinute: 2,
      perNamespacePerMinute: 0,
      timers: time.timers,
      onWait: (scope, ms) => waits.push(`${scope} ${ms}`),
    });
    if (!b) throw new Error('no budget');
    const signal = new AbortController().signal;
    let progress = 0;
    const passed: number[] = [];
    const take = (ns: string) => b.take(ns, signal, () => progress++).then(() => passed.push(time.clock.now));
    await take('a');
    await take('b');
    const third = take('a');
    await time.advance(time.clock.now + 59_999);
    expect(passed).toHaveLength(2);
    await time.advance(time.clock.now + 1);
    await third;
    expect(passed).toEqual([0, 0, 60_000].map((ms) => ms + passed[0]!));
    expect(waits).toEqual(['cluster 60000']);
    expect(progress).toBeGreaterThanOrEqual(6); // every 10 s of the minute
  });

  it('holds each namespace to its own ceiling, apart from the others', async () => {
    const time = fakeTimers();
    const b = RestartBudget.of({ perMinute: 0, perNamespacePerMinute: 1, timers: time.timers });
    if (!b) throw new Error('no budget');
    const signal = new AbortController().signal;
    let later = false;
    await b.take('a', signal, () => {});
    await b.take('b', signal, () => {});
    void b
      .take('a', signal, () => {})
      .then(() => {
        later = true;
      });
    await time.advance(time.clock.now + 30_000);
    expect(later).toBe(false);
    await time.advance(time.clock.now + 30_000);
    expect(later).toBe(true);
  });

  it('counts a slot from when its replacement was answered, not from when it was taken', async () => {
    const time = fakeTimers();
    const b = RestartBudget.of({ perMinute: 0, perNamespacePerMinute: 2, timers: time.timers });
    if (!b) throw new Error('no budget');
    const signal = new AbortController().signal;
    const start = time.clock.now;
    const used = [await b.take('a', signal, () => {}), await b.take('a', signal, () => {})];
    // The first eviction waits 3 s for the API server (the write rate, a busy server), the second 1 s.
    await time.advance(start + 1_000);
    used[1]?.();
    await time.advance(start + 3_000);
    used[0]?.();
    let third: number | undefined;
    void b
      .take('a', signal, () => {})
      .then(() => {
        third = time.clock.now;
      });
    let fourth: number | undefined;
    void b
      .take('a', signal, () => {})
      .then(() => {
        fourth = time.clock.now;
      });
    await time.advance(start + 60_999);
    expect(third).toBeUndefined();
    await time.advance(start + 61_000);
    expect(third).toBe(start + 61_000);
    await time.advance(start + 62_999);
    expect(fourth).toBeUndefined();
    await time.advance(start + 63_000);
    expect(fourth).toBe(start + 63_000);
  });

  it('stops waiting when the reload is cut', async () => {
    const time = fakeTimers();
    const b = RestartBudget.of({ perMinute: 1, perNamespacePerMinute: 0, timers: time.timers });
    if (!b) throw new Error('no budget');
    const cut = new AbortController();
    await b.take('a', cut.signal, () => {});
    const waiting = b.take('a', cut.signal, () => {});
    cut.abort(new Error('term ended'));
    await expect(waiting).rejects.toThrow('term ended');
  });
});
