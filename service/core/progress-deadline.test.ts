import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import { ProgressDeadline } from './progress-deadline.ts';

describe('ProgressDeadline', () => {
  it('passes after one period with no progress', async () => {
    const { timers, advance } = fakeTimers();
    let expired = 0;
    const d = new ProgressDeadline(timers, 10_000, () => expired++);
    await advance(9_999);
    expect(expired).toBe(0);
    await advance(10_000);
    expect(expired).toBe(1);
    expect(d.expired).toBe(true);
    await advance(60_000);
    expect(expired).toBe(1);
  });

  it('never passes while progress comes more often than the period, however long the reload runs', async () => {
    const { timers, advance } = fakeTimers();
    let expired = 0;
    const d = new ProgressDeadline(timers, 10_000, () => expired++);
    // 30 pods, one replaced every 9 s: 270 s in all, 27 times the period.
    for (let t = 9_000; t <= 270_000; t += 9_000) {
      await advance(t);
      d.progress();
    }
    expect(expired).toBe(0);
    d.stop();
    await advance(1_000_000);
    expect(expired).toBe(0);
    expect(d.expired).toBe(false);
  });

  it('measures the period from the last progress, not from the start', async () => {
    const { timers, advance } = fakeTimers();
    let expiredAt: number | undefined;
    const d = new ProgressDeadline(timers, 10_000, () => {
      expiredAt = timers.now();
    });
    await advance(4_000);
    d.progress();
    await advance(13_000);
    d.progress();
    await advance(100_000);
    expect(expiredAt).toBe(23_000);
  });

  it('keeps one timer however often progress is reported', async () => {
    const { timers, pending, advance } = fakeTimers();
    const d = new ProgressDeadline(timers, 10_000, () => undefined);
    for (let t = 1; t <= 5_000; t++) {
      await advance(t);
      d.progress();
    }
    expect(pending).toHaveLength(1);
    d.stop();
    expect(pending).toHaveLength(0);
  });
});
