// A halt's own record (docs/adr/0042): a progressive reload halted a change of one config, and the
// record of that halt is keyed by the change, not by the workload that failed it. It lives in the
// ledger's shards beside the workload entries, under a data key of its own, so that no rewrite of a
// workload's entry (its next reload, a reload dropped, another config's change) can drop it, and a
// restart or a new leader holds the change too. One record per config: a config has one newest
// change, and a newer change ends the halt of an older one.
//
// Stored value (short keys, as the workload entries):
//   {"c": configId, "u": configUid (when known), "d": digest of the halted content,
//    "t": cutoff of the halted reload, "n": wave, "w": workload that failed it, "y": why, "a": haltedAt}
//
// Pure: encoding, decoding (a shard is a plain ConfigMap anyone may edit: a bad value is reported,
// never trusted), and the rules that say whether a halt holds a change and whether it has ended.

import { createHash } from 'node:crypto';
import {
  checkConfigId,
  checkTime,
  isControl,
  isPlainObject,
  MAX_HALT_WHY_CHARS,
  MAX_ID_CHARS,
  readObject,
} from './ledger-entry.ts';

export interface HaltRecord {
  /** The config whose change is halted (Kind/namespace/name). */
  config: string;
  /** The uid of that config when it was halted: a new object of the same name is a new config. */
  uid?: string;
  /** The content halted (the config's whole-content digest, or `deleted`). */
  digest: string;
  /** The cutoff of the halted reload (tells an older change from a newer one). ISO-8601 with ms. */
  cutoff: string;
  wave: number;
  /** The workload whose reload failed the change (for the status and the Events; not a key). */
  workload: string;
  why: string;
  at: string;
  /**
   * The other changes the failed reload carried, halted with this one (config and digest): a newer
   * change of any of them ends this halt too (docs/adr/0045). At most MAX_HALTED_WITH.
   */
  with?: ReadonlyArray<{ config: string; digest: string }>;
}

/** The changes a record names as halted with it, at most: a reload carries few configs' changes. */
export const MAX_HALTED_WITH = 8;

/**
 * A digest is 32 hex characters (core/config-hash.ts); the bound only catches something that is not
 * one. With the other bounds a record is at most ~3.4 KB; a typical one ~350 bytes.
 */
export const MAX_HALT_DIGEST_CHARS = 256;
const MAX_UID_CHARS = 128;

/** The digest a change that deleted its config carries (engine/progressive.ts changesOf). */
export const DELETED = 'deleted';

const KEY_PREFIX = '_halt-';
/** Never a workload entry's key: an escape is `_` and two upper-case hex digits, a hashed key `_h` + 32 hex. */
const HALT_KEY = /^_halt-[0-9a-f]{32}$/;

/** The ConfigMap data key of a config's halt record: 128 bits of SHA-256 of the config id. */
export function haltKey(config: string): string {
  return `${KEY_PREFIX}${createHash('sha256').update(config, 'utf8').digest('hex').slice(0, 32)}`;
}

/** Whether a shard's data key holds a halt record (not a workload entry). */
export function isHaltKey(key: string): boolean {
  return key.startsWith(KEY_PREFIX);
}

export class HaltRecordError extends Error {
  override name = 'HaltRecordError';
}

/** The stored value of a record; throws HaltRecordError for a record outside the format (a caller's bug). */
export function encodeHalt(h: HaltRecord): string {
  const bad = checkHalt(h);
  if (bad) throw new HaltRecordError(`invalid halt record: ${bad}`);
  return JSON.stringify({
    c: h.config,
    ...(h.uid !== undefined ? { u: h.uid } : {}),
    d: h.digest,
    t: h.cutoff,
    n: h.wave,
    w: h.workload,
    y: h.why,
    a: h.at,
    ...(h.with && h.with.length > 0 ? { o: h.with.map((c) => [c.config, c.digest]) } : {}),
  });
}

export type DecodedHalt = { ok: true; halt: HaltRecord } | { ok: false; key: string; reason: string };

/** Reads one data key and value of a shard as a halt record; anything else is reported, not thrown. */
export function decodeHalt(key: string, value: string): DecodedHalt {
  const fail = (reason: string): DecodedHalt => ({ ok: false, key, reason });
  if (!HALT_KEY.test(key)) return fail('key is not a halt record key');
  const read = readObject(value, ['c', 'u', 'd', 't', 'n', 'w', 'y', 'a', 'o']);
  if (!read.ok) return fail(read.reason);
  const raw = read.raw;
  const halt = {
    config: raw.c,
    ...(raw.u !== undefined ? { uid: raw.u } : {}),
    digest: raw.d,
    cutoff: raw.t,
    wave: raw.n,
    workload: raw.w,
    why: raw.y,
    at: raw.a,
    ...(raw.o !== undefined ? { with: readWith(raw.o) } : {}),
  } as HaltRecord;
  const bad = checkHalt(halt);
  if (bad) return fail(bad);
  // The key is the config's: a record copied under another config's key holds nothing.
  if (haltKey(halt.config) !== key)
    return fail(`the halt of ${halt.config} belongs under ${haltKey(halt.config)}`);
  return { ok: true, halt: Object.freeze(halt) };
}

