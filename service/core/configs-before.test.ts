import { describe, expect, it } from 'vitest';
import { configsBefore, noteBefore } from './configs-before.ts';
import type { ConfigLookup } from './plan.ts';
import type { ConfigRecord } from './records.ts';
import { type ConfigRef, configId } from './types.ts';

function cm(name: string, rv: string, namespace = 'ns'): ConfigRecord {
  return {
    ref: { kind: 'ConfigMap', namespace, name },
    uid: name,
    resourceVersion: rv,
    annotations: {},
    labels: {},
    digest: { all: `d${rv}`, keys: {} },
  };
}

function lookup(...recs: ConfigRecord[]): ConfigLookup {
  const byId = new Map(recs.map((r) => [configId(r.ref), r]));
  return {
    get: (ref: ConfigRef) => byId.get(configId(ref)),
    inNamespace: (ns, kind) => recs.filter((r) => r.ref.namespace === ns && r.ref.kind === kind),
  };
}

const ref = (name: string): ConfigRef => ({ kind: 'ConfigMap', namespace: 'ns', name });
const rvs = (l: ConfigLookup, ns = 'ns') =>
  [...l.inNamespace(ns, 'ConfigMap')].map((r) => `${r.ref.name}@${r.resourceVersion}`).sort();

describe('the configs as a start first saw them', () => {
  it('an update during the start: seen as before its first change, by get and by namespace', () => {
    const before = new Map<string, ConfigRecord>();
    noteBefore(before, cm('a', '1'));
    noteBefore(before, cm('a', '2')); // a second write keeps the first one's old record
    const view = configsBefore(lookup(cm('a', '3'), cm('b', '1')), before);
    expect(view.get(ref('a'))?.resourceVersion).toBe('1');
    expect(view.get(ref('b'))?.resourceVersion).toBe('1');
    expect(rvs(view)).toEqual(['a@1', 'b@1']);
  });

  it('a delete during the start: still there as it was', () => {
    const before = new Map<string, ConfigRecord>();
    noteBefore(before, cm('gone', '4'));
    const view = configsBefore(lookup(cm('b', '1')), before);
    expect(view.get(ref('gone'))?.resourceVersion).toBe('4');
    expect(rvs(view)).toEqual(['b@1', 'gone@4']);
    expect(rvs(view, 'other')).toEqual([]);
  });

  it('a creation during the start is seen as it is; a later write of it keeps the created one', () => {
    const before = new Map<string, ConfigRecord>();
    noteBefore(before, undefined);
    expect(before.size).toBe(0);
    expect(configsBefore(lookup(cm('new', '5')), before).get(ref('new'))?.resourceVersion).toBe('5');
    noteBefore(before, cm('new', '5'));
    expect(configsBefore(lookup(cm('new', '6')), before).get(ref('new'))?.resourceVersion).toBe('5');
  });

  it('nothing changed: the current lookup itself', () => {
    const current = lookup(cm('a', '1'));
    expect(configsBefore(current, new Map())).toBe(current);
  });
});
