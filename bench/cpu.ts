// CPU time of a process from /proc/<pid>/stat: user + system time (fields 14 and 15), in clock
// ticks. Linux reports them in USER_HZ units, which is 100 on every Linux architecture Node runs on
// (sysconf(_SC_CLK_TCK)); Node has no binding for sysconf, so the bench assumes it.
import { readFileSync } from 'node:fs';

export const CLK_TCK = 100;

/** utime + stime in seconds, parsed from the text of /proc/<pid>/stat. */
export function cpuSecondsFromStat(stat: string, clockTicks = CLK_TCK): number {
  // The command name (field 2) is in parentheses and may itself hold spaces or parentheses: the
  // fields after it start past the LAST ')'.
  const close = stat.lastIndexOf(')');
  if (close < 0) throw new Error('not a /proc/<pid>/stat line: no ")"');
  const rest = stat
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state), so field N is rest[N - 3].
  const utime = Number(rest[14 - 3]);
  const stime = Number(rest[15 - 3]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime))
    throw new Error('not a /proc/<pid>/stat line: no utime/stime');
  return (utime + stime) / clockTicks;
}

/** CPU seconds (user + system) the process has used so far. */
export function cpuSeconds(pid: number): number {
  return cpuSecondsFromStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
}
