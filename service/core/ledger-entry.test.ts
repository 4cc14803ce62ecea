import { describe, expect, it } from 'vitest';
import {
  decodeEntry,
  encodeEntry,
  idFromKey,
  type LedgerEntry,
  LedgerEntryError,
  ledgerKey,
  MAX_DIGEST_CHARS,
  MAX_KEY_CHARS,
  MAX_TARGETS,
  ofThisObject,
  type PendingReload,
  shardOf,
  storedBytes,
} from './ledger-entry.ts';

const D1 = '0123456789abcdef0123456789abcdef';
const D2 = 'fedcba9876543210fedcba9876543210';
const W = 'Deployment/shop/web';

const steady: LedgerEntry = {
  configs: { 'Secret/shop/web-secret': D2, 'ConfigMap/shop/web-config': D1 },
  reloadedAt: '2026-12-01T10:00:00.000Z',
};
const inFlight: LedgerEntry = {
  configs: { 'ConfigMap/shop/web-config': D1 },
  pending: {
    cutoff: '2026-12-02T14:39:22.310Z',
    target: { 'ConfigMap/shop/web-config': D2 },
    changed: ['ConfigMap/shop/web-config'],
    startedAt: '2026-12-02T14:39:23.001Z',
  },
};

// What the API server accepts as a ConfigMap data key (k8s.io/apimachinery IsConfigMapKey).
const isConfigMapKey = (k: string): boolean =>
  /^[-._a-zA-Z0-9]+$/.test(k) && k.length <= 253 && k !== '.' && !k.startsWith('..');

function decodeOk(key: string, value: string) {
  const d = decodeEntry(key, value);
  if (!d.ok) throw new Error(`expected ${key} to decode, got: ${d.reason}`);
  return d;
}

function reason(key: string, value: string): string {
  const d = decodeEntry(key, value);
  if (d.ok) throw new Error(`expected ${key}=${value} to be rejected`);
  return d.reason;
}

describe('ledger entry encoding', () => {
  it('round-trips a steady entry and an entry with a pending reload', () => {
    for (const entry of [steady, inFlight, { configs: {} }]) {
      const d = decodeOk(ledgerKey(W), encodeEntry(W, entry));
      expect(d.id).toBe(W);
      expect(d.entry).toEqual(entry);
    }
  });

  it('round-trips the snapshotted pod uids of a pending restart as a sorted set under "u"', () => {
    const withTargets: LedgerEntry = {
      ...inFlight,
      pending: { ...(inFlight.pending as PendingReload), targets: ['uid-b', 'uid-a', 'uid-b'] },
    };
    const encoded = encodeEntry(W, withTargets);
    expect(JSON.parse(encoded).p.u).toEqual(['uid-a', 'uid-b']);
    expect(decodeOk(ledgerKey(W), encoded).entry.pending?.targets).toEqual(['uid-a', 'uid-b']);
    const bad = (u: unknown) => JSON.stringify({ c: {}, p: { ...JSON.parse(encoded).p, u } });
    expect(reason(ledgerKey(W), bad('uid-a'))).toBe('pending.targets is not an array');
    expect(reason(ledgerKey(W), bad([7]))).toBe('pending.targets holds something that is not a pod uid');
    const many = Array.from({ length: MAX_TARGETS + 1 }, (_, i) => `uid-${i}`);
    expect(reason(ledgerKey(W), bad(many))).toBe(`pending.targets has more than ${MAX_TARGETS} uids`);
  });

  it('writes short keys, sorted maps and a sorted set of changed configs, so equal entries are equal bytes', () => {
    const a = encodeEntry(W, {
      configs: { b: D1, a: D2 },
      pending: {
        cutoff: inFlight.pending!.cutoff,
        startedAt: inFlight.pending!.startedAt,
        target: {},
        changed: ['y', 'x', 'y'],
      },
    });
    const b = encodeEntry(W, {
      configs: { a: D2, b: D1 },
      pending: {
        cutoff: inFlight.pending!.cutoff,
        startedAt: inFlight.pending!.startedAt,
        target: {},
        changed: ['x', 'y'],
      },
    });
    expect(a).toBe(b);
    expect(JSON.parse(a)).toEqual({
      c: { a: D2, b: D1 },
      p: { t: '2026-12-02T14:39:22.310Z', g: {}, ch: ['x', 'y'], s: '2026-12-02T14:39:23.001Z' },
    });
  });

  it('keeps a typical entry small: two configs in about 150 bytes', () => {
    const key = ledgerKey(W);
    const bytes = storedBytes(key, encodeEntry(W, { configs: steady.configs }));
    expect(bytes).toBe(153);
    expect(storedBytes(key, encodeEntry(W, { ...steady, pending: inFlight.pending }))).toBeLessThan(420);
  });

  it('returns frozen entries, so a caller cannot change the in-memory ledger by accident', () => {
    const d = decodeOk(ledgerKey(W), encodeEntry(W, inFlight));
    expect(Object.isFrozen(d.entry)).toBe(true);
    expect(Object.isFrozen(d.entry.configs)).toBe(true);
    expect(Object.isFrozen(d.entry.pending?.changed)).toBe(true);
  });

  it('refuses to encode an invalid entry, naming the workload and the field', () => {
    const bad: unknown[] = [
      { configs: { a: '' } },
      { configs: { a: 42 } },
      { configs: { a: 'line\nbreak' } },
      { configs: { a: 'x'.repeat(MAX_DIGEST_CHARS + 1) } },
      { configs: {}, reloadedAt: '2026-12-01T10:00:00Z' },
      { configs: {}, pending: { cutoff: 'soon', target: {}, changed: [], startedAt: steady.reloadedAt } },
      {
        configs: {},
        pending: { cutoff: steady.reloadedAt, target: {}, changed: [''], startedAt: steady.reloadedAt },
      },
      { configs: {}, extra: 1 },
      { configs: [] },
      null,
    ];
    for (const entry of bad) {
      expect(() => encodeEntry(W, entry as LedgerEntry), JSON.stringify(entry)).toThrow(LedgerEntryError);
    }
    expect(() => encodeEntry(W, { configs: { a: '' } })).toThrow(/Deployment\/shop\/web: configs\[a\]/);
    expect(() => encodeEntry('', { configs: {} })).toThrow(/workload id/);
    expect(() => encodeEntry('shop/web', { configs: {} })).toThrow(/not Kind\/namespace\/name/);
  });
});

