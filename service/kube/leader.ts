// Leader election on a coordination.k8s.io/v1 Lease (docs/adr/0005). Every replica runs one elector;
// the one holding the Lease is the leader and is the only one that executes reloads and writes the
// ledger. The decisions are in core/lease-logic.ts; this file does the I/O, the timers and the callbacks.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleepFor } from 'node:timers/promises';
import type { V1Lease } from '@kubernetes/client-node';
import {
  type CandidateDecision,
  candidateDelayMs,
  DEFAULT_TIMINGS,
  decideCandidate,
  decideLeader,
  judgeWhileLeading,
  type LeaseRecord,
  type LeaseTimings,
  type LeaseWrite,
  leaderDeadline,
  type Observed,
  observe,
  releaseRecord,
  renewRecord,
  takeRecord,
  timingProblems,
  writeDeadline,
} from '../core/lease-logic.ts';
import type { ClusterAccess } from './access.ts';
import { type CoordinationApi, coordinationApi, type RequestOptions } from './api.ts';

/** Where the elector reports; a pino Logger fits. */
export interface LeaderLog {
  debug(fields: Record<string, unknown>, msg: string): void;
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
}

export interface LeaderElectionOptions {
  /** Namespace of the Lease: the service's own (release) namespace. */
  namespace: string;
  /** Name of the Lease. */
  name: string;
  /** Unique per process. Default: the host name (the pod name in a cluster) plus a random suffix. */
  identity?: string;
  /** Default 15 s; whole seconds. */
  leaseDurationMs?: number;
  /** Default 10 s; must be less than leaseDurationMs. */
  renewDeadlineMs?: number;
  /** Default 2 s. */
  retryPeriodMs?: number;
  /**
   * Called when this process becomes the leader. The signal aborts the moment leadership ends, for
   * whatever reason; work guarded by the lease must stop then. Called again for each new term.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /**
   * Called once at the end of each term, right after the signal aborts. On stop() it is awaited before
   * the lease is released; after it returns, the elector may try to lead again.
   */
  onStoppedLeading(): void | Promise<void>;
  /** Called when the observed holder changes to a new, non-empty identity (ours included). */
  onNewLeader?(identity: string): void;
  /**
   * Asked before each attempt to take the lease (never before a renewal): false waits as a candidate
   * does while the lease is held. Hub mode's fair share (service/hub/shares.ts).
   */
  mayTake?(): boolean;
  /**
   * What this process already saw of the Lease, on this process's clock (hub mode: its Lease watch,
   * service/hub/lease-watch.ts). The first read keeps its `changedAt` when the record is unchanged, so a
   * Lease seen unrenewed for a lease duration is taken at once instead of a lease duration later.
   */
  seen?: Observed;
  log: LeaderLog;
}

export interface LeaderElection {
  readonly identity: string;
  /** True while this process leads; false as soon as its renew deadline passes, even before the timer runs. */
  isLeader(): boolean;
  /**
   * May a write go out now? True while leading and before the write fence deadline (core/lease-logic.ts,
   * writeDeadline), judged on the clock at the call, whatever the timers have done (an event loop that
   * stalled, a process that was stopped). Checked immediately before each leader write is sent.
   */
  mayWrite(): boolean;
  /** The holder last seen in the Lease ('' when free), or undefined before the first read. */
  leader(): string | undefined;
  /** Stops electing. If this process holds the lease: ends the term, awaits onStoppedLeading, then releases. */
  stop(): Promise<void>;
  /**
   * Gives the lease up while staying a candidate: ends the current term (if any), awaits
   * onStoppedLeading, releases the Lease if it still names us, and does not try to lead again for
   * `holdOffMs`. For a leader that cannot act (its start failed): holding the Lease would keep every
   * other replica from acting.
   */
  resign(reason: string, holdOffMs: number): Promise<void>;
}

/** The reason a term's signal carries when it aborts. */
export class LeadershipLost extends Error {
  override name = 'LeadershipLost';
}

/** A leader write refused by the write fence: this replica does not hold the Lease by the clock. */
export class NotLeading extends Error {
  override name = 'NotLeading';
}

/**
 * The write fence of a process that elects (docs/adr/0027): throws NotLeading unless `election` may
 * write now. For writeGatedAccess's `fence`, which runs it immediately before each write goes out.
 */
