// Pure encoding of ledger entries: the JSON value stored per workload, the ConfigMap data key that holds
// it, and the shard it lives in. Decoding validates everything, because a shard is a plain ConfigMap that
// a person or another tool can edit: a bad value is reported and skipped, never trusted or thrown.
//
// Stored value (short keys keep ~1 MiB shards roomy; see docs/adr/0003):
//   {"id": workloadId  (only when the data key is a hash, see ledgerKey)
//    "w":  workloadUid                               the object the entry is about (absent in older entries)
//    "c":  {configId: digest}                        configs: digests last applied to the workload
//    "cu": [configUid]                               the uids of the configs in "c", in the order of its
//                                                    (sorted) keys, "" where unknown (absent in older entries)
//    "p":  {"t": cutoff, "g": {configId: digest},    pending: reload in progress, its cutoff T, target
//           "ch": [configId], "s": startedAt,                 digests, changed configs, start time,
//           "u": [podUid]}                                    and the pods to replace (when snapshotted)
//    "r":  reloadedAt                                time of the last completed reload
//    "h":  {"c": configId, "d": digest, "t": cutoff,  legacy halt (read, never written since ADR 0042:
//           "n": wave, "y": why, "a": haltedAt}               a halt has a record of its own, core/halt-record.ts)
//   }
// Times are ISO-8601 UTC with milliseconds, exactly as Date#toISOString writes them.

import { createHash } from 'node:crypto';

export interface PendingReload {
  /** The cutoff T: every pod created before it must be replaced. ISO-8601 with milliseconds. */
  cutoff: string;
  /** The digests the workload will have applied once the reload completes. */
  target: Record<string, string>;
  /** The configIds whose change caused the reload. A set: stored sorted and without duplicates. */
  changed: string[];
  startedAt: string;
  /**
   * The uids of the pods the restart replaces, snapshotted before its first eviction. A resumed
   * reload replaces exactly the ones still there. Absent: the cutoff rule decides.
   */
  targets?: string[];
}

/** More pods than this are not snapshotted (a shard must stay well under 1 MiB): the cutoff rule decides. */
export const MAX_TARGETS = 1000;
/** A uid is 36 characters; this bound only catches something that is not one. */
const MAX_UID_CHARS = 128;

export interface LedgerEntry {
  /** configId → digest (an HMAC computed elsewhere; never config data). */
  configs: Record<string, string>;
  /**
   * The uid of the workload the digests were applied to: a new object of the same name is a new
   * workload (docs/catch-up.md). Absent in entries written before uids were recorded.
   */
  uid?: string;
  /** configId → uid of the config object whose digest `configs` holds (only ids of `configs`). */
  configUids?: Record<string, string>;
  pending?: PendingReload;
  reloadedAt?: string;
  /**
   * Legacy (before ADR 0042): a halt kept on the failing workload's entry, which any rewrite of the
   * entry dropped. Still read, and moved to a record of its own (core/halt-record.ts) at start-up.
   */
  halt?: HaltRecord;
}

export interface HaltRecord {
  config: string;
  digest: string;
  /** The cutoff of the halted change's reload (what tells an older change from a newer one). */
  cutoff: string;
  wave: number;
  why: string;
  at: string;
}

/** The longest reason a halt keeps (it names pods, never config data). */
export const MAX_HALT_WHY_CHARS = 512;

/** A halt's reason as the ledger keeps it: one line (a pod's message may hold newlines), at most 512. */
export function haltWhy(why: string): string {
  return [...why]
    .map((ch) => (isControl(ch) ? ' ' : ch))
    .join('')
    .slice(0, MAX_HALT_WHY_CHARS);
}

export type DecodedEntry =
  | { ok: true; id: string; entry: LedgerEntry }
  | { ok: false; key: string; reason: string };

/** A ConfigMap's data key: [-._a-zA-Z0-9]+, at most 253 characters, not `.`/`..` or starting with `..`. */
export const MAX_KEY_CHARS = 253;
/**
 * A digest is ~32 hex characters, or for a use of named keys a JSON list of [key, digest] pairs
 * (core/config-hash usageDigest), as long as the pod template's key list: a few hundred keys take
 * tens of KiB. The bound only catches something that is not a digest; a shard's byte budget is what
 * limits real entries (LedgerFullError), so the engine never builds one this refuses.
 */