describe('ledger entry decoding', () => {
  const key = ledgerKey(W);

  it('reports, and never throws on, values that are not ledger entries', () => {
    expect(reason(key, 'not json')).toMatch(/not JSON/);
    expect(reason(key, '[1,2]')).toMatch(/not a JSON object/);
    expect(reason(key, 'null')).toMatch(/not a JSON object/);
    expect(reason(key, '{}')).toMatch(/configs is not an object/);
    expect(reason(key, '{"c":{},"x":1}')).toMatch(/unknown field\(s\) x/);
    expect(reason(key, '{"c":{},"__proto__":{}}')).toMatch(/unknown field/);
    expect(reason(key, '{"c":{"a":1}}')).toMatch(/configs\[a\]/);
    expect(reason(key, '{"c":{},"r":"2026-02-30T00:00:00.000Z"}')).toMatch(/reloadedAt is not an ISO-8601/);
    expect(reason(key, '{"c":{},"p":{"t":"2026-12-02T14:39:22.310Z","g":{},"ch":[]}}')).toMatch(/startedAt/);
    expect(
      reason(
        key,
        '{"c":{},"p":{"t":"2026-12-02T14:39:22.310Z","g":{},"ch":"a","s":"2026-12-02T14:39:22.310Z"}}',
      ),
    ).toMatch(/changed is not an array/);
    expect(reason(key, '{"c":{},"p":[]}')).toMatch(/pending/);
    expect(reason(key, `{"id":"${W}","c":{}}`)).toMatch(/only valid under a hashed key/);
  });

  it('reports keys that no workload id encodes to', () => {
    expect(reason('application.properties', '{"c":{}}')).toMatch(/not Kind\/namespace\/name/);
    // `_41` is an escape of `A`, which is never escaped.
    expect(reason('_41_2Fns_2Fname', '{"c":{}}')).toMatch(/not an encoded workload id/);
    expect(reason('_hzz', '{"c":{}}')).toMatch(/not an encoded workload id/);
  });

  it('survives arbitrary values without throwing', () => {
    const samples = [
      '',
      '{',
      '"s"',
      '1',
      'true',
      '{"c":null}',
      '{"c":{"a":"b"},"p":null}',
      '\u0000',
      '{"r":1}',
    ];
    for (let i = 0; i < 500; i++) {
      samples.push(String.fromCharCode(...Array.from({ length: i % 40 }, (_, j) => (i * 31 + j * 17) % 128)));
    }
    for (const value of samples) expect(() => decodeEntry(key, value)).not.toThrow();
    for (const value of samples) expect(() => decodeEntry(value, '{"c":{}}')).not.toThrow();
  });
});

