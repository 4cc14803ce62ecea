import { describe, expect, it } from 'vitest';
import { DEFAULT_SKEW_MARGIN_MS, effectiveCutoff, isBeforeCutoff, waitBeforeActingMs } from './cutoff.ts';

const at = (iso: string): number => Date.parse(iso);
// What the API server writes into creationTimestamp for a pod created at `ms`: whole seconds, floored.
const stamp = (ms: number): string =>
  new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

describe('effectiveCutoff', () => {
  it('rounds a sub-second observation up to the next whole second, then adds the 1 s margin', () => {
    expect(effectiveCutoff(at('2026-01-01T10:00:00.001Z'))).toBe(at('2026-01-01T10:00:02Z'));
    expect(effectiveCutoff(at('2026-01-01T10:00:00.999Z'))).toBe(at('2026-01-01T10:00:02Z'));
  });

  it('keeps an observation already on a whole second and adds the margin', () => {
    expect(effectiveCutoff(at('2026-01-01T10:00:00Z'))).toBe(at('2026-01-01T10:00:01Z'));
  });

  it('uses the margin it is given, and 0 means just the rounding', () => {
    expect(effectiveCutoff(at('2026-01-01T10:00:00.400Z'), 0)).toBe(at('2026-01-01T10:00:01Z'));
    expect(effectiveCutoff(at('2026-01-01T10:00:00.400Z'), 5000)).toBe(at('2026-01-01T10:00:06Z'));
  });

  it('stays on a whole second even with a sub-second margin', () => {
    const t = effectiveCutoff(at('2026-01-01T10:00:00.700Z'), 500);
    expect(t % 1000).toBe(0);
    expect(t).toBe(at('2026-01-01T10:00:02Z'));
  });

  it('is never earlier than the observation plus the margin', () => {
    for (let ms = 0; ms < 3000; ms += 37) {
      const observed = at('2026-01-01T10:00:00Z') + ms;
      const t = effectiveCutoff(observed);
      expect(t).toBeGreaterThanOrEqual(observed + DEFAULT_SKEW_MARGIN_MS);
      expect(t - (observed + DEFAULT_SKEW_MARGIN_MS)).toBeLessThan(1000);
      expect(t % 1000).toBe(0);
    }
  });

  it('rejects a negative margin and non-finite times', () => {
    expect(() => effectiveCutoff(0, -1)).toThrow(/skewMarginMs/);
    expect(() => effectiveCutoff(Number.NaN)).toThrow(/observedAtMs/);
  });
});

describe('isBeforeCutoff', () => {
  const T = effectiveCutoff(at('2026-01-01T10:00:00.300Z')); // 10:00:02

  it('counts a pod created one second before the cutoff as old', () => {
    expect(isBeforeCutoff('2026-01-01T10:00:01Z', T)).toBe(true);
  });

  it('counts a pod created exactly at the cutoff as new', () => {
    expect(isBeforeCutoff('2026-01-01T10:00:02Z', T)).toBe(false);
  });

  it('counts a replacement created in the same second as the cutoff as new, though its stamp is floored', () => {
    // Created at 10:00:02.900, stamped 10:00:02: with a millisecond cutoff of 10:00:02.300 this pod
    // would look old and be recycled again. The whole-second cutoff prevents that loop.
    const created = T + 900;
    expect(isBeforeCutoff(stamp(created), T)).toBe(false);
  });

  it('agrees with the true creation instant for every floored stamp around the cutoff', () => {
    for (let created = T - 2500; created <= T + 2500; created += 50) {
      expect(isBeforeCutoff(stamp(created), T)).toBe(created < T);
    }
  });

  it('accepts a Date, as client-node models hold creationTimestamp', () => {
    expect(isBeforeCutoff(new Date(T - 1000), T)).toBe(true);
    expect(isBeforeCutoff(new Date(T), T)).toBe(false);
  });

  it('accepts RFC 3339 stamps with an offset', () => {
    expect(isBeforeCutoff('2026-01-01T11:00:01+01:00', T)).toBe(true);
    expect(isBeforeCutoff('2026-01-01T11:00:02+01:00', T)).toBe(false);
  });

  it('refuses a sub-second cutoff, which would loop', () => {
    expect(() => isBeforeCutoff('2026-01-01T10:00:01Z', T + 300)).toThrow(/whole second/);
  });

  it('refuses an unparseable timestamp instead of guessing', () => {
    expect(() => isBeforeCutoff('yesterday', T)).toThrow(/invalid pod creationTimestamp/);
    expect(() => isBeforeCutoff(new Date(Number.NaN), T)).toThrow(/invalid pod creationTimestamp/);
  });
});

describe('waitBeforeActingMs', () => {
  const T = at('2026-01-01T10:00:02Z');

  it('waits until the wall clock has passed the cutoff by the skew margin', () => {
    expect(waitBeforeActingMs(T - 1500, T)).toBe(2500);
    expect(waitBeforeActingMs(T, T)).toBe(1000);
    expect(waitBeforeActingMs(T + 999, T)).toBe(1);
  });

  it('allows acting at once when the cutoff plus margin has passed', () => {
    expect(waitBeforeActingMs(T + 1000, T)).toBe(0);
    expect(waitBeforeActingMs(T + 60_000, T)).toBe(0);
  });

  it('uses the margin it is given', () => {
    expect(waitBeforeActingMs(T, T, 0)).toBe(0);
    expect(waitBeforeActingMs(T - 1, T, 0)).toBe(1);
    expect(waitBeforeActingMs(T, T, 3000)).toBe(3000);
  });

  it('keeps replacements new when our clock leads the server by up to the margin', () => {
    const observed = at('2026-01-01T10:00:00.250Z');
    const cutoff = effectiveCutoff(observed);
    for (let skew = -1000; skew <= 1000; skew += 100) {
      // skew > 0: our clock is ahead of the server's.
      const ourNow = observed + waitBeforeActingMs(observed, cutoff);
      const serverNow = ourNow - skew;
      expect(isBeforeCutoff(stamp(serverNow), cutoff)).toBe(false);
    }
  });

  it('still finds pods created just before the change when our clock lags the server by up to the margin', () => {
    const changeOnServer = at('2026-01-01T10:00:00.999Z');
    for (let lag = 0; lag <= 1000; lag += 100) {
      const observedOnOurClock = changeOnServer - lag; // we saw it at once, but our clock is behind
      const cutoff = effectiveCutoff(observedOnOurClock);
      expect(isBeforeCutoff(stamp(changeOnServer - 1), cutoff)).toBe(true);
    }
  });
});
