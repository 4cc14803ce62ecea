import { describe, expect, it } from 'vitest';
import {
  candidateDelayMs,
  DEFAULT_TIMINGS,
  decideCandidate,
  decideLeader,
  expiresAt,
  holdForMs,
  isExpired,
  JITTER,
  judgeWhileLeading,
  type LeaseRecord,
  type LeaseTimings,
  leaderDeadline,
  microTime,
  type Observed,
  observe,
  recordKey,
  releaseRecord,
  renewRecord,
  takeRecord,
  timingProblems,
  writeDeadline,
} from './lease-logic.ts';

const T: LeaseTimings = DEFAULT_TIMINGS;
const ME = 'pod-a_1234abcd';
const OTHER = 'pod-b_99ff00aa';

function held(by: string, renewTime: string, extra: Partial<LeaseRecord> = {}): LeaseRecord {
  return {
    holderIdentity: by,
    leaseDurationSeconds: 15,
    acquireTime: '2026-12-02T10:00:00.000000Z',
    renewTime,
    leaseTransitions: 3,
    ...extra,
  };
}

/** Reads of the same lease over local time: [local ms, record]; returns what was observed after the last. */
function seen(reads: Array<[number, LeaseRecord]>): Observed {
  let obs: Observed | undefined;
  for (const [at, r] of reads) obs = observe(obs, r, at);
  if (!obs) throw new Error('no reads');
  return obs;
}

