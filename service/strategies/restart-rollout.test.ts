// The pure choice of the Rollout's spec.restartAt (no cluster needed; it lives here because the
// strategy module has no unit-test file of its own).
import { describe, expect, it } from 'vitest';
import { restartAtFor, rfc3339Seconds } from './restart-rollout.ts';

const T = Date.parse('2026-01-01T10:00:00Z');

describe('restartAtFor', () => {
  it('writes the cutoff when it is still ahead of now', () => {
    expect(restartAtFor(undefined, T, T - 1_500)).toBe('2026-01-01T10:00:00Z');
  });

  it('writes now (whole seconds) when the cutoff has passed', () => {
    expect(restartAtFor(undefined, T, T + 42_700)).toBe('2026-01-01T10:00:42Z');
  });

  it('replaces a restartAt that predates the cutoff', () => {
    expect(restartAtFor('2025-12-31T23:00:00Z', T, T + 100)).toBe('2026-01-01T10:00:00Z');
  });

  it('writes nothing when restartAt already covers the change (a resumed reload writes once)', () => {
    expect(restartAtFor('2026-01-01T10:00:00Z', T, T + 60_000)).toBeUndefined();
    expect(restartAtFor('2026-01-01T10:00:05Z', T, T + 60_000)).toBeUndefined();
    // A restart scheduled for later covers it too: the controller restarts the pods then.
    expect(restartAtFor('2026-01-02T00:00:00Z', T, T)).toBeUndefined();
  });

  it('overwrites a value that is not a time', () => {
    expect(restartAtFor('soon', T, T)).toBe('2026-01-01T10:00:00Z');
  });
});

describe('rfc3339Seconds', () => {
  it('drops milliseconds, as metav1.Time serialises', () => {
    expect(rfc3339Seconds(T + 999)).toBe('2026-01-01T10:00:00Z');
  });
});
