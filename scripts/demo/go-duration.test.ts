import { describe, expect, it } from 'vitest';
import { goDurationMs } from './go-duration.ts';

describe('goDurationMs', () => {
  it('reads the forms Go writes', () => {
    expect(goDurationMs('0s')).toBe(0);
    expect(goDurationMs('812.4ms')).toBeCloseTo(812.4);
    expect(goDurationMs('1.5s')).toBe(1500);
    expect(goDurationMs('1m2.5s')).toBe(62_500);
    expect(goDurationMs('1h0m0s')).toBe(3_600_000);
    expect(goDurationMs('3µs')).toBeCloseTo(0.003);
    expect(goDurationMs('250ns')).toBeCloseTo(0.00025);
  });

  it('reads no number from what is not a duration', () => {
    for (const d of ['', '5', 'ms', '1.5 s', '-1s', '1d', '1s trailing']) expect(goDurationMs(d)).toBeNaN();
  });
});
