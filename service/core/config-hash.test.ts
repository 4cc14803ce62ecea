import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  ABSENT_KEY,
  type ConfigContent,
  type ConfigDigest,
  hashConfig,
  keyFingerprint,
  MIN_HMAC_KEY_BYTES,
  MISSING,
  namedKeyDigests,
  usageDigest,
  workloadConfigHash,
} from './config-hash.ts';
import { extractReferences } from './references.ts';
import { type ConfigRef, type ConfigUse, configId } from './types.ts';

const KEY = Buffer.alloc(32, 0x11);
const OTHER_KEY = Buffer.alloc(32, 0x22);
const HEX_128 = /^[0-9a-f]{32}$/;

const NS = 'team-a';
const APP: ConfigRef = { kind: 'ConfigMap', namespace: NS, name: 'app' };
const DB: ConfigRef = { kind: 'Secret', namespace: NS, name: 'db' };
const use = (config: ConfigRef, keys: ConfigUse['keys'], optional = false): ConfigUse => ({
  config,
  keys,
  optional,
});
const digest = (content: ConfigContent, key = KEY): ConfigDigest => hashConfig(content, key);

/** A cluster of configs by id; absent ids are configs that do not exist. */
const store = (configs: Record<string, ConfigContent>, key = KEY) => {
  const digests = new Map(Object.entries(configs).map(([id, c]) => [id, hashConfig(c, key)]));
  return (c: ConfigRef) => digests.get(configId(c));
};
const hashOf = (uses: ConfigUse[], configs: Record<string, ConfigContent>, key = KEY) =>
  workloadConfigHash(uses, store(configs, key), key);

describe('hashConfig', () => {
  it('gives the same digest for the same content, whatever order the keys come in', () => {
    const a = digest({ data: { x: '1', y: '2' }, binaryData: { z: 'AA==' } });
    const b = digest({ binaryData: { z: 'AA==' }, data: { y: '2', x: '1' } });
    expect(b).toEqual(a);
  });

  it('changes the whole digest and only that key when one value changes', () => {
    const before = digest({ data: { x: '1', y: '2' } });
    const after = digest({ data: { x: '1', y: '3' } });
    expect(after.all).not.toBe(before.all);
    expect(after.keys.y).not.toBe(before.keys.y);
    expect(after.keys.x).toBe(before.keys.x);
  });

  it('changes the whole digest when a key is added or removed', () => {
    const base = digest({ data: { x: '1' } });
    expect(digest({ data: { x: '1', y: '' } }).all).not.toBe(base.all);
    expect(digest({ data: {} }).all).not.toBe(base.all);
  });

  it('tells data from binaryData under the same key name', () => {
    const asData = digest({ data: { k: 'AAEC' } });
    const asBinary = digest({ binaryData: { k: 'AAEC' } });
    expect(asBinary.all).not.toBe(asData.all);
    expect(asBinary.keys.k).not.toBe(asData.keys.k);
  });

  it('gives a key present in both data and binaryData one digest that depends on both values', () => {
    const both = digest({ data: { k: 'a' }, binaryData: { k: 'b' } });
    expect(Object.keys(both.keys)).toEqual(['k']);
    expect(both.keys.k).not.toBe(digest({ data: { k: 'a' } }).keys.k);
    expect(both.keys.k).not.toBe(digest({ binaryData: { k: 'b' } }).keys.k);
  });

  it('cannot be fooled by moving the boundary between key names and values', () => {
    const variants: ConfigContent[] = [
      { data: { ab: 'c' } },
      { data: { a: 'bc' } },
      { data: { a: 'b', c: '' } },
      { data: { 'a","b': 'c' } },
      { data: { a: 'b","c' } },
      { data: { a: '' } },
      { data: {} },
    ];
    const alls = variants.map((v) => digest(v).all);
    expect(new Set(alls).size).toBe(variants.length);
  });

  it('treats a missing data map like an empty one, as the API server omits empty maps', () => {
    expect(digest({})).toEqual(digest({ data: {}, binaryData: {} }));
    expect(digest({}).keys).toEqual({});
  });

  it('depends on the HMAC key, so it is not a bare hash of the data', () => {
    const content = { data: { password: 'hunter2' } };
    const a = digest(content, KEY);
    const b = digest(content, OTHER_KEY);
    expect(b.all).not.toBe(a.all);
    expect(b.keys.password).not.toBe(a.keys.password);
    const bare = createHash('sha256').update('hunter2').digest('hex');
    expect(bare.startsWith(a.keys.password!)).toBe(false);
  });

  it('emits 128-bit lowercase hex digests', () => {
    const d = digest({ data: { x: '1' }, binaryData: { y: 'AA==' } });
    expect(d.all).toMatch(HEX_128);
    for (const v of Object.values(d.keys)) expect(v).toMatch(HEX_128);
  });

  it('keeps digests for keys named like Object.prototype members', () => {
    // JSON.parse creates an own "__proto__" property, as a ConfigMap from the API would.
    const content = JSON.parse(
      '{"data":{"__proto__":"p","constructor":"c","toString":"t"}}',
    ) as ConfigContent;
    const d = digest(content);
    expect(Object.keys(d.keys).sort()).toEqual(['__proto__', 'constructor', 'toString']);
    for (const name of ['__proto__', 'constructor', 'toString']) {
      expect(Object.getOwnPropertyDescriptor(d.keys, name)?.value).toMatch(HEX_128);
    }
  });

  it('refuses an HMAC key shorter than 32 bytes, which would weaken every digest', () => {
    expect(() => hashConfig({ data: { x: '1' } }, Buffer.alloc(0))).toThrow(/0 bytes; at least 32/);
    expect(() => hashConfig({}, Buffer.alloc(MIN_HMAC_KEY_BYTES - 1))).toThrow(/HMAC key/);
    expect(() => workloadConfigHash([], () => undefined, Buffer.alloc(8))).toThrow(/HMAC key/);
  });
});

