// Maintenance windows (gitops-reloader.io/restart-window): parsing, and whether a window is open at an
// instant or when the next one opens. Pure: the clock is an argument.
//
//   "Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 10:00-12:00 UTC"
//
// A window is [days] HH:MM-HH:MM [IANA time zone]: days default to every day, the zone to UTC. Times
// are wall-clock times in the zone; the days name the day a window opens, so "Fri 22:00-02:00" runs
// from Friday 22:00 to Saturday 02:00. Around daylight-saving changes a window opens when the local
// clock first reaches its start and closes when it first reaches its end: on the night clocks skip
// 02:00-03:00, "02:00-04:00" opens at 03:00 and "02:00-02:30" does not open at all; on the night
// clocks repeat 02:00-03:00, "02:00-04:00" lasts three hours.

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

const DAY_NAMES: Readonly<Record<string, number>> = {
  sun: 0,
  sunday: 0,
  mon: 1,
  monday: 1,
  tue: 2,
  tuesday: 2,
  wed: 3,
  wednesday: 3,
  thu: 4,
  thursday: 4,
  fri: 5,
  friday: 5,
  sat: 6,
  saturday: 6,
};
const ALL_DAYS: readonly number[] = [0, 1, 2, 3, 4, 5, 6];

export interface RestartWindow {
  /** Days the window opens on, 0 = Sunday … 6 = Saturday, in its time zone. */
  readonly days: ReadonlySet<number>;
  /** Minutes after local midnight: start in [0, 1440), end in (0, 1440]; end ≤ start ends the next day. */
  readonly startMin: number;
  readonly endMin: number;
  readonly timeZone: string;
}

export interface RestartWindows {
  /** The annotation value as written, for Events and plans. */
  readonly text: string;
  readonly windows: readonly RestartWindow[];
}

export type WindowState =
  /** `closesAt`: when the open window ends (epoch ms). */
  | { readonly open: true; readonly closesAt: number }
  /** `opensAt`: when the next window opens (epoch ms). */
  | { readonly open: false; readonly opensAt: number };

export type ParsedWindows = { windows: RestartWindows } | { problem: string };

/** More windows than this are refused: each one costs time zone arithmetic at every check. */
export const MAX_WINDOWS = 32;

const TIME_RANGE = /^(\d{1,2}):(\d{2})-(\d{1,2}):(\d{2})$/;

/** Parses the annotation value. Windows are separated by ";" or new lines. */
export function parseRestartWindows(text: string): ParsedWindows {
  const parts = text
    .split(/[;\n]/)
    .map((p) => p.trim())
    .filter((p) => p !== '');
  if (parts.length === 0) {
    return { problem: 'is empty; write e.g. "Mon-Fri 02:00-04:00 Europe/Berlin"' };
  }
  if (parts.length > MAX_WINDOWS) {
    return { problem: `has ${parts.length} windows; at most ${MAX_WINDOWS} are allowed` };
  }
  const windows: RestartWindow[] = [];
  for (const part of parts) {
    const w = parseWindow(part);
    if (typeof w === 'string') return { problem: `window ${JSON.stringify(part)}: ${w}` };
    windows.push(w);
  }
  return { windows: { text: text.trim(), windows } };
}

function parseWindow(part: string): RestartWindow | string {
  const tokens = part.split(/\s+/);
  const at = tokens.findIndex((t) => TIME_RANGE.test(t));
  if (at < 0) return 'has no time range; write HH:MM-HH:MM, e.g. 02:00-04:00';
  if (tokens.length - at > 2)
    return `has more than a time zone after the time range (${tokens.slice(at + 1).join(' ')})`;
  // "Mon, Wed" and "Mon,Wed" both name two days.
  const dayText = tokens.slice(0, at).join('');
  const days = dayText === '' ? new Set(ALL_DAYS) : parseDays(dayText);
  if (typeof days === 'string') return days;

  const m = TIME_RANGE.exec(tokens[at] as string) as RegExpExecArray;
  const start = minutes(Number(m[1]), Number(m[2]), false);
  if (typeof start === 'string') return start;
  const end = minutes(Number(m[3]), Number(m[4]), true);
  if (typeof end === 'string') return end;
  if (start === end) {
    return 'starts and ends at the same time; write 00:00-24:00 for a whole day';
  }

  const timeZone = tokens[at + 1] ?? 'UTC';
  if (!validTimeZone(timeZone)) {
    return `${JSON.stringify(timeZone)} is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)`;
  }
  return { days, startMin: start, endMin: end, timeZone };
}

