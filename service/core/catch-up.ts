// What counts as a change made while the service was down (docs/catch-up.md). Pure: the start-up
// catch-up gathers the facts (the ledger entry, the configs' write times, the pods' creation times) and
// this decides.
//
// The ledger is keyed by name, so a digest that differs from the recorded one says only "the object of
// this name holds other data than the one we last applied". It does not say that the running pods hold
// old data: a namespace deleted and created again while we were down (an ApplicationSet preview, a
// restore from backup) has new configs *and* new pods that already read them. And under an HMAC key we
// cannot compare with (a ledger written before key fingerprints existed, or with another key), every
// digest differs whether or not any data changed.
//
// So the pods decide. A workload needs a reload for a config only if some pod a reload would replace was
// created before that config's data last changed. We did not see the change, so we take the newest
// write time of the config (its newest managedFields time, or its creationTimestamp when the object is
// new) as an upper bound of when its data changed. Both are whole seconds, as a pod's creationTimestamp
// is, so a pod created in the same second as the write may predate it: a tie counts as "before".

import type { LedgerEntry } from './ledger-entry.ts';
import { REQUEST, type Verdict, type VerdictOptions, verdict } from './plan.ts';
import type { WorkloadKind } from './types.ts';

/**
 * How the ledger's digests relate to our HMAC key: made with it (`same`), with another key (`other`:
 * a shard names another fingerprint), or with a key we cannot tell (`unknown`: a shard written before
 * fingerprints were recorded). Equal digests prove equal data under any key; different ones prove a
 * change only under `same`.
 */
export type KeyState = 'same' | 'other' | 'unknown';

/** What the catch-up knows of one config as it is now. */
export interface ConfigFacts {
  uid: string;
  /** The newest write of the object (ms, whole seconds), or undefined when it cannot be told. */
  writtenAtMs: number | undefined;
  /** True when its newest write is in its creation's second: it was never written after it was created. */
  onlyCreated?: boolean;
  /**
   * True when every use of it by the workload's pods is required (not `optional`): a pod's containers
   * do not start until it exists, so a pod never ran without it.
   */
  required?: boolean;
}

export interface CatchUpInput {
  kind: WorkloadKind;
  /** The workload's uid now. */
  uid: string;
  /** What the workload sees now: configId → digest (plan.ts watchedSet). */
  set: Record<string, string>;
  entry: LedgerEntry | undefined;
  key: KeyState;
  /** The config of an id as it is now; undefined when it does not exist (deleted) or is a pseudo-config. */
  config(id: string): ConfigFacts | undefined;
  /**
   * The creationTimestamps (ms) of the pods a reload would replace, or undefined when the workload is
   * not judged by its pods (its kind has none to judge, see judgedByPods). Needed only when
   * needsPods() says so.
   */
  podsCreatedMs: readonly number[] | undefined;
  /** --reload-on-delete: off, a deleted config is no change here either (core/plan.ts verdict). */
  opts?: VerdictOptions;
  /** The workload's creationTimestamp (ms), when known. */
  createdMs?: number;
  /**
   * The ledger's newest write (ms, whole seconds): undefined when it was never written (no shard: a first
   * install) or the time cannot be told. See createdWhileDown().
   */
  ledgerWrittenMs?: number;
  /**
   * The creationTimestamp (ms) of the workload's namespace, when it can be read: a namespace created
   * after the ledger's newest write was created while the service was down (see sameSecond).
   */
  namespaceCreatedMs?: number;
}

export type CatchUp =
  | Exclude<Verdict, { kind: 'reload' }>
  | { kind: 'reload'; changed: string[] }
  /**
   * The digests differ, but no pod predates the configs' newest writes (or there are no pods): every
   * pod already runs the data there is now. Record the set; restart nothing.
   */
  | { kind: 'current'; differing: string[] };

export interface Recreated {
  /** The workload's uid differs from the one recorded: a new object of an old name. */
  workload: boolean;
  /** Configs whose uid differs from the one recorded, sorted. */
  configs: string[];
}

/**
 * Kinds whose reload replaces running pods that the catch-up can list by the workload's selector. A Job
 * or CronJob reload runs a new Job instead, so the age of any pod says nothing: the digest rule decides
 * (and under a key we cannot compare with, nothing is restarted).
 */
export function judgedByPods(kind: WorkloadKind): boolean {
  return kind === 'Deployment' || kind === 'StatefulSet' || kind === 'DaemonSet' || kind === 'Rollout';
}

/**
 * Whether a workload the ledger has no entry for was created while the service was down (docs/catch-up.md,
 * "A workload first seen at start"). Every workload the service saw while it ran was judged then: a
 * tracked one was baselined, which wrote the ledger after the workload's creation. So one created
 * after the ledger's newest write (whole seconds, strictly) was not seen: its pods may have started
 * before a change the service also did not see. When the ledger was never written (a first install) or
 * the times are unknown, no: it is baselined.
 */
export function createdWhileDown(
  input: Pick<CatchUpInput, 'entry' | 'createdMs' | 'ledgerWrittenMs'>,
): boolean {
  const { entry, createdMs, ledgerWrittenMs } = input;
  if (entry !== undefined || createdMs === undefined || ledgerWrittenMs === undefined) return false;
  return Math.floor(createdMs / 1000) > Math.floor(ledgerWrittenMs / 1000);
}

/** Whether decide() needs the pods' creation times for this workload (listing them costs a request). */
export function needsPods(
  kind: WorkloadKind,
  set: Record<string, string>,
  entry: LedgerEntry | undefined,
  opts: VerdictOptions = {},
  firstSeen: Pick<CatchUpInput, 'createdMs' | 'ledgerWrittenMs'> = {},
) {
  if (!judgedByPods(kind)) return false;
  return verdict(set, entry?.configs, opts).kind === 'reload' || createdWhileDown({ entry, ...firstSeen });
}

