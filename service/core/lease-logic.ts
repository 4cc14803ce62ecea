// The decisions of Lease-based leader election (docs/adr/0005), as pure functions of what was read
// and a local monotonic clock: when a candidate may take the lease, what it writes, and when a leader
// must stop acting. Like client-go, expiry is never judged from the renewTime another node wrote with
// its own clock, only from when *this* process last saw the record change, so clock skew between nodes
// cannot make a standby take over early or a dead leader's lease look valid forever.

export interface LeaseTimings {
  /** How long a standby waits, after it last saw the record change, before it may take the lease. */
  leaseDurationMs: number;
  /** How long a leader keeps acting without a successful renewal; then it stops at once. */
  renewDeadlineMs: number;
  /** The pause between renewals, and between a candidate's attempts (plus jitter). */
  retryPeriodMs: number;
}

export const DEFAULT_TIMINGS: Readonly<LeaseTimings> = Object.freeze({
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
});

/** A candidate waits retryPeriod × (1 + JITTER × random) between attempts, so candidates do not poll in step. */
export const JITTER = 0.2;

/**
 * What is wrong with a set of timings, in words naming the option; empty when they are usable.
 * renewDeadline < leaseDuration is what keeps two leaders apart: a leader stops acting renewDeadline after
 * it last *sent* a successful renewal, while a standby waits leaseDuration from when it *saw* it, which is
 * later. The gap between them is the tolerance for clocks running at different rates and for a process
 * stalled before its give-up timer fires.
 */
export function timingProblems(t: LeaseTimings): string[] {
  const problems: string[] = [];
  const names: Array<keyof LeaseTimings> = ['leaseDurationMs', 'renewDeadlineMs', 'retryPeriodMs'];
  for (const k of names) {
    if (!Number.isFinite(t[k]) || t[k] <= 0)
      problems.push(`${k} must be a positive number of ms, got ${t[k]}`);
  }
  if (problems.length > 0) return problems;
  if (t.leaseDurationMs % 1000 !== 0) {
    problems.push(
      `leaseDurationMs must be whole seconds (the Lease stores leaseDurationSeconds), got ${t.leaseDurationMs}`,
    );
  }
  if (t.renewDeadlineMs >= t.leaseDurationMs) {
    problems.push(
      `renewDeadlineMs (${t.renewDeadlineMs}) must be less than leaseDurationMs (${t.leaseDurationMs}), ` +
        'or a leader could still act after a standby took over',
    );
  }
  if (t.renewDeadlineMs <= t.retryPeriodMs * (1 + JITTER)) {
    problems.push(
      `renewDeadlineMs (${t.renewDeadlineMs}) must be more than retryPeriodMs × ${1 + JITTER} ` +
        `(${t.retryPeriodMs * (1 + JITTER)}), or one slow attempt loses the lease`,
    );
  }
  return problems;
}

/** The LeaseSpec fields that take part in the election, as read from the API server. */
export interface LeaseRecord {
  /** '' when nobody holds the lease (never set, or released). */
  holderIdentity: string;
  leaseDurationSeconds?: number;
  /** RFC 3339 with microseconds, as the API server writes MicroTime; only compared, never trusted. */
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
  preferredHolder?: string;
  strategy?: string;
}

/** What this process has seen of the lease: the record, and when it last saw it change. */
export interface Observed {
  record: LeaseRecord;
  /** Canonical form of the record; a different key is a change. */
  key: string;
  /** Local monotonic ms at which this process first saw the record as it is now. */
  changedAt: number;
}

/** The record in a fixed field order, so equal records give equal keys whatever order they came in. */
export function recordKey(r: LeaseRecord): string {
  return JSON.stringify([
    r.holderIdentity,
    r.leaseDurationSeconds ?? null,
    r.acquireTime ?? null,
    r.renewTime ?? null,
    r.leaseTransitions ?? 0,
    r.preferredHolder ?? null,
    r.strategy ?? null,
  ]);
}

