import { describe, expect, it } from 'vitest';
import {
  instantAt,
  parseRestartWindows,
  type RestartWindows,
  wallClock,
  windowState,
} from './restart-window.ts';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number) => new Date(ms).toISOString();

function windows(text: string): RestartWindows {
  const p = parseRestartWindows(text);
  if ('problem' in p) throw new Error(p.problem);
  return p.windows;
}

/** The state at `now`, with instants as ISO strings for readable failures. */
function state(text: string, now: string) {
  const s = windowState(windows(text), at(now));
  return s.open ? { open: true, closesAt: iso(s.closesAt) } : { open: false, opensAt: iso(s.opensAt) };
}

describe('parseRestartWindows', () => {
  it('reads days, a time range and a time zone', () => {
    const w = windows('Mon-Fri 02:00-04:00 Europe/Berlin');
    expect(w.windows).toHaveLength(1);
    const [one] = w.windows;
    expect([...(one?.days ?? [])].sort()).toEqual([1, 2, 3, 4, 5]);
    expect(one).toMatchObject({ startMin: 120, endMin: 240, timeZone: 'Europe/Berlin' });
    expect(w.text).toBe('Mon-Fri 02:00-04:00 Europe/Berlin');
  });

  it.each([
    ['02:00-04:00', [0, 1, 2, 3, 4, 5, 6], 'UTC'],
    ['daily 02:00-04:00 UTC', [0, 1, 2, 3, 4, 5, 6], 'UTC'],
    ['* 02:00-04:00', [0, 1, 2, 3, 4, 5, 6], 'UTC'],
    ['Sat,Sun 10:00-12:00', [0, 6], 'UTC'],
    ['Sat, Sun 10:00-12:00', [0, 6], 'UTC'],
    ['fri-mon 22:00-02:00 America/New_York', [0, 1, 5, 6], 'America/New_York'],
    ['Monday,Wednesday 9:30-10:00 Asia/Kolkata', [1, 3], 'Asia/Kolkata'],
    ['Sun 00:00-24:00', [0], 'UTC'],
  ])('%s', (text, days, tz) => {
    const [one] = windows(text).windows;
    expect([...(one?.days ?? [])].sort()).toEqual(days);
    expect(one?.timeZone).toBe(tz);
  });

  it('takes several windows separated by ";" or new lines', () => {
    expect(windows('Mon 01:00-02:00; Tue 03:00-04:00 Europe/Berlin\nSat 10:00-11:00').windows).toHaveLength(
      3,
    );
  });

  it.each([
    ['', /is empty/],
    [' ; ', /is empty/],
    ['Mon-Fri', /has no time range/],
    ['Mon-Fri 2am-4am', /has no time range/],
    ['Mon-Fri 02:00-04:00 Europe/Berlin extra', /more than a time zone/],
    ['Mon-Fry 02:00-04:00', /"mon-fry" is not a day/],
    ['Mon-Tue-Wed 02:00-04:00', /is not a day or a range of days/],
    ['Mon,,Tue 02:00-04:00', /has an empty day/],
    ['Mon 25:00-26:00', /25:00 is not a time of day/],
    ['Mon 02:60-03:00', /02:60 is not a time of day/],
    ['Mon 24:00-02:00', /24:00 is not a time of day$/],
    ['Mon 22:00-24:30', /24:30 is not a time of day \(24:00 is allowed as an end\)/],
    ['Mon 02:00-02:00', /starts and ends at the same time/],
    ['Mon 02:00-04:00 Mars/Olympus', /"Mars\/Olympus" is not an IANA time zone/],
    ['Mon 01:00-02:00; Tue 03:00', /window "Tue 03:00": has no time range/],
    [Array(33).fill('Mon 01:00-02:00').join(';'), /has 33 windows; at most 32 are allowed/],
  ])('refuses %j', (text, message) => {
    const p = parseRestartWindows(text);
    expect('problem' in p && p.problem).toMatch(message);
  });
});

describe('wallClock and instantAt', () => {
  it('convert between instants and Berlin wall-clock time in winter and summer', () => {
    expect(iso(wallClock('Europe/Berlin', at('2026-01-15T01:00:00Z')))).toBe('2026-01-15T02:00:00.000Z');
    expect(iso(wallClock('Europe/Berlin', at('2026-07-15T01:00:00Z')))).toBe('2026-07-15T03:00:00.000Z');
    expect(iso(instantAt('Europe/Berlin', at('2026-01-15T02:00:00Z')))).toBe('2026-01-15T01:00:00.000Z');
    expect(iso(instantAt('Europe/Berlin', at('2026-07-15T02:00:00Z')))).toBe('2026-07-15T00:00:00.000Z');
  });

  it('maps a skipped wall time to the moment clocks jump (Berlin, 2026-03-29 02:00 → 03:00)', () => {
    expect(iso(instantAt('Europe/Berlin', at('2026-03-29T02:30:00Z')))).toBe('2026-03-29T01:00:00.000Z');
  });

  it('maps a repeated wall time to its first occurrence (Berlin, 2026-10-25 03:00 → 02:00)', () => {
    expect(iso(instantAt('Europe/Berlin', at('2026-10-25T02:30:00Z')))).toBe('2026-10-25T00:30:00.000Z');
  });

  it('handles half-hour offsets (Asia/Kolkata, +05:30)', () => {
    expect(iso(instantAt('Asia/Kolkata', at('2026-05-01T09:30:00Z')))).toBe('2026-05-01T04:00:00.000Z');
  });
});