/** The stored `o`: a list of [config, digest] pairs; anything else is kept as is for checkHalt to refuse. */
function readWith(o: unknown): unknown {
  if (!Array.isArray(o)) return o;
  return o.map((p) =>
    Array.isArray(p) && p.length === 2 ? { config: p[0], digest: p[1] } : { config: undefined },
  );
}

const line = (v: unknown, max: number): v is string =>
  typeof v === 'string' && v.length > 0 && v.length <= max && ![...v].some(isControl);

/** Why a record is not valid, or undefined. Checks types at runtime: records may come from anywhere. */
export function checkHalt(h: unknown): string | undefined {
  if (!isPlainObject(h)) return 'not an object';
  const bad =
    checkConfigId(h.config, 'config') ??
    (/^(ConfigMap|Secret|SecretProviderClass)\/[^/]+\/[^/]+$/.test(String(h.config))
      ? undefined
      : `config ${JSON.stringify(h.config)} is not Kind/namespace/name of a config`) ??
    checkTime(h.cutoff, 'cutoff') ??
    checkTime(h.at, 'at');
  if (bad) return bad;
  if (h.uid !== undefined && !line(h.uid, MAX_UID_CHARS)) return 'uid is not an object uid';
  if (!line(h.digest, MAX_HALT_DIGEST_CHARS))
    return `digest is not a digest of at most ${MAX_HALT_DIGEST_CHARS} characters`;
  if (!Number.isInteger(h.wave) || (h.wave as number) < 1) return 'wave is not a wave number';
  if (!line(h.workload, MAX_ID_CHARS) || !/^[^/]+\/[^/]+\/[^/]+$/.test(h.workload as string))
    return 'workload is not Kind/namespace/name';
  if (typeof h.why !== 'string' || h.why.length > MAX_HALT_WHY_CHARS || [...h.why].some(isControl))
    return `why is not a line of at most ${MAX_HALT_WHY_CHARS} characters`;
  if (h.with !== undefined) {
    if (!Array.isArray(h.with) || h.with.length === 0 || h.with.length > MAX_HALTED_WITH)
      return `with is not a list of 1 to ${MAX_HALTED_WITH} changes`;
    for (const c of h.with as unknown[]) {
      if (!isPlainObject(c)) return 'with names something that is not a change';
      const bad =
        checkConfigId(c.config, 'with') ??
        (/^(ConfigMap|Secret|SecretProviderClass)\/[^/]+\/[^/]+$/.test(String(c.config))
          ? undefined
          : `with ${JSON.stringify(c.config)} is not Kind/namespace/name of a config`);
      if (bad) return bad;
      if (!line(c.digest, MAX_HALT_DIGEST_CHARS))
        return `with: digest is not a digest of at most ${MAX_HALT_DIGEST_CHARS} characters`;
    }
  }
  return undefined;
}

/** Whether the halt holds a reload that carries this change of a config (the same config, the same content). */
export function haltHolds(
  h: Pick<HaltRecord, 'config' | 'digest'>,
  change: { config: string; digest: string },
) {
  return h.config === change.config && h.digest === change.digest;
}

/**
 * Whether a halt recorded before has ended, given the config as it is now (undefined: it does not
 * exist), and why. A halt ends only by a resume (which removes the record), a newer change of the
 * config, or the config's deletion: a config deleted and created again (another uid) is a new config,
 * even with the same content.
 */
export function haltEnded(
  h: Pick<HaltRecord, 'digest' | 'uid'>,
  now: { digest: string; uid?: string } | undefined,
): 'deleted' | 'changed' | undefined {
  // (A change halted with others also ends when one of those has changed: haltedWithChanged.)
  // A halted deletion (--reload-on-delete) holds while the config stays deleted.
  if (now === undefined) return h.digest === DELETED ? undefined : 'deleted';
  if (h.uid !== undefined && now.uid !== undefined && now.uid !== h.uid) return 'deleted';
  return now.digest === h.digest ? undefined : 'changed';
}

/**
 * Which change halted with this one has since changed or been deleted (given each config's digest
 * now, undefined when it does not exist), if one has: that ends this halt too (docs/adr/0045).
 */
export function haltedWithChanged(
  h: Pick<HaltRecord, 'with'>,
  digestOf: (config: string) => string | undefined,
): string | undefined {
  return h.with?.find((c) => (digestOf(c.config) ?? DELETED) !== c.digest)?.config;
}