export function leaderWriteFence(election: () => LeaderElection | undefined): () => void {
  return () => {
    const e = election();
    if (e && !e.mayWrite()) {
      throw new NotLeading(`not sent: ${e.identity} does not hold the lease (by the clock) any more`);
    }
  };
}

/** A new leader's caches did not sync in time (--leader-cache-sync-timeout): it releases the Lease. */
export class CachesNotSynced extends Error {
  override name = 'CachesNotSynced';
}

/** Resolves as `p` does, or rejects with `onTimeout()` after `ms` (the timer does not keep the process up). */
export async function within<T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
    timer.unref?.();
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

export function defaultIdentity(): string {
  return `${hostname()}_${randomBytes(4).toString('hex')}`;
}

/**
 * Starts electing at once and returns a handle; it never throws after returning. Invalid timings throw
 * here, naming the option.
 */
export function startLeaderElection(
  client: ClusterAccess | CoordinationApi,
  opts: LeaderElectionOptions,
): LeaderElection {
  const api = 'applyToHTTPSOptions' in client ? coordinationApi(client) : client;
  return new Elector(api, opts);
}

interface Term {
  ctl: AbortController;
  /** Local monotonic ms at which the last successful write of the lease was sent. */
  writeSentAt: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** A 409 on a renewal whose re-read showed the lease is no longer ours. */
class LostOnRead extends Error {}

const clock = (): number => performance.now();

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function messageOf(err: unknown): string {
  const status = statusOf(err);
  const body = (err as { body?: unknown } | null)?.body;
  if (status !== undefined && typeof body === 'string') {
    try {
      const m = (JSON.parse(body) as { message?: unknown }).message;
      if (typeof m === 'string') return `${status}: ${m}`;
    } catch {
      // The body is not a Status object: fall through to the error's own message.
    }
  }
  return err instanceof Error ? err.message : String(err);
}

/** client-node hands MicroTime fields back as the server's strings (no type map entry); accept a Date too. */
function timeText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v instanceof Date) return v.toISOString();
  return undefined;
}

/** A Lease's record in the form the elector keys it (its raw JSON, as a watch of Leases reads it too). */
export function recordOf(lease: V1Lease): LeaseRecord {
  const s = lease.spec ?? {};
  return {
    holderIdentity: s.holderIdentity ?? '',
    ...(s.leaseDurationSeconds !== undefined ? { leaseDurationSeconds: s.leaseDurationSeconds } : {}),
    ...(timeText(s.acquireTime) !== undefined ? { acquireTime: timeText(s.acquireTime) } : {}),
    ...(timeText(s.renewTime) !== undefined ? { renewTime: timeText(s.renewTime) } : {}),
    ...(s.leaseTransitions !== undefined ? { leaseTransitions: s.leaseTransitions } : {}),
    ...(s.preferredHolder !== undefined ? { preferredHolder: s.preferredHolder } : {}),
    ...(s.strategy !== undefined ? { strategy: s.strategy } : {}),
  };
}

/**
 * The spec to send. MicroTime fields go as strings: client-node types them as Date but serializes
 * them verbatim, and a plain Date would go out with 3 fraction digits, which the API server rejects.
 */
function specOf(w: LeaseWrite, base: V1Lease['spec']): NonNullable<V1Lease['spec']> {
  return {
    ...base,
    holderIdentity: w.holderIdentity,
    leaseDurationSeconds: w.leaseDurationSeconds,
    acquireTime: w.acquireTime as unknown as Date,
    renewTime: w.renewTime as unknown as Date,
    leaseTransitions: w.leaseTransitions,
  };
}

/** Per-call options that let `signal` abort the HTTP request itself. */
/** Lets our API client abort the request; `bounded` below settles the call either way. */
function abortable(signal: AbortSignal): RequestOptions {
  return { signal };
}

/** Runs `op`, rejecting with the signal's reason the moment it aborts, even if `op` is stuck elsewhere. */
async function bounded<T>(signal: AbortSignal, op: () => Promise<T>): Promise<T> {
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([op(), aborted]);
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
  }
}

/** AbortSignal.timeout takes whole ms only. */
function timeout(ms: number): AbortSignal {
  return AbortSignal.timeout(Math.max(1, Math.ceil(ms)));
}

/** Sleeps, returning early (without throwing) when the signal aborts. */
async function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  await sleepFor(ms, undefined, { signal }).catch(() => undefined);
}