export const MAX_DIGEST_CHARS = 512 * 1024;
export const MAX_ID_CHARS = 1024;

/** Thrown when asked to encode an entry that does not satisfy the format: a caller's bug. */
export class LedgerEntryError extends Error {
  override name = 'LedgerEntryError';
}

const KEY_SAFE = /^[-.a-zA-Z0-9]$/;
const ESCAPED_KEY = /^(?:[-.a-zA-Z0-9]|_[0-9A-F]{2})+$/;
// `_h` can never come out of escapeId (an escape is `_` and two upper-case hex digits), so a hashed key
// and an escaped key never collide.
const HASHED_KEY = /^_h[0-9a-f]{32}$/;
const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/**
 * The data key for a workload id. Normally the id itself with `_` as an escape character
 * (`Deployment/shop/web` → `Deployment_2Fshop_2Fweb`), so a shard stays readable with kubectl and the id
 * is recovered from the key. An id whose escaped form would be too long (a 63-character namespace and a
 * 253-character name) gets `_h` + 128 bits of its SHA-256 instead, and its value then carries the id.
 */
export function ledgerKey(id: string): string {
  const escaped = escapeId(id);
  return escaped.length > 0 && escaped.length <= MAX_KEY_CHARS ? escaped : hashedKey(id);
}