describe('ledger data keys', () => {
  it('escapes a workload id readably', () => {
    expect(ledgerKey('Deployment/shop/web')).toBe('Deployment_2Fshop_2Fweb');
    expect(ledgerKey('StatefulSet/db/pg.primary')).toBe('StatefulSet_2Fdb_2Fpg.primary');
  });

  it('maps every id to a valid ConfigMap key and back, or to a hashed key whose value carries the id', () => {
    const ids = [
      'Deployment/shop/web',
      'Rollout/a/b',
      'Kind/x_y/z',
      '.hidden/ns/x',
      '../../..',
      'Kind/ns/ünïcødé-名前',
      'Deployment/a/😀',
      `Deployment/${'n'.repeat(63)}/${'a'.repeat(150)}`,
      `Deployment/${'n'.repeat(63)}/${'a'.repeat(253)}`,
      '_h0123456789abcdef0123456789abcdef/ns/x',
    ];
    for (const id of ids) {
      const key = ledgerKey(id);
      expect(isConfigMapKey(key), `${id} → ${key}`).toBe(true);
      expect(key.length).toBeLessThanOrEqual(MAX_KEY_CHARS);
      const value = encodeEntry(id, steady);
      expect(decodeOk(key, value).id).toBe(id);
      if (key.startsWith('_h')) {
        expect(idFromKey(key)).toBeUndefined();
        expect(JSON.parse(value).id).toBe(id);
      } else {
        expect(idFromKey(key)).toBe(id);
        expect(JSON.parse(value).id).toBeUndefined();
      }
    }
    // Kubernetes ids fit escaped unless the namespace and name are both long.
    expect(ledgerKey(`Deployment/${'n'.repeat(63)}/${'a'.repeat(150)}`).startsWith('_h')).toBe(false);
    expect(ledgerKey(`Deployment/${'n'.repeat(63)}/${'a'.repeat(253)}`).startsWith('_h')).toBe(true);
  });

  it('rejects a hashed key whose value names a different workload', () => {
    const long = `Deployment/${'n'.repeat(63)}/${'a'.repeat(253)}`;
    const other = `Deployment/${'n'.repeat(63)}/${'b'.repeat(253)}`;
    expect(reason(ledgerKey(long), encodeEntry(other, steady))).toMatch(/belongs under key/);
    expect(reason(ledgerKey(long), '{"c":{}}')).toMatch(/needs the workload id/);
  });
});

describe('ledger shards', () => {
  it('puts a workload in the same shard in every process and release (pinned values)', () => {
    expect(shardOf('Deployment/shop/web', 16)).toBe(5);
    expect(shardOf('StatefulSet/db/postgres', 16)).toBe(8);
    expect(shardOf('DaemonSet/kube-system/agent', 16)).toBe(9);
    expect(shardOf('Rollout/payments/api', 16)).toBe(10);
    expect(shardOf('Rollout/payments/api', 7)).toBe(6);
    expect(shardOf('anything', 1)).toBe(0);
  });

  it('spreads workloads evenly over the shards', () => {
    for (const n of [16, 7, 64]) {
      const counts = new Array<number>(n).fill(0);
      const total = 20_000;
      for (let i = 0; i < total; i++) {
        const s = shardOf(`Deployment/team-${i % 97}/app-${i}`, n);
        counts[s] = (counts[s] ?? 0) + 1;
      }
      const mean = total / n;
      expect(Math.min(...counts), `${n}: ${counts}`).toBeGreaterThan(mean * 0.85);
      expect(Math.max(...counts), `${n}: ${counts}`).toBeLessThan(mean * 1.15);
    }
  });

  it('refuses a shard count below 1', () => {
    expect(() => shardOf('x', 0)).toThrow(RangeError);
    expect(() => shardOf('x', 1.5)).toThrow(RangeError);
  });
});

