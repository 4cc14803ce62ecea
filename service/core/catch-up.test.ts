import { describe, expect, it } from 'vitest';
import {
  type CatchUpInput,
  type ConfigFacts,
  createdBefore,
  decide,
  judgedByPods,
  needsPods,
  newestWrite,
  recreated,
} from './catch-up.ts';
import { MISSING } from './config-hash.ts';
import { REQUEST } from './plan.ts';

const CFG = 'ConfigMap/ns/cfg';
const SEC = 'Secret/ns/sec';
const T = (iso: string) => Date.parse(iso);
const WRITE = T('2026-12-04T10:00:00Z');

function input(over: Partial<CatchUpInput> & { facts?: Record<string, ConfigFacts> }): CatchUpInput {
  const facts = over.facts ?? { [CFG]: { uid: 'c2', writtenAtMs: WRITE } };
  return {
    kind: 'Deployment',
    uid: 'w1',
    set: { [CFG]: 'new' },
    entry: { configs: { [CFG]: 'old' } },
    key: 'same',
    config: (id) => facts[id],
    podsCreatedMs: [WRITE + 5_000],
    ...over,
  };
}

describe('the catch-up rule: a change while the service was down, judged by the pods', () => {
  it('records without a reload when every pod is newer than the config’s last write (a namespace recreated)', () => {
    expect(decide(input({ podsCreatedMs: [WRITE + 1_000, WRITE + 60_000] }))).toEqual({
      kind: 'current',
      differing: [CFG],
    });
  });

  it('reloads when some pod predates the last write (the config changed under old pods)', () => {
    expect(decide(input({ podsCreatedMs: [WRITE + 60_000, WRITE - 60_000] }))).toEqual({
      kind: 'reload',
      changed: [CFG],
    });
  });

  it('counts a pod created in the same second as the write as before it', () => {
    expect(createdBefore(WRITE + 999, WRITE)).toBe(true);
    expect(createdBefore(WRITE, WRITE + 999)).toBe(true);
    expect(createdBefore(WRITE + 1_000, WRITE + 999)).toBe(false);
    expect(decide(input({ podsCreatedMs: [WRITE + 400] })).kind).toBe('reload');
    expect(decide(input({ podsCreatedMs: [WRITE + 1_000] })).kind).toBe('current');
  });

  it('names only the configs some pod predates', () => {
    const facts = {
      [CFG]: { uid: 'c', writtenAtMs: WRITE },
      [SEC]: { uid: 's', writtenAtMs: WRITE + 120_000 },
    };
    const d = decide(
      input({
        facts,
        set: { [CFG]: 'new', [SEC]: 'new' },
        entry: { configs: { [CFG]: 'old', [SEC]: 'old' } },
        podsCreatedMs: [WRITE + 60_000],
      }),
    );
    expect(d).toEqual({ kind: 'reload', changed: [SEC] });
  });

  it('restarts nothing for a workload with no pods (scaled to zero)', () => {
    expect(decide(input({ podsCreatedMs: [] })).kind).toBe('current');
  });

  it('reloads for a deleted config, or one whose last write cannot be told', () => {
    expect(decide(input({ facts: {} })).kind).toBe('reload');
    expect(decide(input({ facts: { [CFG]: { uid: 'c', writtenAtMs: undefined } } })).kind).toBe('reload');
  });

  it('always reloads for a new reload request, whatever the pods or the key', () => {
    const d = decide(
      input({
        set: { [CFG]: 'same', [REQUEST]: '2' },
        entry: { configs: { [CFG]: 'same', [REQUEST]: '1' } },
        key: 'unknown',
        podsCreatedMs: [WRITE + 60_000],
      }),
    );
    expect(d).toEqual({ kind: 'reload', changed: [REQUEST] });
  });

  it('leaves equal digests, first sight and set changes to the digest verdict', () => {
    expect(decide(input({ set: { [CFG]: 'old' } }))).toEqual({ kind: 'none', deleted: [] });
    expect(decide(input({ entry: undefined }))).toEqual({ kind: 'baseline' });
    expect(decide(input({ set: { [CFG]: 'old', [SEC]: 'x' } }))).toEqual({
      kind: 'rebaseline',
      added: [SEC],
      removed: [],
      record: { [CFG]: 'old', [SEC]: 'x' },
    });
  });

  it('takes a deleted config for no change unless --reload-on-delete, whatever the pods', () => {
    const deleted = { set: { [CFG]: MISSING }, facts: {}, podsCreatedMs: [WRITE - 60_000] };
    expect(decide(input(deleted))).toEqual({ kind: 'none', deleted: [CFG] });
    expect(needsPods('Deployment', deleted.set, { configs: { [CFG]: 'old' } })).toBe(false);
    const on = { opts: { reloadOnDelete: true } };
    expect(decide(input({ ...deleted, ...on }))).toEqual({ kind: 'reload', changed: [CFG] });
    expect(needsPods('Deployment', deleted.set, { configs: { [CFG]: 'old' } }, on.opts)).toBe(true);
  });

  it('under a key it cannot compare with, judges by the pods too (an upgrade that changed the key)', () => {
    for (const key of ['unknown', 'other'] as const) {
      expect(decide(input({ key, podsCreatedMs: [WRITE + 60_000] })).kind).toBe('current');
      expect(decide(input({ key, podsCreatedMs: [WRITE - 60_000] })).kind).toBe('reload');
    }
  });

  it('for a kind without pods to judge (a CronJob), trusts the digests only under its own key', () => {
    expect(judgedByPods('CronJob')).toBe(false);
    expect(judgedByPods('Job')).toBe(false);
    expect(judgedByPods('StatefulSet')).toBe(true);
    expect(decide(input({ kind: 'CronJob', podsCreatedMs: undefined })).kind).toBe('reload');
    expect(decide(input({ kind: 'CronJob', key: 'unknown', podsCreatedMs: undefined })).kind).toBe('current');
    expect(decide(input({ kind: 'CronJob', key: 'other', podsCreatedMs: undefined })).kind).toBe('current');
  });

  it('asks for the pods only when they decide something', () => {
    expect(needsPods('Deployment', { [CFG]: 'new' }, { configs: { [CFG]: 'old' } })).toBe(true);
    expect(needsPods('Deployment', { [CFG]: 'old' }, { configs: { [CFG]: 'old' } })).toBe(false);
    expect(needsPods('Deployment', { [CFG]: 'new' }, undefined)).toBe(false);
    expect(needsPods('CronJob', { [CFG]: 'new' }, { configs: { [CFG]: 'old' } })).toBe(false);
  });
});