function parseDays(text: string): Set<number> | string {
  const lower = text.toLowerCase();
  if (lower === 'daily' || lower === '*') return new Set(ALL_DAYS);
  const days = new Set<number>();
  for (const item of lower.split(',')) {
    if (item === '') return `${JSON.stringify(text)} has an empty day`;
    const range = item.split('-');
    if (range.length > 2) return `${JSON.stringify(item)} is not a day or a range of days`;
    const from = DAY_NAMES[range[0] as string];
    const to = DAY_NAMES[(range[1] ?? range[0]) as string];
    if (from === undefined || to === undefined) {
      return `${JSON.stringify(item)} is not a day; use Mon, Tue, Wed, Thu, Fri, Sat, Sun, ranges such as Mon-Fri, or daily`;
    }
    // A range may wrap the week: Fri-Mon is Fri, Sat, Sun, Mon.
    for (let d = from; ; d = (d + 1) % 7) {
      days.add(d);
      if (d === to) break;
    }
  }
  return days;
}

function minutes(h: number, m: number, isEnd: boolean): number | string {
  const hh = String(h).padStart(2, '0');
  const mm = String(m).padStart(2, '0');
  if (m > 59 || h > 24 || (h === 24 && (m !== 0 || !isEnd))) {
    return `${hh}:${mm} is not a time of day${isEnd ? ' (24:00 is allowed as an end)' : ''}`;
  }
  return h * 60 + m;
}

const formats = new Map<string, Intl.DateTimeFormat>();

function format(timeZone: string): Intl.DateTimeFormat {
  let f = formats.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formats.set(timeZone, f);
  }
  return f;
}

function validTimeZone(tz: string): boolean {
  try {
    format(tz);
    return true;
  } catch {
    return false;
  }
}

/** The wall-clock time in `tz` at instant `t`, written as if it were a UTC instant (ms). */
export function wallClock(tz: string, t: number): number {
  const p: Record<string, number> = {};
  for (const part of format(tz).formatToParts(new Date(t))) {
    if (part.type !== 'literal') p[part.type] = Number(part.value);
  }
  const ms = ((t % 1000) + 1000) % 1000;
  return Date.UTC(p.year as number, (p.month as number) - 1, p.day, p.hour, p.minute, p.second) + ms;
}

/**
 * The first instant at which the wall clock in `tz` reads `wall` or later. For a wall time that happens
 * twice (clocks turned back) that is its first occurrence; for one that never happens (clocks jumped
 * over it) it is the moment of the jump.
 */
export function instantAt(tz: string, wall: number): number {
  const candidates = new Set<number>();
  for (const probe of [wall - DAY, wall, wall + DAY]) candidates.add(wall - (wallClock(tz, probe) - probe));
  const exact = [...candidates].filter((t) => wallClock(tz, t) === wall).sort((a, b) => a - b);
  if (exact.length > 0) return exact[0] as number;
  // In a gap: the later offset's candidate reads past `wall`, the earlier one's before it.
  let lo = Math.min(...candidates);
  let hi = Math.max(...candidates);
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (wallClock(tz, mid) >= wall) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** Whether a window is open at `nowMs`, and until when; or when the next one opens. */
export function windowState(ws: RestartWindows, nowMs: number): WindowState {
  let closesAt: number | undefined;
  let opensAt = Number.POSITIVE_INFINITY;
  for (const w of ws.windows) {
    const wallNow = wallClock(w.timeZone, nowMs);
    const today = wallNow - (((wallNow % DAY) + DAY) % DAY);
    // From the day before (an overnight window opened yesterday) to two weeks ahead (a window that a
    // daylight-saving jump empties on its only day opens a week later).
    for (let d = -1; d <= 14; d++) {
      const day = today + d * DAY;
      if (!w.days.has(new Date(day).getUTCDay())) continue;
      const start = instantAt(w.timeZone, day + w.startMin * MINUTE);
      const endDay = w.endMin > w.startMin ? day : day + DAY;
      const end = instantAt(w.timeZone, endDay + w.endMin * MINUTE);
      if (end <= start) continue; // the clocks skipped the whole window that day
      if (start <= nowMs && nowMs < end) closesAt = Math.max(closesAt ?? end, end);
      else if (start > nowMs) {
        // Later days of this window only open later.
        opensAt = Math.min(opensAt, start);
        break;
      }
    }
  }
  if (closesAt !== undefined) return { open: true, closesAt };
  return { open: false, opensAt };
}
