import { describe, expect, it } from 'vitest';
import { hashConfig, MISSING, UNSEEN, usageDigest } from '../core/config-hash.ts';
import { changedKeys, KeyMemory } from './changed-keys.ts';

const KEY = Buffer.alloc(32, 3);
const ref = { kind: 'ConfigMap' as const, namespace: 'ns', name: 'cm' };
const v1 = hashConfig({ data: { a: '1', b: '2', c: '3' } }, KEY);
const v2 = hashConfig({ data: { a: '1', b: 'changed', d: 'new' } }, KEY);
const none = () => undefined;

describe('changedKeys', () => {
  it('tells the keys of a use of named keys from the usage digests alone', () => {
    const use = { config: ref, keys: ['a', 'b', 'c'], optional: false };
    expect(changedKeys(usageDigest(use, v1), usageDigest(use, v2), none)).toEqual(['b', 'c']);
  });

  it('tells the keys of a use of the whole config from the contents it knows', () => {
    const known = new Map([
      [v1.all, v1.keys],
      [v2.all, v2.keys],
    ]);
    expect(changedKeys(v1.all, v2.all, (all) => known.get(all))).toEqual(['b', 'c', 'd']);
    // One side unknown: not told.
    expect(changedKeys(v1.all, v2.all, (all) => (all === v2.all ? v2.keys : undefined))).toBeUndefined();
  });

  it('a config created or deleted changed all its keys; an unseen one is not told', () => {
    const known = (all: string) => (all === v1.all ? v1.keys : undefined);
    expect(changedKeys(MISSING, v1.all, known)).toEqual(['a', 'b', 'c']);
    expect(changedKeys(v1.all, MISSING, known)).toEqual(['a', 'b', 'c']);
    expect(changedKeys(UNSEEN, v1.all, known)).toBeUndefined();
    expect(changedKeys(undefined, v1.all, known)).toBeUndefined();
    expect(changedKeys('[not json', v1.all, known)).toBeUndefined();
  });
});

describe('KeyMemory', () => {
  it('remembers recent contents by config and digest, the oldest going first', () => {
    const m = new KeyMemory(2);
    m.saw('ConfigMap/ns/cm', v1);
    m.saw('ConfigMap/ns/cm', v2);
    expect(m.keysOf('ConfigMap/ns/cm', v1.all)).toBe(v1.keys);
    expect(m.keysOf('ConfigMap/ns/other', v1.all)).toBeUndefined();
    m.saw('ConfigMap/ns/x', v1);
    expect(m.keysOf('ConfigMap/ns/cm', v1.all)).toBeUndefined();
    expect(m.keysOf('ConfigMap/ns/cm', v2.all)).toBe(v2.keys);
  });
});
