import { describe, expect, it } from 'vitest';
import { compileGlobals, DEFAULT_GLOBALS, parseWorkloadPolicy } from './annotations.ts';
import { hashConfig, MISSING, UNSEEN } from './config-hash.ts';
import { type ConfigLookup, firstSeenRecord, REQUEST, recordable, verdict, watchedSet } from './plan.ts';
import type { ConfigRecord, WorkloadRecord } from './records.ts';
import { type ConfigRef, configId } from './types.ts';

const KEY = Buffer.alloc(32, 7);

function cm(
  name: string,
  data: Record<string, string>,
  annotations: Record<string, string> = {},
): ConfigRecord {
  return {
    ref: { kind: 'ConfigMap', namespace: 'ns', name },
    uid: name,
    resourceVersion: '1',
    annotations,
    labels: {},
    digest: hashConfig({ data }, KEY),
  };
}

function lookup(...recs: ConfigRecord[]): ConfigLookup {
  const byId = new Map(recs.map((r) => [configId(r.ref), r]));
  return {
    get: (ref: ConfigRef) => byId.get(configId(ref)),
    inNamespace: (ns, kind) => recs.filter((r) => r.ref.namespace === ns && r.ref.kind === kind),
  };
}

function workload(annotations: Record<string, string>, uses: WorkloadRecord['uses']): WorkloadRecord {
  return {
    ref: { kind: 'Deployment', namespace: 'ns', name: 'web', uid: 'u' },
    resourceVersion: '1',
    generation: 1,
    annotations,
    templateAnnotations: {},
    labels: {},
    uses,
    templateHash: 't',
    status: {},
  };
}

const use = (name: string, keys: 'all' | string[] = 'all') => ({
  config: { kind: 'ConfigMap' as const, namespace: 'ns', name },
  keys,
  optional: false,
});

function setOf(
  w: WorkloadRecord,
  configs: ConfigLookup,
  globals = DEFAULT_GLOBALS,
  applied?: Record<string, string>,
) {
  const parsed = parseWorkloadPolicy(w.annotations, w.templateAnnotations, {
    kind: 'Deployment',
    defaultStrategy: 'restart',
  });
  return watchedSet(w, parsed, configs, globals, applied);
}