class Elector implements LeaderElection {
  readonly identity: string;
  readonly #api: CoordinationApi;
  readonly #o: LeaderElectionOptions;
  readonly #t: LeaseTimings;
  readonly #fields: Record<string, string>;
  readonly #stopCtl = new AbortController();
  /** The Lease as last read or written, for its resourceVersion; undefined when it did not exist. */
  #lease: V1Lease | undefined;
  #observed: Observed | undefined;
  #reportedLeader: string | undefined;
  #term: Term | undefined;
  /** Settles when the last term's onStoppedLeading has returned; a new term waits for it. */
  #termEnded: Promise<void> = Promise.resolve();
  #loop: Promise<void>;
  #stopping: Promise<void> | undefined;
  /** Local monotonic ms before which this candidate does not try to take the lease (after resign()). */
  #holdOffUntil = 0;

  constructor(api: CoordinationApi, o: LeaderElectionOptions) {
    this.#t = {
      leaseDurationMs: o.leaseDurationMs ?? DEFAULT_TIMINGS.leaseDurationMs,
      renewDeadlineMs: o.renewDeadlineMs ?? DEFAULT_TIMINGS.renewDeadlineMs,
      retryPeriodMs: o.retryPeriodMs ?? DEFAULT_TIMINGS.retryPeriodMs,
    };
    const problems = timingProblems(this.#t);
    if (problems.length > 0) throw new Error(`leader election: ${problems.join('; ')}`);
    if (!o.namespace || !o.name) throw new Error('leader election: the Lease needs a namespace and a name');
    if (o.identity === '') throw new Error('leader election: identity must not be empty');
    this.identity = o.identity ?? defaultIdentity();
    this.#api = api;
    this.#o = o;
    this.#fields = { lease: `${o.namespace}/${o.name}`, identity: this.identity };
    this.#observed = o.seen;
    o.log.info({ ...this.#fields, ...this.#t }, 'leader election started');
    this.#loop = this.#run();
  }

  isLeader(): boolean {
    const term = this.#term;
    if (!term) return false;
    if (clock() >= leaderDeadline(term.writeSentAt, this.#t)) {
      // The timer has not run yet (a busy event loop); the answer must not wait for it.
      this.#lose(term, 'no renewal succeeded within the renew deadline');
      return false;
    }
    return true;
  }

  mayWrite(): boolean {
    if (!this.isLeader()) return false;
    const term = this.#term as Term;
    return clock() < writeDeadline(term.writeSentAt, this.#t);
  }

  leader(): string | undefined {
    return this.#observed ? this.#observed.record.holderIdentity : undefined;
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.#stopCtl.abort(new Error('leader election is stopping'));
      if (this.#term) this.#lose(this.#term, 'stop() was called');
      await this.#loop;
      await this.#termEnded;
      await this.#release();
      this.#o.log.info(this.#fields, 'leader election stopped');
    })();
    return this.#stopping;
  }

  async resign(reason: string, holdOffMs: number): Promise<void> {
    if (this.#stopping) return this.#stopping;
    this.#holdOffUntil = Math.max(this.#holdOffUntil, clock() + Math.max(0, holdOffMs));
    const term = this.#term;
    if (term) {
      this.#o.log.warn({ ...this.#fields, reason, holdOffMs }, 'resigning the lease');
      this.#lose(term, `resigned: ${reason}`);
    }
    await this.#termEnded;
    await this.#release();
  }

  async #run(): Promise<void> {
    const stop = this.#stopCtl.signal;
    while (!stop.aborted) {
      try {
        await this.#step(stop);
      } catch (err) {
        // #step handles every API failure itself; this is a bug. Keep electing: a term with no
        // renewals ends at its deadline, so safety does not depend on this loop.
        this.#o.log.error({ ...this.#fields, err: messageOf(err) }, 'leader election step failed');
        await sleep(this.#t.retryPeriodMs, stop);
      }
    }
  }

  async #step(stop: AbortSignal): Promise<void> {
    const term = this.#term;
    if (term) {
      await sleep(this.#t.retryPeriodMs, AbortSignal.any([stop, term.ctl.signal]));
      if (this.#term === term && !stop.aborted) await this.#renew(term);
      return;
    }
    await this.#termEnded;
    if (stop.aborted) return;
    const holdOff = this.#holdOffUntil - clock();
    if (holdOff > 0) {
      await sleep(holdOff, stop);
      return;
    }
    let delay: number;
    try {
      delay = await this.#tryAcquire();
    } catch (err) {
      if (stop.aborted) return;
      delay = candidateDelayMs(this.#t, Math.random());
      this.#o.log.warn(
        { ...this.#fields, err: messageOf(err), retryInMs: Math.round(delay) },
        'could not read or take the lease',
      );
    }
    if (delay > 0) await sleep(delay, stop);
  }

  /** One candidate attempt. Returns 0 once leading, else how long to wait before the next attempt. */
  async #tryAcquire(): Promise<number> {
    const signal = AbortSignal.any([this.#stopCtl.signal, timeout(this.#t.renewDeadlineMs)]);
    this.#see(await this.#get(signal), clock());
    const d: CandidateDecision = decideCandidate(this.#observed, this.identity, clock(), this.#t);
    if (d.kind === 'wait') return candidateDelayMs(this.#t, Math.random(), d.expiresInMs);
    if (this.#o.mayTake && !this.#o.mayTake()) return candidateDelayMs(this.#t, Math.random());
    const sentAt = clock();
    const w = takeRecord(d, this.#observed?.record, this.identity, Date.now(), this.#t);
    let written: V1Lease;
    try {
      written =
        d.kind === 'create'
          ? await bounded(signal, () =>
              this.#api.createNamespacedLease(
                {
                  namespace: this.#o.namespace,
                  body: { metadata: { name: this.#o.name }, spec: specOf(w, undefined) },
                },
                abortable(signal),
              ),
            )
          : await this.#replace(this.#lease as V1Lease, w, signal);
    } catch (err) {
      if (statusOf(err) !== 409) throw err;
      // Another candidate wrote first (created it, or changed it since our read): it won this round.
      this.#o.log.debug({ ...this.#fields }, 'another candidate took the lease first');
      return candidateDelayMs(this.#t, Math.random());
    }
    this.#see(written, clock());
    if (this.#stopCtl.signal.aborted) return 0; // stop() releases what we just took
    this.#begin(sentAt, d);
    return 0;
  }

  #begin(sentAt: number, d: Extract<CandidateDecision, { kind: 'create' | 'take' }>): void {
    const ctl = new AbortController();
    const term: Term = { ctl, writeSentAt: sentAt };
    this.#term = term;
    this.#arm(term);
    this.#o.log.info(
      {
        ...this.#fields,
        how: d.kind === 'create' ? 'created' : d.reason,
        transitions: this.#observed?.record.leaseTransitions ?? 0,
      },
      'became the leader',
    );
    try {
      const r = this.#o.onStartedLeading(ctl.signal);
      if (r instanceof Promise) {
        r.catch((err: unknown) =>
          this.#o.log.error({ ...this.#fields, err: messageOf(err) }, 'onStartedLeading failed'),
        );
      }
    } catch (err) {
      this.#o.log.error({ ...this.#fields, err: messageOf(err) }, 'onStartedLeading failed');
    }
  }

  /** (Re)sets the timer that ends the term at the renew deadline, whatever the renew loop is doing. */
  #arm(term: Term): void {
    clearTimeout(term.timer);
    const left = leaderDeadline(term.writeSentAt, this.#t) - clock();
    term.timer = setTimeout(() => this.#lose(term, 'no renewal succeeded within the renew deadline'), left);
  }

  async #renew(term: Term): Promise<void> {
    const d = decideLeader(term.writeSentAt, clock(), this.#t);
    if (d.kind === 'give-up') {
      this.#lose(term, 'no renewal succeeded within the renew deadline');
      return;
    }
    const signal = AbortSignal.any([this.#stopCtl.signal, term.ctl.signal, timeout(d.timeoutMs)]);
    try {
      let sentAt = clock();
      let written: V1Lease;
      try {
        written = await this.#replace(
          this.#lease as V1Lease,
          renewRecord(this.#observed?.record as LeaseRecord, this.identity, Date.now(), this.#t),
          signal,
        );
      } catch (err) {
        const status = statusOf(err);
        if (status !== 409 && status !== 404) throw err;
        // The Lease changed under us (or is gone): read it, and go on only if it still names us.
        const fresh = await this.#get(signal);
        this.#see(fresh, clock());
        const j = judgeWhileLeading(fresh ? recordOf(fresh) : undefined, this.identity);
        if (j.kind === 'lost') throw new LostOnRead(j.reason);
        sentAt = clock();
        written = await this.#replace(
          fresh as V1Lease,
          renewRecord(recordOf(fresh as V1Lease), this.identity, Date.now(), this.#t),
          signal,
        );
      }
      if (this.#term !== term) return; // the term ended while the write was in flight
      this.#see(written, clock());
      term.writeSentAt = sentAt;
      this.#arm(term);
    } catch (err) {
      if (this.#term !== term || this.#stopCtl.signal.aborted) return;
      if (err instanceof LostOnRead) {
        this.#lose(term, err.message);
        return;
      }
      const deadlineInMs = Math.round(leaderDeadline(term.writeSentAt, this.#t) - clock());
      this.#o.log.warn(
        { ...this.#fields, err: messageOf(err), retryInMs: this.#t.retryPeriodMs, deadlineInMs },
        'could not renew the lease',
      );
    }
  }

  /** Ends a term at once: isLeader() turns false, the signal aborts, onStoppedLeading runs. */
  #lose(term: Term, reason: string): void {
    if (this.#term !== term) return;
    this.#term = undefined;
    clearTimeout(term.timer);
    const stopping = this.#stopCtl.signal.aborted;
    const f = { ...this.#fields, reason };
    if (stopping) this.#o.log.info(f, 'stopped leading');
    else this.#o.log.warn(f, 'lost the lease; stopped leading');
    term.ctl.abort(new LeadershipLost(`leadership of ${this.#fields.lease} ended: ${reason}`));
    // Run from a microtask, not inside whatever called isLeader() or the timer that ended the term.
    this.#termEnded = Promise.resolve()
      .then(() => this.#o.onStoppedLeading())
      .catch((err: unknown) => {
        this.#o.log.error({ ...this.#fields, err: messageOf(err) }, 'onStoppedLeading failed');
      });
  }

  /** Gives the lease up if the Lease on the server still names us, so a standby takes over at once. */
  async #release(): Promise<void> {
    const signal = timeout(this.#t.renewDeadlineMs);
    try {
      for (let attempt = 0; attempt < 3; attempt++) {
        const lease = await this.#get(signal);
        if (!lease || recordOf(lease).holderIdentity !== this.identity) return;
        try {
          this.#see(await this.#replace(lease, releaseRecord(recordOf(lease), Date.now()), signal), clock());
          this.#o.log.info(this.#fields, 'released the lease');
          return;
        } catch (err) {
          if (statusOf(err) !== 409) throw err;
        }
      }
      throw new Error('the Lease kept changing while it was being released');
    } catch (err) {
      this.#o.log.warn(
        { ...this.#fields, err: messageOf(err), takeoverInMs: this.#t.leaseDurationMs },
        'could not release the lease; a standby takes over once it expires',
      );
    }
  }

  async #get(signal: AbortSignal): Promise<V1Lease | undefined> {
    try {
      return await bounded(signal, () =>
        this.#api.readNamespacedLease(
          { namespace: this.#o.namespace, name: this.#o.name },
          abortable(signal),
        ),
      );
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  /** PUT with the resourceVersion of `base`, so a concurrent writer makes this fail with 409. */
  #replace(base: V1Lease, w: LeaseWrite, signal: AbortSignal): Promise<V1Lease> {
    const body: V1Lease = { ...base, spec: specOf(w, base.spec) };
    return bounded(signal, () =>
      this.#api.replaceNamespacedLease(
        { namespace: this.#o.namespace, name: this.#o.name, body },
        abortable(signal),
      ),
    );
  }

  /** Records a read or write of the Lease (undefined: it does not exist) at local time `now`. */
  #see(lease: V1Lease | undefined, now: number): void {
    this.#lease = lease;
    if (!lease) {
      this.#observed = undefined;
      return;
    }
    this.#observed = observe(this.#observed, recordOf(lease), now);
    const holder = this.#observed.record.holderIdentity;
    if (holder !== '' && holder !== this.#reportedLeader) {
      this.#reportedLeader = holder;
      this.#o.log.info({ ...this.#fields, leader: holder }, 'new leader observed');
      try {
        this.#o.onNewLeader?.(holder);
      } catch (err) {
        this.#o.log.error({ ...this.#fields, err: messageOf(err) }, 'onNewLeader failed');
      }
    }
  }
}
