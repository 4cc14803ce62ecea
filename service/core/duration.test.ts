import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.ts';

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['500ms', 500],
    ['3s', 3000],
    ['1.5s', 1500],
    ['2m', 120_000],
    ['1m30s', 90_000],
    ['1h', 3_600_000],
  ])('reads %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '3', 's', '3x', '-1s', '3s junk', '1d'])('rejects %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it('formats whole units back', () => {
    expect(formatDuration(3000)).toBe('3s');
    expect(formatDuration(120_000)).toBe('2m');
    expect(formatDuration(250)).toBe('250ms');
  });
});
