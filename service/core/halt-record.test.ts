import { describe, expect, it } from 'vitest';
import {
  checkHalt,
  decodeHalt,
  encodeHalt,
  type HaltRecord,
  HaltRecordError,
  haltEnded,
  haltedWithChanged,
  haltHolds,
  haltKey,
  isHaltKey,
  MAX_HALT_DIGEST_CHARS,
  MAX_HALTED_WITH,
} from './halt-record.ts';
import { decodeEntry, ledgerKey, MAX_HALT_WHY_CHARS, storedBytes } from './ledger-entry.ts';

const D1 = '0123456789abcdef0123456789abcdef';
const D2 = 'fedcba9876543210fedcba9876543210';
const halt: HaltRecord = {
  config: 'ConfigMap/shop/shared',
  uid: '6a1f0c2e-0000-4000-8000-000000000001',
  digest: D1,
  cutoff: '2026-12-06T10:00:00.000Z',
  wave: 1,
  workload: 'Deployment/shop/canary',
  why: 'its new pods were not healthy within the settle time (30s): not Ready: canary-7d9f',
  at: '2026-12-06T10:00:31.000Z',
};

describe('halt records', () => {
  it('round-trips, under a key of its config that no workload entry can have', () => {
    const key = haltKey(halt.config);
    expect(key).toMatch(/^_halt-[0-9a-f]{32}$/);
    expect(isHaltKey(key)).toBe(true);
    expect(isHaltKey(ledgerKey('Deployment/shop/web'))).toBe(false);
    expect(isHaltKey(ledgerKey(`Deployment/${'n'.repeat(63)}/${'a'.repeat(253)}`))).toBe(false);
    // Not a workload entry either way round.
    expect(decodeEntry(key, encodeHalt(halt)).ok).toBe(false);
    expect(decodeHalt(key, encodeHalt(halt))).toEqual({ ok: true, halt });
    const { uid: _u, ...noUid } = halt;
    expect(decodeHalt(key, encodeHalt(noUid))).toEqual({ ok: true, halt: noUid });
    expect(haltKey('ConfigMap/shop/other')).not.toBe(key);
  });

  it('is small, and bounded whatever its fields hold', () => {
    expect(storedBytes(haltKey(halt.config), encodeHalt(halt))).toBeLessThan(400);
    const longest: HaltRecord = {
      ...halt,
      config: `SecretProviderClass/${'n'.repeat(63)}/${'c'.repeat(253)}`,
      uid: 'u'.repeat(128),
      digest: 'd'.repeat(MAX_HALT_DIGEST_CHARS),
      workload: `StatefulSet/${'n'.repeat(63)}/${'w'.repeat(253)}`,
      why: 'y'.repeat(MAX_HALT_WHY_CHARS),
    };
    expect(storedBytes(haltKey(longest.config), encodeHalt(longest))).toBeLessThan(3_500);
    expect(() => encodeHalt({ ...halt, digest: 'd'.repeat(MAX_HALT_DIGEST_CHARS + 1) })).toThrow(
      HaltRecordError,
    );
    expect(() => encodeHalt({ ...halt, why: 'y'.repeat(MAX_HALT_WHY_CHARS + 1) })).toThrow(HaltRecordError);
  });

  it('reports, never trusts, a value someone else wrote', () => {
    const key = haltKey(halt.config);
    const bad = (value: string, k = key) => {
      const d = decodeHalt(k, value);
      return d.ok ? 'accepted' : d.reason;
    };
    expect(bad('{')).toMatch(/not JSON/);
    expect(bad('[]')).toMatch(/not a JSON object/);
    expect(bad(JSON.stringify({ ...JSON.parse(encodeHalt(halt)), x: 1 }))).toMatch(/unknown field/);
    // Another config's record copied under this key.
    expect(bad(encodeHalt({ ...halt, config: 'ConfigMap/shop/other' }))).toMatch(/belongs under/);
    expect(bad(encodeHalt(halt), '_halt-xyz')).toMatch(/not a halt record key/);
    const raw = JSON.parse(encodeHalt(halt));
    expect(bad(JSON.stringify({ ...raw, n: 0 }))).toMatch(/wave/);
    expect(bad(JSON.stringify({ ...raw, t: 'yesterday' }))).toMatch(/cutoff/);
    expect(bad(JSON.stringify({ ...raw, y: 'two\nlines' }))).toMatch(/why/);
    expect(bad(JSON.stringify({ ...raw, w: 'web' }))).toMatch(/workload/);
    expect(bad(JSON.stringify({ ...raw, c: 'Deployment/shop/web' }))).toMatch(
      /not Kind\/namespace\/name of a config/,
    );
    expect(checkHalt(halt)).toBeUndefined();
  });

  it('holds exactly the change it halted: the same config at the same content', () => {
    expect(haltHolds(halt, { config: halt.config, digest: D1 })).toBe(true);
    expect(haltHolds(halt, { config: halt.config, digest: D2 })).toBe(false);
    expect(haltHolds(halt, { config: 'ConfigMap/shop/other', digest: D1 })).toBe(false);
  });

  it('ends only by a newer change of the config or its deletion (a new object of the name is a deletion)', () => {
    expect(haltEnded(halt, { digest: D1, uid: halt.uid as string })).toBeUndefined();
    expect(haltEnded(halt, { digest: D1 })).toBeUndefined();
    expect(haltEnded(halt, { digest: D2, uid: halt.uid as string })).toBe('changed');
    expect(haltEnded(halt, undefined)).toBe('deleted');
    expect(haltEnded(halt, { digest: D1, uid: 'another-uid' })).toBe('deleted');
    // Recorded without a uid (moved from an older version's entry): the content alone decides.
    expect(haltEnded({ digest: D1 }, { digest: D1, uid: 'any' })).toBeUndefined();
    // A halted deletion holds while the config stays deleted.
    expect(haltEnded({ digest: 'deleted' }, undefined)).toBeUndefined();
    expect(haltEnded({ digest: 'deleted' }, { digest: D1 })).toBe('changed');
  });

  it('names the changes halted with it (one failed reload carried them), and ends when one of them changed (docs/adr/0045)', () => {
    const key = haltKey(halt.config);
    const other = { config: 'Secret/shop/tls', digest: D2 };
    const both: HaltRecord = { ...halt, with: [other] };
    expect(decodeHalt(key, encodeHalt(both))).toEqual({ ok: true, halt: both });
    expect(storedBytes(key, encodeHalt(both))).toBeLessThan(450);
    // Bounded: at most MAX_HALTED_WITH changes, each a config id and a digest.
    const longest: HaltRecord = {
      ...halt,
      with: Array.from({ length: MAX_HALTED_WITH }, (_, i) => ({
        config: `SecretProviderClass/${'n'.repeat(63)}/${String(i).padEnd(253, 'c')}`,
        digest: 'd'.repeat(MAX_HALT_DIGEST_CHARS),
      })),
    };
    expect(storedBytes(key, encodeHalt(longest))).toBeLessThan(8_000);
    const many = { ...halt, with: Array.from({ length: MAX_HALTED_WITH + 1 }, () => other) };
    expect(() => encodeHalt(many)).toThrow(HaltRecordError);
    // Someone else's value: refused, never trusted.
    const raw = JSON.parse(encodeHalt(both));
    const bad = (o: unknown) => {
      const d = decodeHalt(key, JSON.stringify({ ...raw, o }));
      return d.ok ? 'accepted' : d.reason;
    };
    expect(bad([])).toMatch(/with is not a list/);
    expect(bad('Secret/shop/tls')).toMatch(/with is not a list/);
    expect(bad([['Secret/shop/tls']])).toMatch(/with/);
    expect(bad([['Deployment/shop/web', D2]])).toMatch(/not Kind\/namespace\/name of a config/);
    expect(bad([['Secret/shop/tls', 'two\nlines']])).toMatch(/digest/);
    // It ends when a change halted with it has changed, or its config was deleted.
    const digests = new Map([[other.config, D2]]);
    expect(haltedWithChanged(both, (c) => digests.get(c))).toBeUndefined();
    expect(haltedWithChanged(both, () => D1)).toBe(other.config);
    expect(haltedWithChanged(both, () => undefined)).toBe(other.config);
    expect(haltedWithChanged(halt, () => undefined)).toBeUndefined();
  });
});