describe('new objects of old names', () => {
  const entry = { configs: { [CFG]: 'd', [SEC]: 'd' }, uid: 'w1', configUids: { [CFG]: 'c1', [SEC]: 's1' } };
  const facts: Record<string, ConfigFacts> = {
    [CFG]: { uid: 'c2', writtenAtMs: WRITE },
    [SEC]: { uid: 's1', writtenAtMs: WRITE },
  };
  it('tells a recreated workload and recreated configs by their uids', () => {
    expect(recreated({ uid: 'w2', entry, config: (id) => facts[id] })).toEqual({
      workload: true,
      configs: [CFG],
    });
    expect(recreated({ uid: 'w1', entry, config: (id) => facts[id] })).toEqual({
      workload: false,
      configs: [CFG],
    });
  });

  it('says nothing of entries written before uids were recorded, or of deleted configs', () => {
    expect(recreated({ uid: 'w2', entry: { configs: { [CFG]: 'd' } }, config: (id) => facts[id] })).toEqual({
      workload: false,
      configs: [],
    });
    expect(recreated({ uid: 'w1', entry, config: () => undefined })).toEqual({
      workload: false,
      configs: [],
    });
  });
});

describe('newestWrite', () => {
  it('is the latest managedFields time or the creation', () => {
    expect(
      newestWrite({
        creationTimestamp: '2026-12-04T09:00:00Z',
        managedFields: [{ time: '2026-12-04T09:30:00Z' }, { time: '2026-12-04T09:10:00Z' }, {}],
      }),
    ).toBe(T('2026-12-04T09:30:00Z'));
    expect(
      newestWrite({
        creationTimestamp: '2026-12-04T09:00:00Z',
        managedFields: [{ time: '2026-12-04T08:00:00Z' }],
      }),
    ).toBe(T('2026-12-04T09:00:00Z'));
    expect(newestWrite({ creationTimestamp: new Date(WRITE), managedFields: [{ time: null }] })).toBe(WRITE);
  });

  it('is unknown without managedFields: a later update may have left no trace', () => {
    expect(newestWrite({ creationTimestamp: '2026-12-04T09:00:00Z' })).toBeUndefined();
    expect(newestWrite({ creationTimestamp: '2026-12-04T09:00:00Z', managedFields: [] })).toBeUndefined();
    expect(newestWrite({ managedFields: [{ time: 'not a time' }] })).toBeUndefined();
  });
});