describe('usageDigest', () => {
  const d = digest({ data: { a: '1', b: '2' } });

  it('is read back by namedKeyDigests for a use of named keys, and for nothing else', () => {
    expect(namedKeyDigests(usageDigest(use(APP, ['b', 'zz']), d))).toEqual({ b: d.keys.b, zz: ABSENT_KEY });
    expect(namedKeyDigests(usageDigest(use(APP, 'all'), d))).toBeUndefined();
    expect(namedKeyDigests(MISSING)).toBeUndefined();
    expect(namedKeyDigests('[not json')).toBeUndefined();
  });

  it('shows a use of every key the whole digest', () => {
    expect(usageDigest(use(APP, 'all'), d)).toBe(d.all);
  });

  it('shows a missing config as MISSING, whatever keys are referenced', () => {
    expect(usageDigest(use(APP, 'all'), undefined)).toBe(MISSING);
    expect(usageDigest(use(APP, ['a']), undefined)).toBe(MISSING);
  });

  it('does not change when a key the workload does not reference changes', () => {
    const changed = digest({ data: { a: '1', b: 'changed' } });
    expect(usageDigest(use(APP, ['a']), changed)).toBe(usageDigest(use(APP, ['a']), d));
  });

  it('changes when a referenced key changes', () => {
    const changed = digest({ data: { a: 'changed', b: '2' } });
    expect(usageDigest(use(APP, ['a']), changed)).not.toBe(usageDigest(use(APP, ['a']), d));
  });

  it('marks a referenced key that the config lacks, distinct from a missing config and from any value', () => {
    const seen = usageDigest(use(APP, ['c']), d);
    expect(seen).toContain(ABSENT_KEY);
    expect(seen).not.toBe(MISSING);
    expect(usageDigest(use(APP, ['c']), digest({ data: { c: ABSENT_KEY } }))).not.toBe(seen);
    expect(usageDigest(use(APP, ['c']), digest({ data: { c: '' } }))).not.toBe(seen);
  });

  it('reports a key named constructor as absent rather than finding Object.prototype.constructor', () => {
    expect(usageDigest(use(APP, ['constructor']), d)).toBe(JSON.stringify([['constructor', ABSENT_KEY]]));
  });

  it('does not depend on the order or repetition of the referenced keys', () => {
    expect(usageDigest(use(APP, ['b', 'a', 'b']), d)).toBe(usageDigest(use(APP, ['a', 'b']), d));
  });
});

