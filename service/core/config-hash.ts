// Keyed digests of ConfigMap/Secret contents, and of what one workload sees of them. The ConfigStore keeps
// only these digests and drops the data; the ledger stores workloadConfigHash per workload.
//
// Every digest is an HMAC-SHA256 under a key only the service holds. A bare hash of a low-entropy secret
// (a PIN, a short password) can be brute-forced by anyone who reads it (Reloader #608); an HMAC cannot
// without the key, so these values may go to the ledger, to git annotations and to logs.

import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';
import { type ConfigRef, type ConfigUse, configId } from './types.ts';

/** The parts of a ConfigMap or Secret that a pod can see. For a Secret, `data` holds base64 strings. */
export interface ConfigContent {
  readonly data?: Readonly<Record<string, string>>;
  readonly binaryData?: Readonly<Record<string, string>>;
}

/** `all` covers the whole content; `keys` has one digest per key name found in data or binaryData. */
export interface ConfigDigest {
  all: string;
  keys: Record<string, string>;
}

/** What a workload sees of a config that does not exist. Not hex, so it never equals a digest. */
export const MISSING = 'missing';
/** What a workload sees of a referenced key that an existing config does not have. Not hex either. */
export const ABSENT_KEY = 'absent';
/**
 * What the ledger records for a config whose change a workload's pods never read, when the service did
 * not see the data they read (a workload created while it was down, docs/catch-up.md). Not hex either:
 * it differs from every current digest, so the reload stays due until one completes.
 */
export const UNSEEN = 'unseen';

/**
 * Shorter keys are refused: an empty key would make every digest a bare hash of the data, and RFC 2104 §3
 * discourages keys shorter than the hash output (32 bytes for SHA-256).
 */
export const MIN_HMAC_KEY_BYTES = 32;

// 128 bits. These values are only ever compared for equality, so what matters is that a change is never
// mistaken for no change: an accidental collision needs ~2^64 values, and a forged one needs the key.
// RFC 2104 §5 allows truncating an HMAC to half the hash length. Shorter values keep ledger entries and
// git annotations readable.
const DIGEST_HEX_CHARS = 32;

// Domain tags, so that no digest of one kind can equal a digest of another kind by construction. Changing
// a tag or the encoding changes every stored hash, and the service would then see every workload as
// changed: bump the version only together with a ledger migration.
const KEY_TAG = 'gitops-reloader/config-key/v1';
const ALL_TAG = 'gitops-reloader/config/v1';
const WORKLOAD_TAG = 'gitops-reloader/workload/v1';

/** Digests of one config's content, whole and per key. */
export function hashConfig(content: ConfigContent, key: Buffer): ConfigDigest {
  assertUsableKey(key);
  const data = content.data ?? {};
  const binaryData = content.binaryData ?? {};
  const names = [...new Set([...Object.keys(data), ...Object.keys(binaryData)])].sort(compareCodeUnits);
  // The value's field is part of the input, so moving a key from data to binaryData is a change, and a
  // key present in both (invalid in Kubernetes, but representable here) still has one unambiguous digest.
  const entries = names.map((name) => [
    name,
    hmacHex(key, KEY_TAG, [name, own(data, name), own(binaryData, name)]),
  ]);
  // `all` is derived from the per-key digests, so it changes exactly when some key's digest changes or
  // a key is added or removed, which is what a use of 'all' must see.
  return { all: hmacHex(key, ALL_TAG, entries), keys: Object.fromEntries(entries) };
}

/**
 * What a workload sees of one config: the whole digest for a use of 'all', or the digests of exactly the
 * referenced keys. A change to a key the workload does not reference leaves this value as it was.
 */
export function usageDigest(use: ConfigUse, digest: ConfigDigest | undefined): string {
  if (digest === undefined) return MISSING;
  if (use.keys === 'all') return digest.all;
  // Sorted and de-duplicated again here, so the value cannot depend on how a caller built the list.
  const keys = [...new Set(use.keys)].sort(compareCodeUnits);
  return JSON.stringify(keys.map((k) => [k, own(digest.keys, k) ?? ABSENT_KEY]));
}

/**
 * The per-key digests a usage digest of named keys holds (usageDigest's list of [key, digest] pairs),
 * or undefined for any other value (a use of 'all', MISSING, something unreadable). Its inverse, kept
 * next to it so the format has one writer and one reader.
 */
export function namedKeyDigests(usage: string): Record<string, string> | undefined {
  if (!usage.startsWith('[')) return undefined;
  try {
    const pairs = JSON.parse(usage) as unknown;
    if (!Array.isArray(pairs)) return undefined;
    const out: Record<string, string> = {};
    for (const p of pairs) {
      if (!Array.isArray(p) || typeof p[0] !== 'string' || typeof p[1] !== 'string') return undefined;
      out[p[0]] = p[1];
    }
    return out;
  } catch {
    return undefined;
  }
}

/**
 * One keyed hash of everything a workload sees of its configs: the value the ledger stores per workload.
 * It does not depend on the order of `uses`, and with the same key it is the same in every process.
 */
export function workloadConfigHash(
  uses: readonly ConfigUse[],
  lookup: (config: ConfigRef) => ConfigDigest | undefined,
  key: Buffer,
): string {
  assertUsableKey(key);
  const pairs = uses
    .map((use): [string, string] => [configId(use.config), usageDigest(use, lookup(use.config))])
    .sort(([idA, dA], [idB, dB]) => compareCodeUnits(idA, idB) || compareCodeUnits(dA, dB));
  return hmacHex(key, WORKLOAD_TAG, pairs);
}

