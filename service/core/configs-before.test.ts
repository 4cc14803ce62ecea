import { describe, expect, it } from 'vitest';
import { configsBefore, SeenDuringStart } from './configs-before.ts';
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

const W = 'Deployment/ns/web';
/** The view a baseline of web reads, once something was noted. */
const viewOf = (seen: SeenDuringStart, current: ConfigLookup): ConfigLookup => {
  const view = seen.lookup(W, current);
  if (!view) throw new Error('no view: nothing noted');
  return view;
};
const ref = (name: string): ConfigRef => ({ kind: 'ConfigMap', namespace: 'ns', name });
const rvs = (l: ConfigLookup, ns = 'ns') =>
  [...l.inNamespace(ns, 'ConfigMap')].map((r) => `${r.ref.name}@${r.resourceVersion}`).sort();

describe('the configs as a start first saw them', () => {
  it('an update during the start: seen as before its first change, by get and by namespace', () => {
    const seen = new SeenDuringStart();
    seen.config(cm('a', '1'));
    seen.config(cm('a', '2')); // a second write keeps the first one's old record
    const view = viewOf(seen, lookup(cm('a', '3'), cm('b', '1')));
    expect(view.get(ref('a'))?.resourceVersion).toBe('1');
    expect(view.get(ref('b'))?.resourceVersion).toBe('1');
    expect(rvs(view)).toEqual(['a@1', 'b@1']);
  });

  it('a delete during the start: still there as it was', () => {
    const seen = new SeenDuringStart();
    seen.config(cm('gone', '4'));
    const view = viewOf(seen, lookup(cm('b', '1')));
    expect(view.get(ref('gone'))?.resourceVersion).toBe('4');
    expect(rvs(view)).toEqual(['b@1', 'gone@4']);
    expect(rvs(view, 'other')).toEqual([]);
  });

  it('a creation during the start is seen as it is; a later write of it keeps the created one', () => {
    const seen = new SeenDuringStart();
    seen.config(undefined);
    // Nothing noted: a baseline reads the configs as they are.
    expect(seen.lookup(W, lookup(cm('new', '5')))).toBeUndefined();
    seen.config(cm('new', '5'));
    expect(viewOf(seen, lookup(cm('new', '6'))).get(ref('new'))?.resourceVersion).toBe('5');
  });

  it('a workload created during the start reads the configs as they are', () => {
    const seen = new SeenDuringStart();
    seen.config(cm('a', '1'));
    seen.workload(W, true);
    seen.workload('Deployment/ns/old', false);
    expect(seen.lookup(W, lookup(cm('a', '2')))).toBeUndefined();
    expect(seen.lookup('Deployment/ns/old', lookup(cm('a', '2')))?.get(ref('a'))?.resourceVersion).toBe('1');
    seen.clear();
    expect(seen.lookup('Deployment/ns/old', lookup(cm('a', '2')))).toBeUndefined();
  });

  it('nothing changed: the current lookup itself', () => {
    const current = lookup(cm('a', '1'));
    expect(configsBefore(current, new Map())).toBe(current);
  });
});