/**
 * Folds a fresh read into what was seen before. Only a change of the spec counts as a renewal, so an
 * unchanged record keeps its changedAt however often it is read; the resourceVersion is left out on
 * purpose, or anyone editing the Lease's labels would keep a dead holder's lease alive.
 */
export function observe(prev: Observed | undefined, record: LeaseRecord, now: number): Observed {
  const key = recordKey(record);
  if (prev && prev.key === key) return prev;
  return { record, key, changedAt: now };
}

/**
 * How long the record's holder may go without renewing: its own leaseDurationSeconds (so a released
 * lease, written with 1 s, is free almost at once), else ours when the field is missing or invalid.
 */
export function holdForMs(r: LeaseRecord, fallbackMs: number): number {
  const s = r.leaseDurationSeconds;
  return typeof s === 'number' && Number.isFinite(s) && s > 0 ? s * 1000 : fallbackMs;
}

/** Local monotonic ms at which the observed lease expires, unless it changes again before then. */
export function expiresAt(obs: Observed, fallbackMs: number): number {
  return obs.changedAt + holdForMs(obs.record, fallbackMs);
}

export function isExpired(obs: Observed, now: number, fallbackMs: number): boolean {
  return now >= expiresAt(obs, fallbackMs);
}

export type TakeReason = 'free' | 'expired' | 'ours';

export type CandidateDecision =
  /** No Lease exists: create it, holding it. */
  | { kind: 'create' }
  /** Write ourselves as the holder over the record read (with its resourceVersion). */
  | { kind: 'take'; reason: TakeReason; transitions: number }
  /** Someone else holds a lease that has not expired in our eyes. */
  | { kind: 'wait'; holder: string; expiresInMs: number };

/**
 * Whether a candidate may take the lease it just read (`obs`, undefined when the Lease does not exist).
 * A record naming us is ours to renew (a restarted process with a stable identity, or a leader that
 * gave up locally while its write still stood): nobody else can believe they lead while it names us.
 */
export function decideCandidate(
  obs: Observed | undefined,
  identity: string,
  now: number,
  t: LeaseTimings,
): CandidateDecision {
  if (!obs) return { kind: 'create' };
  const r = obs.record;
  const transitions = r.leaseTransitions ?? 0;
  if (r.holderIdentity === identity) return { kind: 'take', reason: 'ours', transitions };
  if (r.holderIdentity === '') return { kind: 'take', reason: 'free', transitions: transitions + 1 };
  if (isExpired(obs, now, t.leaseDurationMs)) {
    return { kind: 'take', reason: 'expired', transitions: transitions + 1 };
  }
  return {
    kind: 'wait',
    holder: r.holderIdentity,
    expiresInMs: expiresAt(obs, t.leaseDurationMs) - now,
  };
}

/**
 * How long a candidate sleeps before its next attempt: retryPeriod with jitter, but no later than the
 * moment the lease it waits for expires, so a dead leader is replaced as soon as the rules allow.
 * `random` is in [0, 1).
 */
export function candidateDelayMs(t: LeaseTimings, random: number, expiresInMs?: number): number {
  const jittered = t.retryPeriodMs * (1 + JITTER * Math.min(Math.max(random, 0), 1));
  if (expiresInMs === undefined) return jittered;
  return Math.max(0, Math.min(jittered, expiresInMs));
}

/**
 * The local monotonic ms at which a leader must stop acting: renewDeadline after it *sent* its last
 * successful write. The API server applied that write after it was sent, and a standby saw it later
 * still, so the standby's leaseDuration runs from a later point than this deadline does.
 */
export function leaderDeadline(lastWriteSentAt: number, t: LeaseTimings): number {
  return lastWriteSentAt + t.renewDeadlineMs;
}

/**
 * The least share of the lease duration kept between a leader's last write and the earliest moment a
 * standby may take over (docs/adr/0027): it absorbs a clock that runs slow against the standby's (NTP
 * slews by far less than 10%) and the write's own way to the API server.
 */
export const WRITE_MARGIN_RATIO = 0.1;