describe('a workload first seen at start (no ledger entry)', () => {
  const LEDGER = T('2026-12-04T09:00:00Z');
  const CREATED = T('2026-12-04T09:30:00Z');
  const first = (over: Partial<CatchUpInput> & { facts?: Record<string, ConfigFacts> }) =>
    input({ entry: undefined, createdMs: CREATED, ledgerWrittenMs: LEDGER, ...over });

  it('created while down, its config changed after its pods started: reloads that config', () => {
    const i = first({ podsCreatedMs: [CREATED + 2_000] });
    expect(needsPods('Deployment', i.set, undefined, {}, i)).toBe(true);
    expect(decide(i)).toEqual({ kind: 'reload', changed: [CFG] });
  });

  it('created while down, pods newer than the config’s last write: baseline (issue 26’s guard)', () => {
    expect(decide(first({ podsCreatedMs: [WRITE + 1_000] }))).toEqual({ kind: 'baseline' });
  });

  it('counts only config writes after the workload’s creation (an earlier one was there before its pods)', () => {
    const facts = { [CFG]: { uid: 'c', writtenAtMs: CREATED - 1_000 } };
    expect(decide(first({ facts, podsCreatedMs: [CREATED - 5_000] }))).toEqual({ kind: 'baseline' });
    // The same second as the creation may be after it: it counts.
    const tie = { [CFG]: { uid: 'c', writtenAtMs: CREATED + 900 } };
    expect(decide(first({ facts: tie, podsCreatedMs: [CREATED + 100] })).kind).toBe('reload');
  });

  it('a first install (the ledger never written) restarts nothing', () => {
    const i = first({ ledgerWrittenMs: undefined, podsCreatedMs: [CREATED + 2_000] });
    expect(needsPods('Deployment', i.set, undefined, {}, i)).toBe(false);
    expect(decide(i)).toEqual({ kind: 'baseline' });
  });

  it('one that existed while the service ran (newly opted in, newly in scope) restarts nothing', () => {
    // Created before the ledger's newest write: the service saw it, and only pod-less changes since.
    for (const createdMs of [LEDGER - 60_000, LEDGER, LEDGER + 999]) {
      const i = first({ createdMs, podsCreatedMs: [createdMs] });
      expect(needsPods('Deployment', i.set, undefined, {}, i)).toBe(false);
      expect(decide(i)).toEqual({ kind: 'baseline' });
    }
  });

  it('without its creation time, without pods to judge by, or with a reload request only: baseline', () => {
    expect(decide(first({ createdMs: undefined, podsCreatedMs: [CREATED + 2_000] })).kind).toBe('baseline');
    expect(decide(first({ kind: 'CronJob', podsCreatedMs: undefined })).kind).toBe('baseline');
    expect(decide(first({ podsCreatedMs: [] })).kind).toBe('baseline');
    const facts = { [CFG]: { uid: 'c', writtenAtMs: undefined } };
    expect(decide(first({ facts, podsCreatedMs: [CREATED + 2_000] })).kind).toBe('baseline');
    expect(decide(first({ set: { [REQUEST]: 'r1' }, podsCreatedMs: [CREATED + 2_000] })).kind).toBe(
      'baseline',
    );
  });
});

describe('the same second: decided by what the objects tell (issue 34, finding 4)', () => {
  const LEDGER = T('2026-12-04T09:00:00Z');
  const NS = WRITE - 2_000; // the namespace, created again while the service was down
  const once = { uid: 'c2', writtenAtMs: WRITE, onlyCreated: true, required: true };
  const tie = (facts: ConfigFacts, over: Partial<CatchUpInput> = {}) =>
    decide(
      input({
        facts: { [CFG]: facts },
        podsCreatedMs: [WRITE + 400],
        ledgerWrittenMs: LEDGER,
        namespaceCreatedMs: NS,
        ...over,
      }),
    ).kind;

  it('a config never written since its creation, required by pods in its second, in a namespace created while down: not a change the pods missed', () => {
    expect(tie(once)).toBe('current');
    // Created while down with no ledger entry (a new app of one sync): a baseline.
    expect(tie(once, { entry: undefined, createdMs: WRITE })).toBe('baseline');
  });

  it('stays "before" wherever one of those facts is missing', () => {
    expect(tie({ ...once, onlyCreated: false })).toBe('reload'); // written again after its creation
    expect(tie({ ...once, required: false })).toBe('reload'); // optional: a pod may have run without it
    expect(tie(once, { namespaceCreatedMs: LEDGER - 60_000 })).toBe('reload'); // the namespace is older
    expect(tie(once, { namespaceCreatedMs: undefined })).toBe('reload'); // cannot be read
    expect(tie(once, { ledgerWrittenMs: undefined })).toBe('reload');
    // A pod in an earlier second than the config is before it, whatever else.
    expect(tie(once, { podsCreatedMs: [WRITE - 1_000] })).toBe('reload');
  });
});
