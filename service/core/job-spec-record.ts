// The durable record of a Job reload in progress (docs/adr/0025): the spec of the Job to create again,
// written before the old Job is deleted, so a crash, a lost Lease or a deadline between the delete and
// the create never loses the run. Pure: the ConfigMap it lives in is named, encoded and decoded here.
// Decoding checks everything, because the ConfigMap can be edited by hand: a bad record is reported,
// never trusted. The Job spec can hold literal env values: a record's `job` is never logged.
import { createHash } from 'node:crypto';

/** Where a recreate stands: the old Job is being deleted, or the new one is being created. */
export type JobRecreatePhase = 'deleting' | 'creating';

export interface JobSpecRecord {
  /** The Job's namespace and name; the new Job gets the same name. */
  namespace: string;
  name: string;
  /** The uid of the Job being replaced: the new one is created only once no Job with it exists. */
  oldUid: string;
  /** The reload's cutoff (ISO-8601), also the new Job's gitops-reloader.io/reload-cutoff annotation. */
  cutoff: string;
  phase: JobRecreatePhase;
  /** When the phase became `creating` (ISO-8601); absent before. */
  creatingAt?: string;
  /** The Job to create (apiVersion, kind, metadata, spec), as strategies/job-recreate.ts built it. */
  job: Record<string, unknown>;
}

/** The data keys of the record's ConfigMap. */
export const RECORD_KEY = 'record';
export const JOB_KEY = 'job';
/** A ConfigMap holds at most 1 MiB; leave room for the record key and the metadata. */
export const MAX_JOB_BYTES = 900 * 1024;

/** The record's ConfigMap name: one per Job, so a second attempt finds the first one's record. */
export function recordName(prefix: string, namespace: string, name: string): string {
  const h = createHash('sha256').update(`${namespace}/${name}`).digest('hex').slice(0, 20);
  return `${prefix}-job-${h}`;
}

/** The ConfigMap data for a record. Throws when the Job is too large to be recorded. */
export function encodeRecord(r: JobSpecRecord): Record<string, string> {
  const job = JSON.stringify(r.job);
  if (Buffer.byteLength(job) > MAX_JOB_BYTES) {
    throw new RangeError(
      `the Job is ${Buffer.byteLength(job)} bytes, more than the ${MAX_JOB_BYTES} a record can hold`,
    );
  }
  const { job: _, ...meta } = r;
  return { [RECORD_KEY]: JSON.stringify(meta), [JOB_KEY]: job };
}

export type DecodedRecord = { ok: true; record: JobSpecRecord } | { ok: false; reason: string };

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const DNS = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** A record from ConfigMap data; every field checked. The reason never quotes the Job. */
export function decodeRecord(data: Readonly<Record<string, string>> | undefined): DecodedRecord {
  const meta = parse(data?.[RECORD_KEY]);
  const job = parse(data?.[JOB_KEY]);
  if (!isObject(meta)) return { ok: false, reason: `"${RECORD_KEY}" is not a JSON object` };
  if (!isObject(job)) return { ok: false, reason: `"${JOB_KEY}" is not a JSON object` };
  const { namespace, name, oldUid, cutoff, phase, creatingAt } = meta;
  if (typeof namespace !== 'string' || !DNS.test(namespace)) return { ok: false, reason: 'bad namespace' };
  if (typeof name !== 'string' || !DNS.test(name)) return { ok: false, reason: 'bad name' };
  if (typeof oldUid !== 'string' || oldUid === '' || oldUid.length > 128)
    return { ok: false, reason: 'bad oldUid' };
  if (typeof cutoff !== 'string' || !ISO.test(cutoff)) return { ok: false, reason: 'bad cutoff' };
  if (phase !== 'deleting' && phase !== 'creating') return { ok: false, reason: 'bad phase' };
  if (creatingAt !== undefined && (typeof creatingAt !== 'string' || !ISO.test(creatingAt))) {
    return { ok: false, reason: 'bad creatingAt' };
  }
  // The Job must be the one the record names, in its namespace: a hand-edited record cannot make the
  // service create a Job elsewhere or under another name.
  const m = job.metadata;
  if (job.kind !== 'Job' || job.apiVersion !== 'batch/v1' || !isObject(m)) {
    return { ok: false, reason: 'the Job is not a batch/v1 Job' };
  }
  if (m.name !== name || m.namespace !== namespace) {
    return { ok: false, reason: 'the Job does not have the name and namespace the record names' };
  }
  return {
    ok: true,
    record: { namespace, name, oldUid, cutoff, phase, ...(creatingAt ? { creatingAt } : {}), job },
  };
}

export type CreateDecision = 'create' | 'uncertain';

/**
 * No Job of the record's name exists: may it be created? In phase `deleting` the create never went
 * out, so yes. In phase `creating` it may have gone out just before the process stopped; the new Job
 * is then only missing if someone deleted it, or its ttlSecondsAfterFinished ran out after it
 * finished. The first cannot happen by itself, so it is created, unless the TTL could have run out
 * since: then it may have run already, and running it twice is worse than asking a person.
 */
export function createDecision(r: JobSpecRecord, nowMs: number): CreateDecision {
  if (r.phase === 'deleting') return 'create';
  const spec = isObject(r.job.spec) ? r.job.spec : {};
  const ttl = spec.ttlSecondsAfterFinished;
  if (typeof ttl !== 'number') return 'create';
  const since = r.creatingAt ? nowMs - Date.parse(r.creatingAt) : Number.POSITIVE_INFINITY;
  return since < ttl * 1000 ? 'create' : 'uncertain';
}

function parse(s: string | undefined): unknown {
  if (s === undefined) return undefined;
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
