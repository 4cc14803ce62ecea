import { describe, expect, it } from 'vitest';
import { Flaps } from './flap.ts';

describe('Flaps', () => {
  it('reports a config once when it changed `changes` times within the window, naming its writers', () => {
    const f = new Flaps({ changes: 3, windowMs: 10_000 });
    expect(f.observe('cm', 0, 'a')).toBeUndefined();
    expect(f.observe('cm', 1_000, 'b')).toBeUndefined();
    expect(f.observe('cm', 2_000, 'a')).toEqual({ config: 'cm', changes: 3, writers: ['a', 'b'] });
    // Once per episode.
    expect(f.observe('cm', 3_000, 'c')).toBeUndefined();
    expect(f.observe('cm', 4_000, 'c')).toBeUndefined();
  });

  it('does not count changes spread wider than the window', () => {
    const f = new Flaps({ changes: 3, windowMs: 10_000 });
    for (let t = 0; t < 100_000; t += 6_000) expect(f.observe('cm', t, 'a')).toBeUndefined();
  });

  it('a quiet window ends the episode: a later flap is reported again', () => {
    const f = new Flaps({ changes: 2, windowMs: 1_000 });
    expect(f.observe('cm', 0, 'a')).toBeUndefined();
    expect(f.observe('cm', 500, 'a')).toBeDefined();
    expect(f.observe('cm', 900, 'a')).toBeUndefined();
    expect(f.observe('cm', 5_000, 'b')).toBeUndefined();
    expect(f.observe('cm', 5_100, 'b')).toEqual({ config: 'cm', changes: 2, writers: ['b'] });
  });

  it('keeps configs apart, and forgets quiet ones', () => {
    const f = new Flaps({ changes: 2, windowMs: 1_000 });
    expect(f.observe('x', 0, 'a')).toBeUndefined();
    expect(f.observe('y', 100, 'a')).toBeUndefined();
    for (let i = 0; i < 300; i++) f.observe(`z${i}`, 10_000 + i * 100, undefined);
    expect(f.tracked).toBeLessThan(300);
  });

  it('refuses a flap of one change', () => {
    expect(() => new Flaps({ changes: 1, windowMs: 1 })).toThrow(/at least 2/);
  });
});