describe('ledger entry uids (docs/catch-up.md)', () => {
  const UID_W = '6f1c2b0e-8a7d-4c1e-9f3a-2b5d7e9c1a40';
  const UID_C = '0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d';
  const withUids: LedgerEntry = {
    configs: { 'Secret/shop/web-secret': D2, 'ConfigMap/shop/web-config': D1 },
    uid: UID_W,
    configUids: { 'Secret/shop/web-secret': UID_C },
    reloadedAt: '2026-12-01T10:00:00.000Z',
  };

  it('round-trips the workload uid under "w" and config uids aligned with the sorted configs under "cu"', () => {
    const value = encodeEntry(W, withUids);
    expect(JSON.parse(value)).toEqual({
      w: UID_W,
      c: { 'ConfigMap/shop/web-config': D1, 'Secret/shop/web-secret': D2 },
      cu: ['', UID_C],
      r: '2026-12-01T10:00:00.000Z',
    });
    expect(decodeOk(ledgerKey(W), value).entry).toEqual(withUids);
  });

  it('tells an entry about another object of the name (ofThisObject): another uid is not this object', () => {
    const other = '11111111-2222-4333-8444-555555555555';
    expect(ofThisObject(withUids, UID_W)).toBe(withUids);
    expect(ofThisObject(withUids, other)).toBeUndefined();
    // Nothing to tell by: an entry without a uid (written before uids), or a workload whose uid is unknown.
    const noUid: LedgerEntry = { configs: withUids.configs };
    expect(ofThisObject(noUid, other)).toBe(noUid);
    expect(ofThisObject(withUids, undefined)).toBe(withUids);
    expect(ofThisObject(withUids, '')).toBe(withUids);
    expect(ofThisObject(undefined, UID_W)).toBeUndefined();
  });

  it('still reads an entry written before uids were recorded, and writes none when none is known', () => {
    const old = JSON.stringify({ c: { 'ConfigMap/shop/web-config': D1 } });
    expect(decodeOk(ledgerKey(W), old).entry).toEqual({ configs: { 'ConfigMap/shop/web-config': D1 } });
    expect(encodeEntry(W, { configs: { 'ConfigMap/shop/web-config': D1 }, configUids: {} })).toBe(old);
  });

  it('reports uid lists that do not line up with the configs, and uids that are not uids', () => {
    const key = ledgerKey(W);
    expect(reason(key, JSON.stringify({ c: { a: D1, b: D2 }, cu: [UID_C] }))).toMatch(/one uid per config/);
    expect(reason(key, JSON.stringify({ c: { a: D1 }, cu: [7] }))).toMatch(/not a uid/);
    expect(reason(key, JSON.stringify({ w: '', c: {} }))).toMatch(/uid/);
    // Encoding keeps only the uids of configs the entry records: an entry rebuilt from an older one
    // (`{ ...entry, configs }`) is never refused for it (issue 37).
    expect(JSON.parse(encodeEntry(W, { configs: { a: D1 }, configUids: { b: UID_C } }))).toEqual({
      c: { a: D1 },
    });
  });

  it('round-trips a halt of a progressive reload under "h", and reports a bad one', () => {
    const halted: LedgerEntry = {
      ...inFlight,
      halt: {
        config: 'ConfigMap/shop/web-config',
        digest: D2,
        cutoff: '2026-12-02T14:39:22.310Z',
        wave: 1,
        why: 'its pods did not stay healthy for 30s: not Ready: web-7c9d-x2',
        at: '2026-12-02T14:45:00.000Z',
      },
    };
    const value = encodeEntry(W, halted);
    expect(JSON.parse(value).h).toEqual({
      c: 'ConfigMap/shop/web-config',
      d: D2,
      t: '2026-12-02T14:39:22.310Z',
      n: 1,
      y: 'its pods did not stay healthy for 30s: not Ready: web-7c9d-x2',
      a: '2026-12-02T14:45:00.000Z',
    });
    expect(decodeOk(ledgerKey(W), value).entry).toEqual(halted);
    const key = ledgerKey(W);
    const h = JSON.parse(value).h;
    expect(reason(key, JSON.stringify({ c: {}, h: { ...h, n: 0 } }))).toMatch(/halt.wave/);
    expect(reason(key, JSON.stringify({ c: {}, h: { ...h, y: 'a\nb' } }))).toMatch(/halt.why/);
    expect(reason(key, JSON.stringify({ c: {}, h: { ...h, x: 1 } }))).toMatch(/unknown halt field/);
    expect(reason(key, JSON.stringify({ c: {}, h: { ...h, a: 'yesterday' } }))).toMatch(/halt.at/);
  });
});
