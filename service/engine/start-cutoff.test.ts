// A term's start, driven by hand (test/support/engine-fakes.ts): the cutoff of a pending reload whose
// configs changed again while no replica acted, and of a change seen while the term starts (ADR 0030).
// Each is a case the execution-level simulation found replacing pods a second time (seeds 115, 895);
// startup.test.ts has the catch-up rule's own cases. And a write seen while the term starts, on a
// workload seen for the first time: a change, not its baseline (core/configs-before.ts).
import { describe, expect, it } from 'vitest';
import { engineWorld } from '../../test/support/engine-fakes.ts';
import { effectiveCutoff } from '../core/cutoff.ts';
import { watchedSet } from '../core/plan.ts';
import type { ConfigRecord } from '../core/records.ts';
import { configRecord } from '../kube/to-record.ts';

const ID = 'Deployment/a/web';
const KEY = Buffer.alloc(32, 7); // engineWorld's hash key

/** A ConfigMap as the watch shows it, with the time of its last write in managedFields. */
function written(data: Record<string, string>, atMs: number, rv: string): ConfigRecord {
  const at = new Date(atMs).toISOString().replace('.000Z', 'Z');
  return configRecord(
    'ConfigMap',
    {
      metadata: {
        name: 'cm',
        namespace: 'a',
        uid: 'uid-cm',
        resourceVersion: rv,
        creationTimestamp: '2025-01-01T00:00:00Z',
        managedFields: [{ time: at }],
      },
      data,
    },
    KEY,
  ) as ConfigRecord;
}

function setUp() {
  const w = engineWorld(['--min-reload-interval=0s']);
  const start = w.time.clock.now;
  w.state.putConfig(written({ k: '1' }, start - 600_000, '10'));
  w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
  const digests = () => {
    const t = w.state.workloads.get(ID);
    if (!t) throw new Error('no workload');
    return watchedSet(t.rec, t.parsed, w.state, w.globals).digests;
  };
  return { w, start, digests };
}

describe('a reload decided when a term starts', () => {
  it('for a pending reload whose target is stale, cuts off at the newest write of what is not yet applied', async () => {
    const { w, start, digests } = setUp();
    const applied = digests();
    w.state.putConfig(written({ k: '2' }, start - 120_000, '20'));
    // The last term left the reload of k=2 pending; k=3 was written while no replica acted.
    await w.ledger.put(ID, {
      configs: applied,
      pending: {
        cutoff: new Date(effectiveCutoff(start - 120_000)).toISOString(),
        target: digests(),
        changed: ['ConfigMap/a/cm'],
        startedAt: new Date(start - 110_000).toISOString(),
        targets: ['uid-old'],
      },
    });
    const change = start - 30_000;
    w.state.putConfig(written({ k: '3' }, change, '30'));
    await w.reconciler.start();
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    const a = w.strategies.runs[0]?.req.action;
    expect(a?.cutoffMs).toBe(effectiveCutoff(change));
    // A new reload: its snapshot was of the old target.
    expect(a?.targets).toBeUndefined();
  });
});

describe('a change seen while a term starts', () => {
  it('keeps the time it was seen: a slow start-up does not move its cutoff', async () => {
    const { w, start, digests } = setUp();
    await w.ledger.put(ID, { configs: digests() });
    // The start-up sweep takes 30 s (a LIST that times out).
    let release: () => void = () => undefined;
    w.strategies.sweep = () => new Promise<void>((r) => (release = r));
    const starting = w.reconciler.start();
    await w.settle();
    w.change('a', 'cm', { k: '2' });
    const seen = w.time.clock.now;
    await w.time.advance(start + 30_000);
    release();
    await starting;
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.strategies.runs[0]?.req.action.cutoffMs).toBe(effectiveCutoff(seen));
  });
});

/** Holds the ledger's load (a LIST of a busy API server) until released. */
function slowLoad(w: ReturnType<typeof setUp>['w']): () => void {
  const load = w.ledger.load.bind(w.ledger);
  let release: () => void = () => undefined;
  w.ledger.load = () => new Promise((r) => (release = () => r(load())));
  return () => release();
}

describe('a change seen while a term starts, on a workload seen for the first time', () => {
  it('is a change: the baseline is what the start first saw, and the replay reloads once', async () => {
    const { w, digests } = setUp();
    const first = digests();
    const release = slowLoad(w);
    const starting = w.reconciler.start();
    await w.settle();
    w.change('a', 'cm', { k: '2' });
    expect(digests()).not.toEqual(first);
    release();
    await starting;
    expect(w.ledger.writes[0]).toEqual([ID, { configs: first }]);
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.strategies.runs[0]?.req.action.changed).toEqual(['ConfigMap/a/cm']);
  });

  it('a config deleted during the start is baselined as it was', async () => {
    const { w, digests } = setUp();
    const first = digests();
    const release = slowLoad(w);
    const starting = w.reconciler.start();
    await w.settle();
    w.remove('a', 'cm');
    release();
    await starting;
    expect(w.ledger.writes[0]).toEqual([ID, { configs: first }]);
  });

  it('a config created during the start is seen as it is: a config and its workload in one apply reload nothing', async () => {
    const w = engineWorld(['--min-reload-interval=0s']);
    w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
    const release = slowLoad(w);
    const starting = w.reconciler.start();
    await w.settle();
    w.change('a', 'cm', { k: '1' });
    release();
    await starting;
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const t = w.state.workloads.get(ID);
    if (!t) throw new Error('no workload');
    expect(w.ledger.get(ID)?.configs).toEqual(watchedSet(t.rec, t.parsed, w.state, w.globals).digests);
    expect(w.strategies.runs).toHaveLength(0);
  });

  it('a workload created during the start reads what is there when it is: a write before it is not its change', async () => {
    const { w, digests } = setUp();
    const release = slowLoad(w);
    const starting = w.reconciler.start();
    await w.settle();
    // One apply: the shared config changed, and a new Deployment that uses it.
    w.change('a', 'cm', { k: '2' });
    const { now, old } = w.state.putWorkload(
      w.deployment('a', 'new', 'cm') as NonNullable<ReturnType<typeof w.deployment>>,
    );
    w.reconciler.workloadChanged(old, now);
    release();
    await starting;
    for (let i = 0; i < 5; i++) {
      await w.time.advance(w.time.clock.now + 1000);
      await w.settle();
    }
    // web, there before the start, reloads; new is baselined at what its pods read, and does not.
    expect(w.ledger.get('Deployment/a/new')?.configs).toEqual(digests());
    expect(w.strategies.runs.map((r) => r.req.action.workload)).toEqual([ID]);
  });

  it("a config's problem is reported once by a start that saw no write (one Event per workload)", async () => {
    const w = engineWorld(['--min-reload-interval=0s']);
    // "True" is not "true": the config is not ignored (as in Reloader), and the workload is told so.
    w.change('a', 'cm', { k: '1' }, { 'reloader.stakater.com/ignore': 'True' });
    w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
    await w.reconciler.start();
    await w.settle();
    expect(w.ledger.get(ID)?.configs).toBeDefined();
    expect(w.events.filter((e) => e.reason === 'ReloadConfigInvalid')).toHaveLength(1);
  });
});