/** Whether a pod created at `podMs` may predate a write at `writtenMs`, at whole-second precision. */
export function createdBefore(podMs: number, writtenMs: number): boolean {
  return Math.floor(podMs / 1000) <= Math.floor(writtenMs / 1000);
}

const second = (ms: number) => Math.floor(ms / 1000);

/**
 * Whether a pod created at `podMs` may have read other content of the config than it holds now. A pod
 * created in an earlier second than the config's newest write may have. In the same second the order
 * cannot be read from the times, and counts as "before", except where the objects say more: the config
 * was never written after its creation, in a namespace created while the service was down (after the
 * ledger's newest write), and the pods require it (not `optional`). Then the config has had one content
 * in that namespace, and a pod of it read that content or (the config not there yet) did not start
 * until it could: the tie is "after" (an optional config created just after a pod left it without). That is
 * the namespace recreated by one apply or sync: config and workload created back to back.
 */
export function mayHaveReadOlder(
  podMs: number,
  facts: ConfigFacts & { writtenAtMs: number },
  input: Pick<CatchUpInput, 'namespaceCreatedMs' | 'ledgerWrittenMs'>,
): boolean {
  if (second(podMs) < second(facts.writtenAtMs)) return true;
  if (second(podMs) > second(facts.writtenAtMs)) return false;
  const nsNew =
    input.namespaceCreatedMs !== undefined &&
    input.ledgerWrittenMs !== undefined &&
    second(input.namespaceCreatedMs) > second(input.ledgerWrittenMs);
  return !(nsNew && facts.onlyCreated === true && facts.required === true);
}

/** The start-up verdict for one workload that has no reload pending. */
export function decide(input: CatchUpInput): CatchUp {
  const v = verdict(input.set, input.entry?.configs, input.opts);
  if (v.kind === 'baseline' && createdWhileDown(input)) return firstSeen(input, v);
  if (v.kind !== 'reload') return v;
  const pods = input.podsCreatedMs;
  const stale = v.changed.filter((id) => {
    // A reload request's value is not hashed: a new one is a new request, whatever the key.
    if (id === REQUEST) return true;
    // Nothing to judge by: trust the digests only when they were made with our key.
    if (pods === undefined) return input.key === 'same';
    if (pods.length === 0) return false;
    const facts = input.config(id);
    // Deleted (its digest is the unkeyed "missing", so the difference is real whatever the key; only
    // with --reload-on-delete is a deletion in `changed` at all), or a write time that cannot be told:
    // assume the change came after every pod.
    if (facts?.writtenAtMs === undefined) return true;
    const known = { ...facts, writtenAtMs: facts.writtenAtMs };
    return pods.some((p) => mayHaveReadOlder(p, known, input));
  });
  if (stale.length > 0) return { kind: 'reload', changed: stale };
  return { kind: 'current', differing: v.changed };
}

/**
 * A workload created while the service was down, with no ledger entry: the same pod-age rule, counting
 * only config writes after the workload's creation (an earlier write was there before any of its pods
 * started). Whole seconds, and a write in the same second as the creation may be after it: it counts,
 * as a pod in the same second as a write counts as before it. The cost: a new app synced while down
 * (config and workload written in one second, pods in that second too) is restarted once. Without pods
 * to judge by (a Job, a CronJob, no selector) it is baselined, as before.
 */
function firstSeen(input: CatchUpInput, baseline: CatchUp): CatchUp {
  const pods = input.podsCreatedMs;
  const created = Math.floor((input.createdMs ?? 0) / 1000);
  if (!pods || pods.length === 0) return baseline;
  const stale = Object.keys(input.set)
    .filter((id) => {
      if (id === REQUEST) return false;
      const facts = input.config(id);
      const written = facts?.writtenAtMs;
      if (facts === undefined || written === undefined || Math.floor(written / 1000) < created) return false;
      return pods.some((p) => mayHaveReadOlder(p, { ...facts, writtenAtMs: written }, input));
    })
    .sort();
  return stale.length > 0 ? { kind: 'reload', changed: stale } : baseline;
}

/** Which of the recorded objects were replaced by new objects of the same name. */
export function recreated(input: Pick<CatchUpInput, 'uid' | 'entry' | 'config'>): Recreated {
  const e = input.entry;
  const configs = Object.entries(e?.configUids ?? {})
    .filter(([id, uid]) => {
      const now = input.config(id)?.uid;
      return now !== undefined && now !== '' && now !== uid;
    })
    .map(([id]) => id)
    .sort();
  return { workload: e?.uid !== undefined && e.uid !== input.uid, configs };
}

/**
 * The newest write of an object, in ms: the latest of its creationTimestamp and its managedFields times.
 * Undefined when it has neither (a client may clear managedFields; then no upper bound is known).
 */
export function newestWrite(meta: {
  creationTimestamp?: string | Date | null;
  managedFields?: ReadonlyArray<{ time?: string | Date | null }> | null;
}): number | undefined {
  const times = [meta.creationTimestamp, ...(meta.managedFields ?? []).map((f) => f.time)]
    .filter((t): t is string | Date => t !== undefined && t !== null)
    .map((t) => (typeof t === 'string' ? Date.parse(t) : t.getTime()))
    .filter((t) => Number.isFinite(t));
  if (times.length === 0) return undefined;
  // Without managedFields the creation is the only write we can see, and a later update may have left
  // no trace: no bound.
  if (!meta.managedFields || meta.managedFields.length === 0) return undefined;
  return Math.max(...times);
}