describe('windowState', () => {
  const BERLIN = 'Mon-Fri 02:00-04:00 Europe/Berlin';

  it('is open inside the window and says when it closes', () => {
    // Thursday 2026-12-03, 02:30 in Berlin (CET, +01:00).
    expect(state(BERLIN, '2026-12-03T01:30:00Z')).toEqual({
      open: true,
      closesAt: '2026-12-03T03:00:00.000Z',
    });
  });

  it('opens at the start, not a moment later, and closes at the end', () => {
    expect(state(BERLIN, '2026-12-03T01:00:00Z')).toEqual({
      open: true,
      closesAt: '2026-12-03T03:00:00.000Z',
    });
    expect(state(BERLIN, '2026-12-03T00:59:59.999Z')).toEqual({
      open: false,
      opensAt: '2026-12-03T01:00:00.000Z',
    });
    expect(state(BERLIN, '2026-12-03T03:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-12-04T01:00:00.000Z',
    });
  });

  it('skips days the window does not name: Friday afternoon waits for Monday', () => {
    expect(state(BERLIN, '2026-12-04T15:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-12-07T01:00:00.000Z',
    });
  });

  it('follows the time zone into summer time', () => {
    // Wednesday 2026-07-15: Berlin is +02:00, so 02:00 local is 00:00 UTC.
    expect(state(BERLIN, '2026-07-14T23:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-07-15T00:00:00.000Z',
    });
  });

  it('runs an overnight window into the next day', () => {
    const FRI_NIGHT = 'Fri 22:00-02:00 UTC';
    expect(state(FRI_NIGHT, '2026-12-05T01:00:00Z')).toEqual({
      open: true,
      closesAt: '2026-12-05T02:00:00.000Z',
    });
    expect(state(FRI_NIGHT, '2026-12-05T02:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-12-11T22:00:00.000Z',
    });
    expect(state(FRI_NIGHT, '2026-12-04T21:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-12-04T22:00:00.000Z',
    });
  });

  it('runs an overnight window across a daylight-saving change by the wall clock', () => {
    // Saturday 2026-03-28 23:00 CET to Sunday 03:00 CEST: 3 hours, not 4.
    const w = 'Sat 23:00-03:00 Europe/Berlin';
    expect(state(w, '2026-03-28T22:30:00Z')).toEqual({ open: true, closesAt: '2026-03-29T01:00:00.000Z' });
  });

  it('opens at 03:00 when clocks skip 02:00-03:00, and lasts one hour', () => {
    const w = 'Sun 02:00-04:00 Europe/Berlin';
    expect(state(w, '2026-03-28T12:00:00Z')).toEqual({ open: false, opensAt: '2026-03-29T01:00:00.000Z' });
    expect(state(w, '2026-03-29T01:00:00Z')).toEqual({ open: true, closesAt: '2026-03-29T02:00:00.000Z' });
  });

  it('does not open a window the clocks skip entirely; the next one opens a week later', () => {
    const w = 'Sun 02:00-02:30 Europe/Berlin';
    expect(state(w, '2026-03-28T12:00:00Z')).toEqual({ open: false, opensAt: '2026-04-05T00:00:00.000Z' });
  });

  it('lasts three hours on the night clocks repeat 02:00-03:00', () => {
    const w = 'Sun 02:00-04:00 Europe/Berlin';
    expect(state(w, '2026-10-24T12:00:00Z')).toEqual({ open: false, opensAt: '2026-10-25T00:00:00.000Z' });
    // 02:30 CET, the second time the clock reads 02:30: still open, until 04:00 CET.
    expect(state(w, '2026-10-25T01:30:00Z')).toEqual({ open: true, closesAt: '2026-10-25T03:00:00.000Z' });
  });

  it('handles New York overnight windows across the US change (2026-03-08)', () => {
    const w = 'Sat 23:00-03:00 America/New_York';
    // Sat 23:00 EST = 04:00Z Sunday; Sun 03:00 EDT = 07:00Z.
    expect(state(w, '2026-03-08T05:00:00Z')).toEqual({ open: true, closesAt: '2026-03-08T07:00:00.000Z' });
  });

  it('takes the earliest of several windows, and a whole-day window', () => {
    expect(state('Tue 05:00-06:00; Thu 20:00-21:00 UTC', '2026-12-03T10:00:00Z')).toEqual({
      open: false,
      opensAt: '2026-12-03T20:00:00.000Z',
    });
    expect(state('Thu 00:00-24:00', '2026-12-03T23:59:00Z')).toEqual({
      open: true,
      closesAt: '2026-12-04T00:00:00.000Z',
    });
  });

  it('opens within three days at any time of a year (no window is ever lost)', () => {
    const w = windows('Mon-Fri 02:00-04:00 Europe/Berlin; Sat 23:30-00:30 America/New_York');
    for (let t = at('2026-01-01T00:00:00Z'); t < at('2027-01-01T00:00:00Z'); t += 367 * 60_000) {
      const s = windowState(w, t);
      if (s.open) expect(s.closesAt).toBeGreaterThan(t);
      else {
        expect(s.opensAt).toBeGreaterThan(t);
        expect(s.opensAt - t).toBeLessThanOrEqual(3 * 24 * 3_600_000);
        // Just before it opens it is still closed; at the moment it opens it is open.
        expect(windowState(w, s.opensAt).open).toBe(true);
      }
    }
  });
});