describe('workloadConfigHash', () => {
  const uses = [use(APP, ['a']), use(DB, 'all')];
  const cluster: Record<string, ConfigContent> = {
    [configId(APP)]: { data: { a: '1', b: '2' } },
    [configId(DB)]: { data: { password: 'cw==' } },
  };
  const base = hashOf(uses, cluster);

  it('is a 128-bit hex value that does not depend on the order of uses', () => {
    expect(base).toMatch(HEX_128);
    expect(hashOf([...uses].reverse(), cluster)).toBe(base);
  });

  it('does not reload when only an unreferenced key changes', () => {
    const changed = { ...cluster, [configId(APP)]: { data: { a: '1', b: 'changed' } } };
    expect(hashOf(uses, changed)).toBe(base);
  });

  it('reloads when a referenced key changes', () => {
    const changed = { ...cluster, [configId(APP)]: { data: { a: 'changed', b: '2' } } };
    expect(hashOf(uses, changed)).not.toBe(base);
  });

  it('reloads when any key of a config used whole changes', () => {
    const changed = { ...cluster, [configId(DB)]: { data: { password: 'cw==', extra: 'eA==' } } };
    expect(hashOf(uses, changed)).not.toBe(base);
  });

  it('reloads when a missing config is created later', () => {
    const { [configId(DB)]: _, ...withoutDb } = cluster;
    expect(hashOf(uses, withoutDb)).not.toBe(base);
  });

  it('reloads when a referenced key is added to an existing config that lacked it', () => {
    const lacking = { ...cluster, [configId(APP)]: { data: { b: '2' } } };
    expect(hashOf(uses, lacking)).not.toBe(base);
    expect(hashOf(uses, lacking)).not.toBe(hashOf(uses, { [configId(DB)]: cluster[configId(DB)]! }));
  });

  it('stays stable while an optional config stays missing', () => {
    const optional = [use(APP, ['a']), use(DB, 'all', true)];
    const appOnly = { [configId(APP)]: cluster[configId(APP)]! };
    expect(hashOf(optional, appOnly)).toBe(hashOf(optional, appOnly));
    expect(hashOf(optional, { ...appOnly, 'Secret/team-a/unrelated': { data: { x: 'eA==' } } })).toBe(
      hashOf(optional, appOnly),
    );
  });

  it('changes with the HMAC key', () => {
    expect(hashOf(uses, cluster, OTHER_KEY)).not.toBe(base);
  });

  it('changes when the workload starts using another config', () => {
    const more = [...uses, use({ kind: 'ConfigMap', namespace: NS, name: 'extra' }, 'all', true)];
    expect(hashOf(more, cluster)).not.toBe(base);
  });

  it('gives the same value in every process for the same key and contents', () => {
    // Pinned: the ledger compares against values written by earlier processes and releases. If this
    // fails, the encoding changed and every workload would look changed after an upgrade.
    expect(base).toBe('9507c44be1ad8033e63956b2745a7f37');
    expect(digest({ data: { a: '1' } }).all).toBe('12e17367c932dc6f562b844bf3453fa7');
  });
});

describe('secret values never leave the hash functions', () => {
  it('puts no data value in any digest, usage digest or workload hash', () => {
    const secrets = ['correct-horse-battery-staple', 'c2VjcmV0LXRva2Vu', '0123456789abcdef0123'];
    const content = {
      data: { password: secrets[0]!, token: secrets[1]! },
      binaryData: { blob: secrets[2]! },
    };
    const d = digest(content);
    const outputs = [
      JSON.stringify(d),
      usageDigest(use(DB, 'all'), d),
      usageDigest(use(DB, ['password', 'token', 'blob', 'nope']), d),
      workloadConfigHash([use(DB, 'all'), use(APP, ['password'])], () => d, KEY),
    ];
    for (const out of outputs) {
      for (const value of secrets) expect(out).not.toContain(value);
    }
  });
});

describe('with extractReferences', () => {
  const spec = {
    containers: [{ env: [{ name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }] }],
  };
  const workloadHash = (dbData: Record<string, string>) =>
    hashOf(extractReferences(NS, spec), { [configId(DB)]: { data: dbData } });

  it('reloads only when a referenced key changes', () => {
    const base = workloadHash({ password: 'cA==', username: 'dQ==' });
    expect(workloadHash({ password: 'cA==', username: 'dg==' })).toBe(base);
    expect(workloadHash({ password: 'cQ==', username: 'dQ==' })).not.toBe(base);
  });
});

describe('keyFingerprint', () => {
  it('names the digest scheme too: a ledger from before per-namespace config digests is re-baselined once', () => {
    const key = Buffer.alloc(32, 'k');
    // Scheme 1's fingerprint, as the previous release computed it.
    const scheme1 = createHmac('sha256', key)
      .update(JSON.stringify(['key-fingerprint', 1]), 'utf8')
      .digest()
      .toString('hex', 0, 16);
    expect(keyFingerprint(key)).toMatch(/^[0-9a-f]{32}$/);
    expect(keyFingerprint(key)).not.toBe(scheme1);
  });

  it('is stable per key, differs between keys, and does not contain the key', () => {
    const a = Buffer.alloc(32, 'a');
    const b = Buffer.alloc(32, 'b');
    expect(keyFingerprint(a)).toBe(keyFingerprint(Buffer.alloc(32, 'a')));
    expect(keyFingerprint(a)).not.toBe(keyFingerprint(b));
    expect(keyFingerprint(a)).toMatch(/^[0-9a-f]{32}$/);
    expect(keyFingerprint(a)).not.toContain(a.toString('hex').slice(0, 8));
  });
});