/**
 * The local monotonic ms after which a leader must not send any write (the write fence, checked
 * immediately before each write goes out, docs/adr/0027). A standby may take over leaseDuration after
 * it saw our last renewal, which was after we sent it (`lastWriteSentAt`, on the same clock as the
 * renewTime we wrote, but monotonic); we stop writing a margin before that: the renew deadline, and
 * never later than WRITE_MARGIN_RATIO of the lease duration before the lease can expire.
 */
export function writeDeadline(lastWriteSentAt: number, t: LeaseTimings): number {
  return lastWriteSentAt + Math.min(t.renewDeadlineMs, t.leaseDurationMs * (1 - WRITE_MARGIN_RATIO));
}

export type LeaderDecision =
  /** Renew now; the attempt must end within timeoutMs, when the deadline passes. */
  { kind: 'renew'; timeoutMs: number } | { kind: 'give-up' };

export function decideLeader(lastWriteSentAt: number, now: number, t: LeaseTimings): LeaderDecision {
  const left = leaderDeadline(lastWriteSentAt, t) - now;
  return left > 0 ? { kind: 'renew', timeoutMs: left } : { kind: 'give-up' };
}

export type LeaderJudgement = { kind: 'ours' } | { kind: 'lost'; reason: string; holder: string };

/**
 * Judges a fresh read of the lease by its leader (after a 409 on renewal): still ours, so retry with
 * the new resourceVersion; or lost, so stop acting at once rather than wait for the renew deadline.
 */
export function judgeWhileLeading(record: LeaseRecord | undefined, identity: string): LeaderJudgement {
  if (!record) return { kind: 'lost', reason: 'the Lease was deleted', holder: '' };
  if (record.holderIdentity === identity) return { kind: 'ours' };
  if (record.holderIdentity === '') {
    return { kind: 'lost', reason: 'the Lease was released by someone else', holder: '' };
  }
  return {
    kind: 'lost',
    reason: `the Lease is now held by ${record.holderIdentity}`,
    holder: record.holderIdentity,
  };
}

/** What to write into LeaseSpec. Times are MicroTime strings, which is what the API server accepts. */
export interface LeaseWrite {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

/**
 * A wall-clock time as metav1.MicroTime: RFC 3339 with exactly six fraction digits. The API server
 * rejects the three digits of Date#toISOString with 400 ("cannot parse .440Z as .000000").
 */
export function microTime(wallMs: number): string {
  const iso = new Date(wallMs).toISOString();
  return `${iso.slice(0, -1)}000Z`;
}

/** The record that takes the lease, from a 'create' or 'take' decision. */
export function takeRecord(
  d: Extract<CandidateDecision, { kind: 'create' | 'take' }>,
  prev: LeaseRecord | undefined,
  identity: string,
  wallMs: number,
  t: LeaseTimings,
): LeaseWrite {
  const now = microTime(wallMs);
  const keep = d.kind === 'take' && d.reason === 'ours' && prev?.acquireTime !== undefined;
  return {
    holderIdentity: identity,
    leaseDurationSeconds: t.leaseDurationMs / 1000,
    acquireTime: keep ? (prev?.acquireTime as string) : now,
    renewTime: now,
    leaseTransitions: d.kind === 'create' ? 0 : d.transitions,
  };
}

/** The record a leader writes to renew: only renewTime moves (and our duration, should it differ). */
export function renewRecord(
  prev: LeaseRecord,
  identity: string,
  wallMs: number,
  t: LeaseTimings,
): LeaseWrite {
  const now = microTime(wallMs);
  return {
    holderIdentity: identity,
    leaseDurationSeconds: t.leaseDurationMs / 1000,
    acquireTime: prev.acquireTime ?? now,
    renewTime: now,
    leaseTransitions: prev.leaseTransitions ?? 0,
  };
}

/**
 * The record that gives the lease up: no holder, and a 1 s duration, so a standby takes it at its next
 * attempt instead of waiting out a full leaseDuration (client-go's release writes the same).
 */
export function releaseRecord(prev: LeaseRecord, wallMs: number): LeaseWrite {
  const now = microTime(wallMs);
  return {
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: now,
    renewTime: now,
    leaseTransitions: prev.leaseTransitions ?? 0,
  };
}