describe('timingProblems', () => {
  it('accepts the client-go defaults: 15 s lease, 10 s renew deadline, 2 s retry', () => {
    expect(timingProblems(DEFAULT_TIMINGS)).toEqual([]);
    expect(DEFAULT_TIMINGS).toEqual({
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
    });
  });

  it('rejects a renew deadline that is not below the lease duration, naming both', () => {
    const p = timingProblems({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(/renewDeadlineMs \(10000\) must be less than leaseDurationMs \(10000\)/);
  });

  it('rejects a renew deadline that leaves room for only one jittered retry', () => {
    const p = timingProblems({ leaseDurationMs: 15_000, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 });
    expect(p).toEqual([expect.stringMatching(/renewDeadlineMs \(2400\) must be more than retryPeriodMs/)]);
    expect(timingProblems({ leaseDurationMs: 15_000, renewDeadlineMs: 2_401, retryPeriodMs: 2_000 })).toEqual(
      [],
    );
  });

  it('rejects a lease duration that is not whole seconds, as the Lease stores seconds', () => {
    const p = timingProblems({ leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 200 });
    expect(p).toEqual([expect.stringMatching(/leaseDurationMs must be whole seconds.*1500/)]);
  });

  it('rejects zero, negative and non-finite values, each by name', () => {
    const p = timingProblems({ leaseDurationMs: 0, renewDeadlineMs: -1, retryPeriodMs: Number.NaN });
    expect(p).toHaveLength(3);
    expect(p.join('\n')).toMatch(/leaseDurationMs.*0/);
    expect(p.join('\n')).toMatch(/renewDeadlineMs.*-1/);
    expect(p.join('\n')).toMatch(/retryPeriodMs.*NaN/);
    expect(timingProblems({ ...T, leaseDurationMs: Number.POSITIVE_INFINITY })).toHaveLength(1);
  });
});

describe('observe', () => {
  it('keeps the time a record was first seen while it stays the same', () => {
    const r = held(OTHER, '2026-12-02T10:00:01.000000Z');
    const first = observe(undefined, r, 100);
    expect(first.changedAt).toBe(100);
    const again = observe(first, { ...r }, 5_000);
    expect(again.changedAt).toBe(100);
    expect(again).toBe(first);
  });

  it('restarts the clock on any change of the spec', () => {
    const a = observe(undefined, held(OTHER, '2026-12-02T10:00:01.000000Z'), 100);
    expect(observe(a, held(OTHER, '2026-12-02T10:00:03.000000Z'), 2_100).changedAt).toBe(2_100);
    expect(observe(a, held(ME, '2026-12-02T10:00:01.000000Z'), 2_100).changedAt).toBe(2_100);
    expect(observe(a, held(OTHER, '2026-12-02T10:00:01.000000Z', { leaseTransitions: 4 }), 9).changedAt).toBe(
      9,
    );
    expect(
      observe(a, held(OTHER, '2026-12-02T10:00:01.000000Z', { preferredHolder: 'x' }), 9).changedAt,
    ).toBe(9);
  });

  it('ignores the order fields arrive in', () => {
    const r = held(OTHER, '2026-12-02T10:00:01.000000Z');
    const reordered: LeaseRecord = {
      leaseTransitions: 3,
      renewTime: r.renewTime as string,
      holderIdentity: OTHER,
      acquireTime: r.acquireTime as string,
      leaseDurationSeconds: 15,
    };
    expect(recordKey(reordered)).toBe(recordKey(r));
  });

  it('treats a missing leaseTransitions as 0, like the API server does', () => {
    const { leaseTransitions: _, ...r } = held(OTHER, '2026-12-02T10:00:01.000000Z');
    expect(recordKey(r)).toBe(recordKey({ ...r, leaseTransitions: 0 }));
  });
});

describe('expiry', () => {
  it('runs from when we saw the change, for the holder’s own leaseDurationSeconds', () => {
    const obs = seen([[1_000, held(OTHER, '2026-12-02T10:00:00.000000Z', { leaseDurationSeconds: 20 })]]);
    expect(expiresAt(obs, 15_000)).toBe(21_000);
    expect(isExpired(obs, 20_999, 15_000)).toBe(false);
    expect(isExpired(obs, 21_000, 15_000)).toBe(true);
  });

  it('uses our duration when the record has none or a nonsense one', () => {
    expect(holdForMs({ holderIdentity: OTHER }, 15_000)).toBe(15_000);
    expect(holdForMs({ holderIdentity: OTHER, leaseDurationSeconds: 0 }, 15_000)).toBe(15_000);
    expect(holdForMs({ holderIdentity: OTHER, leaseDurationSeconds: -3 }, 15_000)).toBe(15_000);
    expect(holdForMs({ holderIdentity: OTHER, leaseDurationSeconds: 1 }, 15_000)).toBe(1_000);
  });
});

describe('decideCandidate', () => {
  it('creates the Lease when there is none', () => {
    expect(decideCandidate(undefined, ME, 0, T)).toEqual({ kind: 'create' });
  });

  it('waits while another holder’s lease has not expired, and says for how long', () => {
    const obs = seen([[0, held(OTHER, '2026-12-02T10:00:00.000000Z')]]);
    expect(decideCandidate(obs, ME, 4_000, T)).toEqual({ kind: 'wait', holder: OTHER, expiresInMs: 11_000 });
  });

  it('takes an expired lease and counts a transition', () => {
    const obs = seen([[0, held(OTHER, '2026-12-02T10:00:00.000000Z')]]);
    expect(decideCandidate(obs, ME, 15_000, T)).toEqual({ kind: 'take', reason: 'expired', transitions: 4 });
  });

  it('takes a free (released or never held) lease at once, counting a transition', () => {
    const released = releaseRecord(
      held(OTHER, '2026-12-02T10:00:00.000000Z'),
      Date.parse('2026-12-02T10:01Z'),
    );
    const obs = seen([[0, released]]);
    expect(decideCandidate(obs, ME, 0, T)).toEqual({ kind: 'take', reason: 'free', transitions: 4 });
    const blank = seen([[0, { holderIdentity: '' }]]);
    expect(decideCandidate(blank, ME, 0, T)).toEqual({ kind: 'take', reason: 'free', transitions: 1 });
  });

  it('renews a lease that still names us without counting a transition', () => {
    const obs = seen([[0, held(ME, '2026-12-02T10:00:00.000000Z')]]);
    expect(decideCandidate(obs, ME, 1, T)).toEqual({ kind: 'take', reason: 'ours', transitions: 3 });
  });

  it('keeps waiting as long as the holder keeps renewing', () => {
    const reads: Array<[number, LeaseRecord]> = [];
    for (let i = 0; i <= 30; i++) {
      reads.push([i * 2_000, held(OTHER, `2026-12-02T10:00:${String(i * 2).padStart(2, '0')}.000000Z`)]);
    }
    const obs = seen(reads);
    expect(decideCandidate(obs, ME, 60_000 + 14_999, T).kind).toBe('wait');
    expect(decideCandidate(obs, ME, 60_000 + 15_000, T).kind).toBe('take');
  });

  it('makes a newly started candidate wait a full lease duration, however old renewTime looks', () => {
    // Started at local 50 s; the record's renewTime is an hour old by any clock.
    const obs = seen([[50_000, held(OTHER, '2026-12-02T09:00:00.000000Z')]]);
    expect(decideCandidate(obs, ME, 50_001, T).kind).toBe('wait');
    expect(decideCandidate(obs, ME, 64_999, T).kind).toBe('wait');
    expect(decideCandidate(obs, ME, 65_000, T).kind).toBe('take');
  });
});

describe('decideCandidate under clock skew between nodes', () => {
  it('does not take over from a live leader whose clock is an hour behind ours', () => {
    // The leader's renewTime values are an hour in the past by our wall clock, but they keep changing.
    const reads: Array<[number, LeaseRecord]> = [
      [0, held(OTHER, '2026-12-02T09:00:00.000000Z')],
      [2_000, held(OTHER, '2026-12-02T09:00:02.000000Z')],
      [4_000, held(OTHER, '2026-12-02T09:00:04.000000Z')],
    ];
    expect(decideCandidate(seen(reads), ME, 5_000, T).kind).toBe('wait');
  });

  it('takes over from a dead leader whose clock was an hour ahead of ours, after one lease duration', () => {
    // Its last renewTime is in our future, so renewTime + duration would not pass for another hour.
    const obs = seen([
      [0, held(OTHER, '2026-12-02T11:00:00.000000Z')],
      [2_000, held(OTHER, '2026-12-02T11:00:02.000000Z')],
      [4_000, held(OTHER, '2026-12-02T11:00:02.000000Z')], // it died: no more changes
    ]);
    expect(decideCandidate(obs, ME, 16_999, T).kind).toBe('wait');
    expect(decideCandidate(obs, ME, 17_000, T)).toEqual({ kind: 'take', reason: 'expired', transitions: 4 });
  });

  it('counts a renewTime that moves backwards (the holder’s clock was stepped back) as a renewal', () => {
    const obs = seen([
      [0, held(OTHER, '2026-12-02T10:00:10.000000Z')],
      [2_000, held(OTHER, '2026-12-02T10:00:01.000000Z')],
    ]);
    expect(obs.changedAt).toBe(2_000);
    expect(decideCandidate(obs, ME, 16_999, T).kind).toBe('wait');
  });

  it('judges only by the local clock passed in, never by wall-clock time in the record', () => {
    const a = seen([[7_000, held(OTHER, '1970-01-01T00:00:00.000000Z')]]);
    const b = seen([[7_000, held(OTHER, '2099-01-01T00:00:00.000000Z')]]);
    for (const now of [7_000, 21_999, 22_000, 40_000]) {
      expect(decideCandidate(a, ME, now, T)).toEqual(decideCandidate(b, ME, now, T));
    }
  });
});

describe('candidateDelayMs', () => {
  it('waits the retry period plus up to 20 % jitter', () => {
    expect(candidateDelayMs(T, 0)).toBe(2_000);
    expect(candidateDelayMs(T, 0.5)).toBe(2_200);
    expect(candidateDelayMs(T, 0.999_999)).toBeCloseTo(2_000 * (1 + JITTER), 0);
  });

  it('wakes at the moment the awaited lease expires when that is sooner', () => {
    expect(candidateDelayMs(T, 0.5, 300)).toBe(300);
    expect(candidateDelayMs(T, 0.5, 10_000)).toBe(2_200);
    expect(candidateDelayMs(T, 0.5, -5)).toBe(0);
  });

  it('clamps a random value outside [0, 1)', () => {
    expect(candidateDelayMs(T, -1)).toBe(2_000);
    expect(candidateDelayMs(T, 7)).toBe(2_400);
  });
});

describe('leader deadline', () => {
  it('falls renewDeadline after the last successful write was sent', () => {
    expect(leaderDeadline(1_000, T)).toBe(11_000);
    expect(decideLeader(1_000, 3_000, T)).toEqual({ kind: 'renew', timeoutMs: 8_000 });
    expect(decideLeader(1_000, 10_999, T)).toEqual({ kind: 'renew', timeoutMs: 1 });
    expect(decideLeader(1_000, 11_000, T)).toEqual({ kind: 'give-up' });
  });

  it('always passes before any standby can see the lease expire', () => {
    // The standby saw the write at or after it was sent; the earliest it may take over is then + duration.
    for (const sentAt of [0, 1_234, 99_999]) {
      for (const seenDelay of [0, 1, 500, 3_000]) {
        const obs = seen([[sentAt + seenDelay, held(ME, '2026-12-02T10:00:00.000000Z')]]);
        expect(leaderDeadline(sentAt, T)).toBeLessThan(expiresAt(obs, T.leaseDurationMs));
      }
    }
  });

  it('leaves a margin of leaseDuration − renewDeadline for clocks that run at different rates', () => {
    const margin = T.leaseDurationMs - T.renewDeadlineMs;
    expect(margin).toBe(5_000);
    // The leader's clock may run up to 1.5× slower than the standby's before the two could overlap.
    expect(T.leaseDurationMs / T.renewDeadlineMs).toBe(1.5);
  });
});

describe('judgeWhileLeading', () => {
  it('goes on when the re-read still names us', () => {
    expect(judgeWhileLeading(held(ME, '2026-12-02T10:00:00.000000Z'), ME)).toEqual({ kind: 'ours' });
  });

  it('gives up when someone else holds it, naming them', () => {
    expect(judgeWhileLeading(held(OTHER, '2026-12-02T10:00:00.000000Z'), ME)).toEqual({
      kind: 'lost',
      reason: `the Lease is now held by ${OTHER}`,
      holder: OTHER,
    });
  });

  it('gives up when the lease was cleared or deleted', () => {
    expect(judgeWhileLeading({ holderIdentity: '' }, ME)).toMatchObject({ kind: 'lost', holder: '' });
    expect(judgeWhileLeading(undefined, ME)).toEqual({
      kind: 'lost',
      reason: 'the Lease was deleted',
      holder: '',
    });
  });
});

describe('records written', () => {
  const wall = Date.parse('2026-12-02T10:05:00.123Z');

  it('formats MicroTime with six fraction digits, as the API server requires', () => {
    expect(microTime(wall)).toBe('2026-12-02T10:05:00.123000Z');
    expect(microTime(0)).toBe('1970-01-01T00:00:00.000000Z');
  });

  it('creates a lease held by us with no transitions yet', () => {
    expect(takeRecord({ kind: 'create' }, undefined, ME, wall, T)).toEqual({
      holderIdentity: ME,
      leaseDurationSeconds: 15,
      acquireTime: '2026-12-02T10:05:00.123000Z',
      renewTime: '2026-12-02T10:05:00.123000Z',
      leaseTransitions: 0,
    });
  });

  it('takes over with a new acquireTime and the transition counted', () => {
    const prev = held(OTHER, '2026-12-02T10:00:00.000000Z');
    const w = takeRecord({ kind: 'take', reason: 'expired', transitions: 4 }, prev, ME, wall, T);
    expect(w).toMatchObject({ holderIdentity: ME, acquireTime: microTime(wall), leaseTransitions: 4 });
  });

  it('keeps acquireTime when re-taking a lease that still names us', () => {
    const prev = held(ME, '2026-12-02T10:00:00.000000Z');
    const w = takeRecord({ kind: 'take', reason: 'ours', transitions: 3 }, prev, ME, wall, T);
    expect(w).toMatchObject({
      acquireTime: prev.acquireTime,
      renewTime: microTime(wall),
      leaseTransitions: 3,
    });
  });

  it('renews by moving renewTime only', () => {
    const prev = held(ME, '2026-12-02T10:00:00.000000Z');
    expect(renewRecord(prev, ME, wall, T)).toEqual({
      holderIdentity: ME,
      leaseDurationSeconds: 15,
      acquireTime: prev.acquireTime,
      renewTime: microTime(wall),
      leaseTransitions: 3,
    });
  });

  it('writes our lease duration in whole seconds', () => {
    const t = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };
    expect(takeRecord({ kind: 'create' }, undefined, ME, wall, t).leaseDurationSeconds).toBe(3);
  });

  it('releases with no holder and a 1 s duration, keeping the transition count', () => {
    const prev = held(ME, '2026-12-02T10:00:00.000000Z');
    expect(releaseRecord(prev, wall)).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: microTime(wall),
      renewTime: microTime(wall),
      leaseTransitions: 3,
    });
  });

  it('fences writes at the renew deadline, and never within a tenth of the lease of its expiry', () => {
    expect(writeDeadline(1_000, T)).toBe(leaderDeadline(1_000, T));
    // A renew deadline set close to the lease duration leaves the margin to the fence.
    const tight = { leaseDurationMs: 10_000, renewDeadlineMs: 9_900, retryPeriodMs: 1_000 };
    expect(writeDeadline(0, tight)).toBe(9_000);
    expect(writeDeadline(0, tight)).toBeLessThan(leaderDeadline(0, tight));
  });
});