describe('watchedSet', () => {
  it('watches every referenced config of an auto workload', () => {
    const w = workload({ 'reloader.stakater.com/auto': 'true' }, [use('a'), use('b', ['k'])]);
    const s = setOf(w, lookup(cm('a', { x: '1' }), cm('b', { k: '1' })));
    expect(Object.keys(s.digests)).toEqual(['ConfigMap/ns/a', 'ConfigMap/ns/b']);
  });

  it('watches nothing for a workload that did not opt in, and says why', () => {
    const w = workload({}, [use('a')]);
    const s = setOf(w, lookup(cm('a', { x: '1' })));
    expect(s.digests).toEqual({});
    expect(s.skipped['ConfigMap/ns/a']).toMatch(/not opted in|no reload/i);
  });

  it('watches a named config even when the template does not reference it', () => {
    const w = workload({ 'configmap.reloader.stakater.com/reload': 'extra' }, []);
    const s = setOf(w, lookup(cm('extra', { x: '1' }), cm('other', { x: '1' })));
    expect(Object.keys(s.digests)).toEqual(['ConfigMap/ns/extra']);
  });

  it('sees a named config the template does not use, deleted since it was recorded, as MISSING (issue 37)', () => {
    const w = workload({ 'configmap.reloader.stakater.com/reload': 'gone-cm,other' }, []);
    const before = setOf(w, lookup(cm('gone-cm', { x: '1' })));
    expect(before.unreferenced).toEqual(['ConfigMap/ns/gone-cm']);
    const after = setOf(w, lookup(), DEFAULT_GLOBALS, before.digests);
    expect(after.digests).toEqual({ 'ConfigMap/ns/gone-cm': MISSING });
    expect(after.unreferenced).toEqual(['ConfigMap/ns/gone-cm']);
    expect(verdict(after.digests, before.digests)).toEqual({
      kind: 'none',
      deleted: ['ConfigMap/ns/gone-cm'],
    });
    expect(verdict(after.digests, before.digests, { reloadOnDelete: true })).toEqual({
      kind: 'reload',
      changed: ['ConfigMap/ns/gone-cm'],
    });
    // Once MISSING is recorded (a reload of the deletion ran), the config is no longer watched.
    expect(setOf(w, lookup(), DEFAULT_GLOBALS, after.digests).digests).toEqual({});
    // No longer named: not watched, whether or not it exists.
    const unnamed = workload({ 'configmap.reloader.stakater.com/reload': 'other' }, []);
    expect(setOf(unnamed, lookup(), DEFAULT_GLOBALS, before.digests).digests).toEqual({});
  });

  it('makes a reload request the ledger cannot hold as a line into its SHA-256, keeping ordinary values', () => {
    const w = workload({ 'gitops-reloader.io/reload-requested-at': 'a\nb' }, []);
    expect(setOf(w, lookup()).digests[REQUEST]).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('honours the global ignore list', () => {
    const { globals } = compileGlobals({
      autoReloadAll: false,
      ignoreConfigMaps: ['kube-root-ca.crt'],
      ignoreSecrets: [],
    });
    const w = workload({ 'reloader.stakater.com/auto': 'true' }, [use('kube-root-ca.crt'), use('a')]);
    const s = setOf(w, lookup(cm('kube-root-ca.crt', { c: '1' }), cm('a', { x: '1' })), globals);
    expect(Object.keys(s.digests)).toEqual(['ConfigMap/ns/a']);
  });

  it('adds the manual reload request as a pseudo-config', () => {
    const w = workload({ 'gitops-reloader.io/reload-requested-at': '2026-12-02T10:00:00Z' }, []);
    expect(setOf(w, lookup()).digests).toEqual({ [REQUEST]: '2026-12-02T10:00:00Z' });
  });

  it('sees a change to a referenced key, not to an unreferenced one', () => {
    const w = workload({ 'reloader.stakater.com/auto': 'true' }, [use('a', ['used'])]);
    const before = setOf(w, lookup(cm('a', { used: '1', unused: '1' }))).digests;
    expect(setOf(w, lookup(cm('a', { used: '1', unused: '2' }))).digests).toEqual(before);
    expect(setOf(w, lookup(cm('a', { used: '2', unused: '1' }))).digests).not.toEqual(before);
  });
});

describe('verdict', () => {
  it('judges a created config named in `created` a change, and any other new config a new baseline', () => {
    const applied = { 'ConfigMap/ns/a': 'd1' };
    const current = { ...applied, 'ConfigMap/ns/new': 'd2' };
    expect(verdict(current, applied).kind).toBe('rebaseline');
    expect(verdict(current, applied, { created: ['ConfigMap/ns/new'] })).toEqual({
      kind: 'reload',
      changed: ['ConfigMap/ns/new'],
    });
    // A workload that named only configs that did not exist had nothing to record until one was created.
    expect(verdict({ 'ConfigMap/ns/new': 'd2' }, undefined).kind).toBe('baseline');
    expect(verdict({ 'ConfigMap/ns/new': 'd2' }, undefined, { created: ['ConfigMap/ns/new'] })).toEqual({
      kind: 'reload',
      changed: ['ConfigMap/ns/new'],
    });
  });

  it('records a workload seen for the first time as a baseline', () => {
    expect(verdict({ a: '1' }, undefined)).toEqual({ kind: 'baseline' });
  });
  it('reloads when a watched digest differs, listing what changed', () => {
    expect(verdict({ a: '2', b: '1', c: '9' }, { a: '1', b: '1', c: '8' })).toEqual({
      kind: 'reload',
      changed: ['a', 'c'],
    });
  });
  it('only re-records when configs join or leave the set', () => {
    expect(verdict({ a: '1', n: '1' }, { a: '1', gone: '1' })).toEqual({
      kind: 'rebaseline',
      added: ['n'],
      removed: ['gone'],
      record: { a: '1', n: '1' },
    });
  });
  it('treats a new reload request on a known workload as a reload', () => {
    expect(verdict({ a: '1', [REQUEST]: 't1' }, { a: '1' })).toEqual({ kind: 'reload', changed: [REQUEST] });
  });
  it('does nothing when nothing changed', () => {
    expect(verdict({ a: '1' }, { a: '1' })).toEqual({ kind: 'none', deleted: [] });
  });
  it('does not reload on a deletion by default, and records the digest the pods still run', () => {
    expect(verdict({ a: MISSING, b: '1' }, { a: '1', b: '1' })).toEqual({ kind: 'none', deleted: ['a'] });
    // A config joining the set at the same time records the set, with the deleted one as applied.
    expect(verdict({ a: MISSING, n: '1' }, { a: '1' })).toEqual({
      kind: 'rebaseline',
      added: ['n'],
      removed: [],
      record: { a: '1', n: '1' },
    });
    // Another config changing reloads, naming only that one.
    expect(verdict({ a: MISSING, b: '2' }, { a: '1', b: '1' })).toEqual({ kind: 'reload', changed: ['b'] });
    // Re-created with the content the pods run: nothing to do; with other content: a reload.
    expect(verdict({ a: '1' }, { a: '1' })).toEqual({ kind: 'none', deleted: [] });
    expect(verdict({ a: '3' }, { a: '1' })).toEqual({ kind: 'reload', changed: ['a'] });
  });
  it('reloads on a deletion with reloadOnDelete', () => {
    expect(verdict({ a: MISSING }, { a: '1' }, { reloadOnDelete: true })).toEqual({
      kind: 'reload',
      changed: ['a'],
    });
  });
  it('records what pods not replaced run: a deleted config keeps its applied digest', () => {
    expect(recordable({ a: MISSING, b: '2', n: '1' }, { a: '1', b: '1' })).toEqual({
      a: '1',
      b: '2',
      n: '1',
    });
    expect(recordable({ a: MISSING }, { a: '1' }, { reloadOnDelete: true })).toEqual({ a: MISSING });
    expect(recordable({ a: MISSING }, undefined)).toEqual({ a: MISSING });
  });
  it('reloads when a config missing at the last reload is created (reload on create)', () => {
    expect(verdict({ a: '1' }, { a: MISSING })).toEqual({ kind: 'reload', changed: ['a'] });
  });
});

describe('SecretProviderClasses in the watched set', () => {
  const spc = (name: string, objects: Record<string, string>): ConfigRecord => ({
    ...cm(name, objects),
    ref: { kind: 'SecretProviderClass', namespace: 'ns', name },
  });
  const mount = {
    config: { kind: 'SecretProviderClass' as const, namespace: 'ns', name: 'vault-db' },
    keys: 'all' as const,
    optional: false,
  };
  const w = workload({ 'reloader.stakater.com/auto': 'true' }, [mount]);

  it('does not watch a class no pod reported a mount of, so its first mount restarts nothing', () => {
    const before = setOf(w, lookup()).digests;
    expect(before).toEqual({});
    const after = setOf(w, lookup(spc('vault-db', { 'secret/db': 'v1' }))).digests;
    expect(Object.keys(after)).toEqual(['SecretProviderClass/ns/vault-db']);
    expect(verdict(after, before)).toEqual({
      kind: 'rebaseline',
      added: ['SecretProviderClass/ns/vault-db'],
      removed: [],
      record: after,
    });
  });

  it('reloads when an object version changes, and not when nothing a pod sees changed', () => {
    const v1 = setOf(w, lookup(spc('vault-db', { 'secret/db': 'v1' }))).digests;
    const v2 = setOf(w, lookup(spc('vault-db', { 'secret/db': 'v2' }))).digests;
    const again = setOf(w, lookup(spc('vault-db', { 'secret/db': 'v1' }))).digests;
    expect(verdict(v2, v1)).toEqual({ kind: 'reload', changed: ['SecretProviderClass/ns/vault-db'] });
    expect(verdict(again, v1)).toEqual({ kind: 'none', deleted: [] });
  });
});

describe('firstSeenRecord', () => {
  it('records the changes the pods have not read as unseen, so a later batch still reloads them (seed 5163)', () => {
    const set = { 'ConfigMap/ns/a': 'a2', 'ConfigMap/ns/b': MISSING };
    const record = firstSeenRecord(set, ['ConfigMap/ns/a']);
    expect(record).toEqual({ 'ConfigMap/ns/a': UNSEEN, 'ConfigMap/ns/b': MISSING });
    // B back with its data: the verdict against the record still names A's change.
    expect(verdict({ 'ConfigMap/ns/a': 'a2', 'ConfigMap/ns/b': 'b1' }, record)).toMatchObject({
      kind: 'reload',
      changed: expect.arrayContaining(['ConfigMap/ns/a']),
    });
  });
});