/** The workload id an escaped key stands for; undefined for a hashed key or a key ledgerKey never makes. */
export function idFromKey(key: string): string | undefined {
  if (!ESCAPED_KEY.test(key)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < key.length; i++) {
    const ch = key[i] as string;
    if (ch === '_') {
      bytes.push(Number.parseInt(key.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(ch.charCodeAt(0));
    }
  }
  const id = Buffer.from(bytes).toString('utf8');
  // Invalid UTF-8, or an escape of a safe character (`_41` for `A`), decodes to an id whose key is
  // different: such a key was not written by us.
  return ledgerKey(id) === key ? id : undefined;
}

/** Which of `shards` shards holds a workload: the first 32 bits of SHA-256 of the id, modulo the count. */
export function shardOf(id: string, shards: number): number {
  if (!Number.isSafeInteger(shards) || shards < 1)
    throw new RangeError(`shard count must be ≥ 1, got ${shards}`);
  return createHash('sha256').update(id, 'utf8').digest().readUInt32BE(0) % shards;
}

/**
 * The stored value for an entry. Validates it, and normalises maps and sets to a sorted order.
 * `configUids` is derived data (the uids of the configs in `configs`): a uid of a config the entry no
 * longer records (an entry rebuilt from an older one, `{ ...entry, configs }`) is dropped, not
 * refused. A refusal here is for good: the engine retries the same entry, and the workload would
 * never be recorded again (issue 37).
 */
export function encodeEntry(id: string, entry: LedgerEntry): string {
  const idProblem = checkId(id);
  if (idProblem) throw new LedgerEntryError(idProblem);
  const problem = checkEntry(withRecordedUids(entry));
  if (problem) throw new LedgerEntryError(`invalid ledger entry for ${id}: ${problem}`);
  const value: Record<string, unknown> = {};
  if (HASHED_KEY.test(ledgerKey(id))) value.id = id;
  if (entry.uid !== undefined) value.w = entry.uid;
  value.c = sortedRecord(entry.configs);
  // Aligned with the sorted keys of "c" rather than keyed again: a config id is often longer than a uid.
  const uids = Object.keys(value.c as Record<string, string>).map((c) => entry.configUids?.[c] ?? '');
  if (uids.some((u) => u !== '')) value.cu = uids;
  if (entry.pending) {
    const p = entry.pending;
    value.p = {
      t: p.cutoff,
      g: sortedRecord(p.target),
      ch: [...new Set(p.changed)].sort(compare),
      s: p.startedAt,
      ...(p.targets ? { u: [...new Set(p.targets)].sort(compare) } : {}),
    };
  }
  if (entry.reloadedAt !== undefined) value.r = entry.reloadedAt;
  const h = entry.halt;
  if (h) value.h = { c: h.config, d: h.digest, t: h.cutoff, n: h.wave, y: h.why, a: h.at };
  return JSON.stringify(value);
}

/** The entry with only the config uids of configs it records (none: no `configUids`). */
export function withRecordedUids(entry: LedgerEntry): LedgerEntry {
  if (!isPlainObject(entry) || !isPlainObject(entry.configUids) || !isPlainObject(entry.configs))
    return entry;
  const kept = Object.entries(entry.configUids).filter(([c]) => Object.hasOwn(entry.configs, c));
  const { configUids: _all, ...rest } = entry;
  return kept.length > 0 ? { ...rest, configUids: Object.fromEntries(kept) } : rest;
}

/** Reads one data key and value of a shard. Anything not written by encodeEntry is reported, not thrown. */
export function decodeEntry(key: string, value: string): DecodedEntry {
  const fail = (reason: string): DecodedEntry => ({ ok: false, key, reason });
  const read = readObject(value, ['id', 'w', 'c', 'cu', 'p', 'r', 'h']);
  if (!read.ok) return fail(read.reason);
  const raw = read.raw;

  let id: string | undefined;
  if (HASHED_KEY.test(key)) {
    if (typeof raw.id !== 'string') return fail('a hashed key needs the workload id in field "id"');
    id = raw.id;
  } else {
    if ('id' in raw) return fail('field "id" is only valid under a hashed key');
    id = idFromKey(key);
    if (id === undefined) return fail('key is not an encoded workload id');
  }
  const idProblem = checkId(id);
  if (idProblem) return fail(idProblem);
  if (ledgerKey(id) !== key) return fail(`workload ${id} belongs under key ${ledgerKey(id)}`);

  const entry: LedgerEntry = { configs: raw.c as Record<string, string> };
  if (raw.w !== undefined) entry.uid = raw.w as string;
  if (raw.cu !== undefined) {
    if (!isPlainObject(raw.c)) return fail('configs is not an object');
    const ids = Object.keys(raw.c).sort(compare);
    if (!Array.isArray(raw.cu) || raw.cu.length !== ids.length)
      return fail('field "cu" is not a list of one uid per config');
    const uids: Record<string, string> = {};
    for (const [i, u] of raw.cu.entries()) {
      if (typeof u !== 'string') return fail('field "cu" holds something that is not a uid');
      if (u !== '') uids[ids[i] as string] = u;
    }
    entry.configUids = uids;
  }
  if (raw.p !== undefined) {
    if (!isPlainObject(raw.p)) return fail('field "p" (pending) is not an object');
    const pExtra = Object.keys(raw.p).filter((k) => !['t', 'g', 'ch', 's', 'u'].includes(k));
    if (pExtra.length > 0) return fail(`unknown pending field(s) ${pExtra.join(', ')}`);
    entry.pending = {
      cutoff: raw.p.t as string,
      target: raw.p.g as Record<string, string>,
      changed: raw.p.ch as string[],
      startedAt: raw.p.s as string,
      ...(raw.p.u !== undefined ? { targets: raw.p.u as string[] } : {}),
    };
  }
  if (raw.r !== undefined) entry.reloadedAt = raw.r as string;
  if (raw.h !== undefined) {
    if (!isPlainObject(raw.h)) return fail('field "h" (halt) is not an object');
    const hExtra = Object.keys(raw.h).filter((k) => !['c', 'd', 't', 'n', 'y', 'a'].includes(k));
    if (hExtra.length > 0) return fail(`unknown halt field(s) ${hExtra.join(', ')}`);
    const h = raw.h;
    entry.halt = {
      config: h.c as string,
      digest: h.d as string,
      cutoff: h.t as string,
      wave: h.n as number,
      why: h.y as string,
      at: h.a as string,
    };
  }
  const problem = checkEntry(entry);
  if (problem) return fail(problem);
  return { ok: true, id, entry: deepFreeze(entry) };
}

/** A stored value as a JSON object of only these fields, or why it is not one. */
export function readObject(
  value: string,
  fields: readonly string[],
): { ok: true; raw: Record<string, unknown> } | { ok: false; reason: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(value);
  } catch (err) {
    return { ok: false, reason: `value is not JSON (${(err as Error).message})` };
  }
  if (!isPlainObject(raw)) return { ok: false, reason: 'value is not a JSON object' };
  const extra = Object.keys(raw).filter((k) => !fields.includes(k));
  if (extra.length > 0) return { ok: false, reason: `unknown field(s) ${extra.join(', ')}` };
  return { ok: true, raw };
}

/** The bytes a data key and value count towards a ConfigMap's 1 MiB limit (the API server sums both). */
export function storedBytes(key: string, value: string): number {
  return Buffer.byteLength(key, 'utf8') + Buffer.byteLength(value, 'utf8');
}

/** Why an entry is not valid, or undefined. Checks types at runtime: entries may come from anywhere. */
export function checkEntry(entry: unknown): string | undefined {
  if (!isPlainObject(entry)) return 'entry is not an object';
  const extra = Object.keys(entry).filter(
    (k) => !['configs', 'uid', 'configUids', 'pending', 'reloadedAt', 'halt'].includes(k),
  );
  if (extra.length > 0) return `unknown field(s) ${extra.join(', ')}`;
  const configs = checkDigests(entry.configs, 'configs');
  if (configs) return configs;
  if (entry.uid !== undefined && !isUid(entry.uid)) return 'uid is not an object uid';
  if (entry.configUids !== undefined) {
    if (!isPlainObject(entry.configUids)) return 'configUids is not an object';
    for (const [id, uid] of Object.entries(entry.configUids)) {
      if (!Object.hasOwn(entry.configs as object, id)) return `configUids[${id}] names no config of configs`;
      if (!isUid(uid)) return `configUids[${id}] is not an object uid`;
    }
  }
  if (entry.pending !== undefined) {
    const p = entry.pending;
    if (!isPlainObject(p)) return 'pending is not an object';
    const pExtra = Object.keys(p).filter(
      (k) => !['cutoff', 'target', 'changed', 'startedAt', 'targets'].includes(k),
    );
    if (pExtra.length > 0) return `unknown pending field(s) ${pExtra.join(', ')}`;
    const cutoff = checkTime(p.cutoff, 'pending.cutoff');
    if (cutoff) return cutoff;
    const startedAt = checkTime(p.startedAt, 'pending.startedAt');
    if (startedAt) return startedAt;
    const target = checkDigests(p.target, 'pending.target');
    if (target) return target;
    if (!Array.isArray(p.changed)) return 'pending.changed is not an array';
    for (const c of p.changed) {
      const bad = checkConfigId(c, 'pending.changed');
      if (bad) return bad;
    }
    if (p.targets !== undefined) {
      if (!Array.isArray(p.targets)) return 'pending.targets is not an array';
      if (p.targets.length > MAX_TARGETS) return `pending.targets has more than ${MAX_TARGETS} uids`;
      for (const u of p.targets) {
        if (!isUid(u)) return 'pending.targets holds something that is not a pod uid';
      }
    }
  }
  if (entry.halt !== undefined) {
    const bad = checkHalt(entry.halt);
    if (bad) return bad;
  }
  if (entry.reloadedAt !== undefined) return checkTime(entry.reloadedAt, 'reloadedAt');
  return undefined;
}

function checkHalt(h: unknown): string | undefined {
  if (!isPlainObject(h)) return 'halt is not an object';
  const extra = Object.keys(h).filter(
    (k) => !['config', 'digest', 'cutoff', 'wave', 'why', 'at'].includes(k),
  );
  if (extra.length > 0) return `unknown halt field(s) ${extra.join(', ')}`;
  const bad =
    checkConfigId(h.config, 'halt.config') ??
    checkDigests({ [String(h.config)]: h.digest }, 'halt.digest') ??
    checkTime(h.cutoff, 'halt.cutoff') ??
    checkTime(h.at, 'halt.at');
  if (bad) return bad;
  if (!Number.isInteger(h.wave) || (h.wave as number) < 1) return 'halt.wave is not a wave number';
  if (typeof h.why !== 'string' || h.why.length > MAX_HALT_WHY_CHARS || [...h.why].some(isControl))
    return `halt.why is not a line of at most ${MAX_HALT_WHY_CHARS} characters`;
  return undefined;
}

const isUid = (u: unknown): u is string =>
  typeof u === 'string' && u.length > 0 && u.length <= MAX_UID_CHARS && ![...u].some(isControl);

function checkId(id: unknown): string | undefined {
  if (typeof id !== 'string' || id.length === 0) return 'workload id must be a non-empty string';
  if (id.length > MAX_ID_CHARS) return `workload id is longer than ${MAX_ID_CHARS} characters`;
  if (!id.isWellFormed()) return 'workload id is not well-formed Unicode';
  // The shape workloadId gives: names and namespaces cannot contain '/'.
  if (!/^[^/]+\/[^/]+\/[^/]+$/.test(id))
    return `workload id ${JSON.stringify(id)} is not Kind/namespace/name`;
  return undefined;
}

function checkDigests(v: unknown, field: string): string | undefined {
  if (!isPlainObject(v)) return `${field} is not an object`;
  for (const [id, digest] of Object.entries(v)) {
    const bad = checkConfigId(id, field);
    if (bad) return bad;
    if (typeof digest !== 'string' || digest.length === 0) return `${field}[${id}] is not a non-empty string`;
    if (digest.length > MAX_DIGEST_CHARS)
      return `${field}[${id}] is longer than ${MAX_DIGEST_CHARS} characters`;
    // A digest is printable text; control characters or a multi-line value hint at data, not a digest.
    if ([...digest].some(isControl)) return `${field}[${id}] contains control characters`;
  }
  return undefined;
}

export const isControl = (ch: string): boolean => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f;

export function checkConfigId(v: unknown, field: string): string | undefined {
  if (typeof v !== 'string' || v.length === 0) return `${field} has an empty or non-string configId`;
  if (v.length > MAX_ID_CHARS) return `${field} has a configId longer than ${MAX_ID_CHARS} characters`;
  return undefined;
}

export function checkTime(v: unknown, field: string): string | undefined {
  // Only the canonical form, so two equal instants are always equal strings.
  if (typeof v === 'string' && ISO_MS.test(v)) {
    const t = Date.parse(v);
    if (Number.isFinite(t) && new Date(t).toISOString() === v) return undefined;
  }
  return `${field} is not an ISO-8601 UTC time with milliseconds (${JSON.stringify(v)})`;
}

function escapeId(id: string): string {
  let out = '';
  for (const ch of id) {
    if (KEY_SAFE.test(ch) && !(out.length === 0 && ch === '.')) {
      out += ch;
    } else {
      for (const b of Buffer.from(ch, 'utf8')) out += `_${b.toString(16).toUpperCase().padStart(2, '0')}`;
    }
  }
  return out;
}

const hashedKey = (id: string): string =>
  `_h${createHash('sha256').update(id, 'utf8').digest('hex').slice(0, 32)}`;

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function sortedRecord(r: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => compare(a, b)));
}

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    for (const child of Object.values(v)) deepFreeze(child);
    Object.freeze(v);
  }
  return v;
}

// Code-unit order, not localeCompare: the encoding must not depend on the process's locale.
const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The entry, unless it is about another object of the workload's name: it records a uid that differs
 * from `uid` (an entry whose removal was refused when its workload was deleted, then found by a new
 * object of the same name). Entries without a uid (written before uids were recorded) are kept.
 */
export function ofThisObject(
  entry: LedgerEntry | undefined,
  uid: string | undefined,
): LedgerEntry | undefined {
  if (entry?.uid === undefined || uid === undefined || uid === '') return entry;
  return entry.uid === uid ? entry : undefined;
}
