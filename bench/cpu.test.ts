import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuSeconds, cpuSecondsFromStat } from './cpu.ts';

// A real line of /proc/<pid>/stat (node), with utime 1234 and stime 567 ticks.
const LINE =
  '4242 (node) S 4200 4242 4200 34816 4242 4194304 12345 0 0 0 1234 567 0 0 20 0 11 0 987654 1234567890 30000 18446744073709551615 1 1 0 0 0 0 0 16781312 134234626 0 0 0 17 1 0 0 0 0 0';

describe('cpuSecondsFromStat', () => {
  it('adds utime and stime (fields 14 and 15) and divides by the clock ticks', () => {
    expect(cpuSecondsFromStat(LINE)).toBeCloseTo(18.01, 10);
    expect(cpuSecondsFromStat(LINE, 1000)).toBeCloseTo(1.801, 10);
  });

  it('finds the fields after a command name holding spaces and parentheses', () => {
    const odd = LINE.replace('(node)', '(no) de (x))');
    expect(cpuSecondsFromStat(odd)).toBeCloseTo(18.01, 10);
  });

  it('rejects text that is not a stat line', () => {
    expect(() => cpuSecondsFromStat('hello')).toThrow(/no "\)"/);
    expect(() => cpuSecondsFromStat('1 (node) S 2')).toThrow(/utime/);
  });

  it('reads this process and matches process.cpuUsage() to a tick or two', () => {
    const proc = cpuSeconds(process.pid);
    const self = readFileSync('/proc/self/stat', 'utf8');
    expect(cpuSecondsFromStat(self)).toBeGreaterThanOrEqual(proc);
    const u = process.cpuUsage();
    expect(Math.abs(proc - (u.user + u.system) / 1e6)).toBeLessThan(0.1);
  });
});