function assertUsableKey(key: Buffer): void {
  if (key.length < MIN_HMAC_KEY_BYTES) {
    throw new Error(`HMAC key has ${key.length} bytes; at least ${MIN_HMAC_KEY_BYTES} are required`);
  }
}

// A KeyObject made once per key: createHmac with a raw Buffer imports the key again on every call. A
// CPU profile of start-up put 12% of it there; with a KeyObject, 100,000 HMACs take 0.23 s, not 1.1 s.
const keyObjects = new WeakMap<Buffer, KeyObject>();
function secretKey(key: Buffer): KeyObject {
  let k = keyObjects.get(key);
  if (!k) {
    k = createSecretKey(key);
    keyObjects.set(key, k);
  }
  return k;
}

// JSON of an array of strings is an unambiguous encoding: strings are quoted and escaped, so no key/value
// boundary can shift and null (absent) differs from every string. JSON.stringify escapes lone surrogates,
// so its output is well-formed Unicode and its UTF-8 bytes are injective too.
function hmacHex(key: Buffer, tag: string, payload: unknown): string {
  return (
    createHmac('sha256', secretKey(key))
      .update(JSON.stringify([tag, payload]), 'utf8')
      .digest()
      // Hex of the leading bytes, not a slice of the full hex: a V8 slice would keep the 64-character
      // parent string alive next to it, for every key of every cached config.
      .toString('hex', 0, DIGEST_HEX_CHARS / 2)
  );
}

// Own properties only: a ConfigMap key may be named `constructor` or `__proto__`, and a lookup must not
// find Object.prototype's members instead of reporting the key absent.
function own(record: Readonly<Record<string, string>>, name: string): string | null {
  return Object.hasOwn(record, name) ? (record[name] ?? null) : null;
}

// Code-unit order, not localeCompare: the order feeds hashes, so it must not depend on the process's locale.
const compareCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * One digest for a whole watched set (configId → usage digest), order-independent. This is what the
 * annotate and git strategies write into the pod template: it changes exactly when a watched
 * config's visible content changes, and as an HMAC it reveals nothing about Secret data.
 */
export function setDigest(digests: Readonly<Record<string, string>>, key: Buffer): string {
  const entries = Object.entries(digests).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHmac('sha256', secretKey(key))
    .update(`gitops-reloader/set/v1\n${JSON.stringify(entries)}`)
    .digest('hex')
    .slice(0, 32);
}

/**
 * Names the key without revealing it: an HMAC of a fixed tag. The ledger records it, so a start with
 * another key knows that every stored digest is from the old key (a re-baseline, not a reload).
 *
 * It also names the digest scheme: 2 since config digests are keyed per namespace (ADR 0022), so a
 * ledger written under scheme 1 is re-baselined once on upgrade, as after a key rotation, instead of
 * every workload being found changed.
 */
export function keyFingerprint(key: Buffer): string {
  return hmacHex(key, 'key-fingerprint', DIGEST_SCHEME);
}
const DIGEST_SCHEME = 2;

const CLUSTER_KEY_TAG = 'gitops-reloader/cluster-key/v1';
const clusterKeys = new WeakMap<Buffer, Map<string, Buffer>>();

/**
 * The key of one cluster a hub serves: HMAC-SHA256(service key, tag + canonical server). Each served
 * cluster's engine uses it as its service key, so a namespace key made for `shop` in one cluster
 * computes nothing of `shop` in another (issue 35). Single-cluster mode uses the service key itself.
 */
export function clusterKey(key: Buffer, server: string): Buffer {
  assertUsableKey(key);
  let perKey = clusterKeys.get(key);
  if (!perKey) {
    perKey = new Map();
    clusterKeys.set(key, perKey);
  }
  let k = perKey.get(server);
  if (!k) {
    k = createHmac('sha256', secretKey(key)).update(`${CLUSTER_KEY_TAG}\n${server}`, 'utf8').digest();
    perKey.set(server, k);
  }
  return k;
}

const NAMESPACE_KEY_TAG = 'gitops-reloader/namespace-key/v1';
const namespaceKeys = new WeakMap<Buffer, Map<string, Buffer>>();

/**
 * The key of a namespace: HMAC-SHA256(service key, tag + namespace). A ConfigMap's or Secret's digests
 * (hashConfig) and a workload's published value (setDigest: the config hash written to pod templates
 * and git, by the service and by the checksum plugin) are keyed with the key of their namespace, so
 * this key alone computes every value of its namespace and none of another's. It can be given to the
 * namespace's team for its CI (`gitops-reloader tenant-key`) without the service key, from which it
 * cannot be inverted. The ledger's per-workload hash stays under the service key. See docs/adr/0010
 * and 0022.
 *
 * The same Buffer is returned for the same key and namespace, so setDigest's KeyObject cache holds.
 */
export function namespaceKey(key: Buffer, namespace: string): Buffer {
  // assertUsableKey also holds for the derived key: 32 bytes.
  assertUsableKey(key);
  let perKey = namespaceKeys.get(key);
  if (!perKey) {
    perKey = new Map();
    namespaceKeys.set(key, perKey);
  }
  let k = perKey.get(namespace);
  if (!k) {
    k = createHmac('sha256', secretKey(key)).update(`${NAMESPACE_KEY_TAG}\n${namespace}`, 'utf8').digest();
    perKey.set(namespace, k);
  }
  return k;
}

/** The key to use for each namespace: derived from the service key, or a single namespace's key. */
export type NamespaceKeys = (namespace: string) => Buffer;

/** Every namespace's key, from the service key. */
export const fromServiceKey =
  (key: Buffer): NamespaceKeys =>
  (namespace) =>
    namespaceKey(key, namespace);
