// The reconciler driven one step at a time: fake clock and timers, a ledger in memory, strategies
// whose runs the test ends by hand (test/support/engine-fakes.ts).
import { describe, expect, it } from 'vitest';
import { engineWorld } from '../test/support/engine-fakes.ts';
import { watchedSet } from './core/plan.ts';

const ID = 'Deployment/a/web';

async function world(flags: string[], annotations: Record<string, string> = {}) {
  const w = engineWorld(flags);
  const cm = w.putConfigMap('a', 'cm', { k: '1' });
  w.state.putConfig(cm);
  w.state.putWorkload(
    w.deployment('a', 'web', 'cm', annotations) as NonNullable<ReturnType<typeof w.deployment>>,
  );
  await w.reconciler.start();
  const target = () => {
    const t = w.state.workloads.get(ID);
    if (!t) throw new Error('no workload');
    return watchedSet(t.rec, t.parsed, w.state, w.globals).digests;
  };
  return { ...w, target };
}

/** A world with the given deadline, whose config changed: its reload is running, not yet ended. */
async function runningReload(deadline: string) {
  const w = await world(['--min-reload-interval=0s', `--reload-deadline=${deadline}`]);
  w.change('a', 'cm', { k: '2' });
  await w.time.advance(w.time.clock.now + 1000);
  await w.settle();
  return { w, run: w.strategies.runs[0], start: w.time.clock.now };
}

/** A started world whose Deployment web reads ConfigMaps cm and db. */
async function twoConfigs(flags: string[], o: Parameters<typeof engineWorld>[1] = {}) {
  const w = engineWorld(flags, o);
  const cm = w.putConfigMap('a', 'cm', { k: '1' });
  w.state.putConfig(cm);
  w.state.putConfig(w.putConfigMap('a', 'db', { u: 'x' }));
  w.state.putWorkload(w.deployment('a', 'web', ['cm', 'db']) as NonNullable<ReturnType<typeof w.deployment>>);
  await w.reconciler.start();
  return { ...w, cm };
}

describe('Reconciler, step by step', () => {
  it('records a baseline at start and reloads a change once the debounce has passed', async () => {
    const w = await world([]);
    expect(w.ledger.get(ID)?.configs).toEqual(w.target());
    w.change('a', 'cm', { k: '2' });
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0); // still debouncing
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    const run = w.strategies.runs[0];
    expect(run?.req.action.target).toEqual(w.target());
    expect(w.ledger.get(ID)?.pending?.target).toEqual(w.target());
    run?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.ledger.get(ID)).toMatchObject({ configs: w.target() });
    expect(w.ledger.get(ID)?.pending).toBeUndefined();
    expect(w.events.map((e) => e.reason)).toContain('Reloaded');
  });

  it('tells the chat alerts of the first failed attempt of a run and of the completed reload, nothing of the retries between', async () => {
    const w = await world(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    for (let attempt = 0; attempt < 3; attempt++) {
      await w.time.advance(w.time.clock.now + 60_000);
      await w.settle();
      w.strategies.runs[attempt]?.end({
        kind: 'failed',
        error: new Error(`boom ${attempt}`),
        errorKind: 'update_workload',
      });
      await w.settle();
    }
    expect(w.events.filter((e) => e.reason === 'ReloadFailed')).toHaveLength(3);
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    w.strategies.runs[3]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    const workload = { kind: 'Deployment', namespace: 'a', name: 'web' };
    expect(w.alerts).toEqual([
      { outcome: 'failed', workload, changed: ['ConfigMap/a/cm'], error: 'boom 0' },
      { outcome: 'reloaded', workload, changed: ['ConfigMap/a/cm'] },
    ]);
  });

  it('finding 1: the retry of an older reload never replaces the newer one queued, and the ledger ends on the newest', async () => {
    // A1 fails and will be retried in 2 s; A2 (a newer change) waits out the 10 s minimum interval;
    // the retry of A1 arrives while A2 is queued. What runs must be A2, with its target and cutoff.
    const w = await world(['--min-reload-interval=10s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const a1 = w.strategies.runs[0];
    expect(a1).toBeDefined();
    const t1 = a1?.req.action.target;
    a1?.end({ kind: 'failed', error: new Error('boom'), errorKind: 'update_workload' });
    await w.settle();
    const failedAt = w.time.clock.now;
    expect(w.events.map((e) => e.reason)).toContain('ReloadFailed');

    await w.time.advance(failedAt + 200);
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(failedAt + 1300); // A2 planned and queued behind the minimum interval
    await w.settle();
    const t2 = w.target();
    expect(t2).not.toEqual(t1);
    expect(w.strategies.runs).toHaveLength(1);

    await w.time.advance(failedAt + 2500); // the retry of A1 fires
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);

    await w.time.advance(failedAt + 10_000); // the interval is over: the queued action runs
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    const a2 = w.strategies.runs[1];
    expect(a2?.req.action.target).toEqual(t2);
    expect(a2?.req.action.cutoffMs).toBeGreaterThan(a1?.req.action.cutoffMs as number);
    expect(a2?.req.action.changed).toEqual(['ConfigMap/a/cm']);
    a2?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.ledger.get(ID)?.configs).toEqual(t2);

    // Nothing else runs later: the retry was covered by the newer reload.
    await w.time.advance(failedAt + 120_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.ledger.get(ID)?.configs).toEqual(t2);
  });

  it('finding 1: a retry that fires after the newer reload completed runs nothing and leaves the newest target recorded', async () => {
    const w = await world(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const a1 = w.strategies.runs[0];
    a1?.end({ kind: 'failed', error: new Error('boom'), errorKind: 'update_workload' });
    await w.settle();
    const failedAt = w.time.clock.now;
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(failedAt + 1000);
    await w.settle();
    const a2 = w.strategies.runs[1];
    expect(a2?.req.action.target).toEqual(w.target());
    a2?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    const writes = w.ledger.writes.length;
    await w.time.advance(failedAt + 60_000); // the retry of A1 (due at +2 s) has fired
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.ledger.get(ID)?.configs).toEqual(w.target());
    expect(w.ledger.writes.length).toBe(writes);
  });

  it('a waiting strategy is retried after the delay it asked for, with the same target', async () => {
    const w = await world(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    w.strategies.runs[0]?.end({ kind: 'waiting', why: 'a Job still runs', retryMs: 7000 });
    await w.settle();
    const at = w.time.clock.now;
    await w.time.advance(at + 6999);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    await w.time.advance(at + 7000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.strategies.runs[1]?.req.action).toMatchObject({ target: w.target(), resumed: true });
  });

  it('a run past --reload-deadline is cut, reported, and retried from the same change', async () => {
    const { w, run: a1 } = await runningReload('30s');
    await w.time.advance(w.time.clock.now + 30_000);
    expect(a1?.req.signal.aborted).toBe(true);
    a1?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.events.find((e) => e.reason === 'ReloadStalled')?.message).toMatch(
      /attempt 1 made no progress for 30s/,
    );
    await w.time.advance(w.time.clock.now + 2000);
    await w.settle();
    expect(w.strategies.runs[1]?.req.action.cutoffMs).toBe(a1?.req.action.cutoffMs);
  });

  it('a run that keeps making progress is not cut at --reload-deadline, however long it takes (finding 4)', async () => {
    const { w, run: a1, start } = await runningReload('10s');
    // A pod replaced every 8 s for 80 s: eight deadline periods in all, never one without progress.
    for (let t = 8_000; t <= 80_000; t += 8_000) {
      await w.time.advance(start + t);
      expect(a1?.req.signal.aborted).toBe(false);
      a1?.req.onProgress();
    }
    a1?.end({ kind: 'done', replaced: 10, summary: 'restarted' });
    await w.settle();
    expect(w.events.map((e) => e.reason)).toEqual(['Reloaded']);
    expect(w.ledger.get(ID)).toMatchObject({ configs: w.target() });
    await w.time.advance(w.time.clock.now + 120_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
  });

  it('a run is cut one deadline period after its last progress', async () => {
    const { w, run: a1, start } = await runningReload('10s');
    await w.time.advance(start + 6_000);
    a1?.req.onProgress();
    await w.time.advance(start + 15_999);
    expect(a1?.req.signal.aborted).toBe(false);
    await w.time.advance(start + 16_000);
    expect(a1?.req.signal.aborted).toBe(true);
    a1?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.events.find((e) => e.reason === 'ReloadStalled')?.message).toMatch(/attempt 1 made no progress/);
  });

  it('holds a change outside its restart window, joins a later change to it, and runs the newest once the window opens', async () => {
    const w = await world(['--min-reload-interval=0s'], {
      'gitops-reloader.io/restart-window': '02:00-03:00',
    });
    const start = w.time.clock.now; // 00:00 UTC
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(start + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    expect(w.events.find((e) => e.reason === 'ReloadDeferred')?.message).toMatch(
      /held until 2026-01-01T02:00:00/,
    );
    expect(w.ledger.get(ID)?.pending).toBeDefined();
    await w.time.advance(start + 30 * 60_000);
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(start + 30 * 60_000 + 1000);
    await w.settle();
    await w.time.advance(start + 2 * 3_600_000 - 1);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    await w.time.advance(start + 2 * 3_600_000 + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.strategies.runs[0]?.req.action.target).toEqual(w.target());
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.ledger.get(ID)).toMatchObject({ configs: w.target() });
    expect(w.ledger.get(ID)?.pending).toBeUndefined();
  });

  it('reads pause-period as a trailing window: two changes 5 s apart roll out once, when the window after the first ends (issue 37)', async () => {
    const w = await world(['--min-reload-interval=0s'], {
      'deployment.reloader.stakater.com/pause-period': '60s',
    });
    const first = w.time.clock.now;
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(first + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0); // the first change waits too
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(first + 6000);
    await w.settle();
    await w.time.advance(first + 59_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    await w.time.advance(first + 62_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    const run = w.strategies.runs[0];
    expect(run?.req.action.target).toEqual(w.target()); // the newest content, k=3
    run?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    // A change after the window opens the next one.
    w.change('a', 'cm', { k: '4' });
    await w.time.advance(w.time.clock.now + 30_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    await w.time.advance(w.time.clock.now + 31_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
  });

  it('finding 8: the surge sweep spares in-scope pending and running reloads only, and is told every reloaded workload', async () => {
    // Namespace b left the scope after a reload of b/api was cut: its entry (pending) is still in the ledger.
    const w = engineWorld(['--surge-sweep-interval=1m'], { inScope: (ns) => ns !== 'b' });
    for (const ns of ['a', 'b']) w.state.putConfig(w.putConfigMap(ns, 'cm', { k: '1' }));
    for (const [ns, name] of [
      ['a', 'web'],
      ['b', 'api'],
    ] as const) {
      w.state.putWorkload(w.deployment(ns, name, 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
    }
    await w.reconciler.start();
    expect(w.strategies.sweeps[0]).toEqual({ pending: new Set(), reloaded: [ID] });
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    const cut = w.ledger.get(ID);
    expect(cut?.pending).toBeDefined();
    w.ledger.map.set('Deployment/b/api', structuredClone(cut) as NonNullable<typeof cut>);
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    expect(w.strategies.sweeps).toHaveLength(2);
    // a/web runs (and is pending): spared; b/api is pending but out of scope, so it is never resumed.
    expect(w.strategies.sweeps[1]?.pending).toEqual(new Set(['uid-web']));
    expect(w.strategies.sweeps[1]?.reloaded.sort()).toEqual(['Deployment/a/web', 'Deployment/b/api']);
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.reconciler.stop();
  });

  it('a deleted config reloads nothing by default, and records nothing for it', async () => {
    const w = await world([]);
    const before = w.ledger.get(ID)?.configs;
    w.remove('a', 'cm');
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    // No reload was planned at all (one would be held here, since the pods need the config).
    expect(w.events.map((e) => e.reason)).not.toContain('ReloadHeld');
    expect(w.ledger.get(ID)?.configs).toEqual(before);
    // Back with the content the pods run: still nothing to do.
    w.change('a', 'cm', { k: '1' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
  });

  it('with --reload-on-delete a deletion is a change, and its reload is held while the pods need the config', async () => {
    const w = await world(['--reload-on-delete']);
    const before = w.ledger.get(ID)?.configs;
    w.remove('a', 'cm');
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    expect(w.events.find((e) => e.reason === 'ReloadHeld')?.message).toMatch(/ConfigMap\/cm does not exist/);
    expect(w.ledger.get(ID)).toEqual({ configs: before });
  });

  it('holds a reload of another change while a needed config is missing, and runs it when the config is back', async () => {
    const w = await twoConfigs([]);
    const applied = w.ledger.get(ID)?.configs;
    w.remove('a', 'db');
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    const held = w.events.filter((e) => e.reason === 'ReloadHeld');
    expect(held).toHaveLength(1);
    expect(held[0]?.message).toMatch(/^ConfigMap\/cm changed; reload held: ConfigMap\/db does not exist/);
    expect(w.ledger.get(ID)).toEqual({ configs: applied });
    // The config's return is the change that plans the reload again, naming what differs (it runs
    // once --min-reload-interval, 10 s, has passed since the held one).
    w.change('a', 'db', { u: 'x' });
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    const run = w.strategies.runs[0];
    expect(run?.req.action.changed).toEqual(['ConfigMap/a/cm']);
    run?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    const t = w.state.workloads.get(ID);
    expect(w.ledger.get(ID)?.configs).toEqual(t && watchedSet(t.rec, t.parsed, w.state, w.globals).digests);
  });

  it('a config deleted and created again with the same data while a reload runs plans no second reload: the retry keeps its cutoff and pods (simulation seeds 749, 1895)', async () => {
    // Each event of the other config is judged against the ledger, which the running reload has not
    // written yet: both find the first change again. Taken for new content (a deleted config's digest
    // is "missing"), they planned a reload with a cutoff from their own observation, which superseded
    // the first run's retry and replaced the pods that run had already created after the change.
    const w = await twoConfigs(['--min-reload-interval=0s', '--reload-deadline=30s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const a1 = w.strategies.runs[0];
    expect(a1).toBeDefined();
    w.remove('a', 'db');
    await w.time.advance(w.time.clock.now + 2000);
    await w.settle();
    w.change('a', 'db', { u: 'x' }); // back, with the data the pods run
    await w.time.advance(w.time.clock.now + 2000);
    await w.settle();
    await w.time.advance(w.time.clock.now + 30_000); // the first run passes its deadline
    a1?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 2000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    const a2 = w.strategies.runs[1]?.req.action;
    expect(a2).toMatchObject({
      cutoffMs: a1?.req.action.cutoffMs,
      resumed: true,
      changed: ['ConfigMap/a/cm'],
    });
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    const t = w.state.workloads.get(ID);
    expect(w.ledger.get(ID)?.configs).toEqual(t && watchedSet(t.rec, t.parsed, w.state, w.globals).digests);
  });

  it('a reload held for a missing config while an older one waits for its retry is planned again when the config returns (simulation seed 407)', async () => {
    // A1 runs; A2 (a newer change) queues behind it; the config is deleted; A1 fails and will be
    // retried; A2 runs and is held, its config missing. A1's pending retry must not leave A2's content
    // marked as under way, or the config's return, the change that plans A2 again, is taken for a
    // duplicate and dropped: the pods would keep the old data until an unrelated restart.
    const w = await world(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(w.time.clock.now + 1000); // A2 planned, queued behind the running A1
    await w.settle();
    w.remove('a', 'cm');
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('boom'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.events.filter((e) => e.reason === 'ReloadHeld')).toHaveLength(1);
    await w.time.advance(w.time.clock.now + 5000); // A1's retry fires and finds itself superseded
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    w.change('a', 'cm', { k: '3' }); // the config comes back with the data A2 was for
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.strategies.runs[1]?.req.action.target).toEqual(w.target());
  });

  it('a reload that began and was held for a missing config resumes with its pod snapshot when the config returns (simulation seeds 4, 255)', async () => {
    // The pods it replaced before the config went were created after the change: a reload planned
    // afresh at the config's return would replace them a second time for the same change (I3). And
    // the reload planned while the config was missing (held, newer) must not supersede it.
    const w = await twoConfigs(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const first = w.strategies.runs[0];
    const target = first?.req.action.target;
    await first?.req.begin(['old-pod-1', 'old-pod-2']); // the snapshot, recorded as the run began
    first?.end({ kind: 'failed', error: new Error('boom'), errorKind: 'update_workload' });
    await w.settle();
    w.remove('a', 'db'); // a newer reload is planned (db now reads "missing"), and held
    await w.time.advance(w.time.clock.now + 5000); // the older one's retry is superseded
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.events.filter((e) => e.reason === 'ReloadHeld')).toHaveLength(1);
    expect(w.ledger.get(ID)?.pending?.targets).toEqual(['old-pod-1', 'old-pod-2']);
    w.change('a', 'db', { u: 'x' }); // back, with the data the first reload was for
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.strategies.runs[1]?.req.action).toMatchObject({
      resumed: true,
      targets: ['old-pod-1', 'old-pod-2'],
      target,
    });
  });

  it('a workload deleted while its reload runs leaves no ledger entry behind (simulation seed 8)', async () => {
    // Kept, the entry would outlive the workload, and a new workload of the same name would be judged
    // against it: reloaded for configs its new pods already read (issue 26).
    const w = await world(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    w.state.deleteWorkload(ID);
    await w.reconciler.workloadDeleted(ID);
    expect(w.ledger.get(ID)).toBeDefined(); // the run is still going: it records its own outcome
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 0, summary: 'nothing left' });
    await w.settle();
    expect(w.ledger.get(ID)).toBeUndefined();
  });

  it('the periodic sweep removes the entry of a workload whose removal failed when it was deleted (simulation seed 12)', async () => {
    const w = await world(['--surge-sweep-interval=1m']);
    w.state.deleteWorkload(ID);
    const remove = w.ledger.remove.bind(w.ledger);
    w.ledger.remove = async () => {
      throw new Error('HTTP 500');
    };
    await w.reconciler.workloadDeleted(ID);
    w.ledger.remove = remove;
    expect(w.ledger.get(ID)).toBeDefined();
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    expect(w.ledger.get(ID)).toBeUndefined();
  });

  it('a batch of something else does not roll out a change the Argo CD gate holds (simulation seed 2231)', async () => {
    // db's change is held while its app syncs; a metadata-only edit of cm (a relevant annotation) makes
    // a batch whose verdict finds db's digest changed. The held change must wait for its release.
    const DB = 'ConfigMap/a/db';
    const gate = {
      attach() {},
      detach() {},
      hold: (c: { config: string }) => c.config === DB,
      holding: (_w: string, c: string) => c === DB,
    };
    const { cm, ...w } = await twoConfigs([], { gate });
    w.change('a', 'db', { u: 'y' }); // held by the gate
    const edited = { ...cm, annotations: { 'argocd.argoproj.io/sync-wave': '1' } };
    w.reconciler.configChanged(w.state.putConfig(edited), edited);
    await w.time.advance(w.time.clock.now + 5000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
  });

  it('a reload planned before a completed one applied its content runs nothing, and records no deletion (simulation seed 860)', async () => {
    // A1 (cm changed) runs; db is deleted meanwhile, so A2 is planned against the old record with the
    // same content and db "missing". Once A1 is recorded, A2 has nothing to do: a deletion alone is no
    // change, and its pods (A1's, created after the change) must not be replaced again.
    const w = await twoConfigs(['--min-reload-interval=0s']);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const a1 = w.strategies.runs[0];
    w.strategies.exists = () => true; // db is an optional reference: its pods can start without it
    w.remove('a', 'db');
    await w.time.advance(w.time.clock.now + 1000); // A2 planned, queued behind A1
    await w.settle();
    a1?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.ledger.get(ID)?.configs).toEqual(a1?.req.action.target);
  });

  it('a baseline the ledger refused is recorded again later, so a later change of its config reloads (simulation seed 1740)', async () => {
    const w = await world(['--min-reload-interval=0s']);
    w.state.putConfig(w.putConfigMap('a', 'db', { u: 'x' }));
    const put = w.ledger.put.bind(w.ledger);
    w.ledger.put = async () => {
      throw new Error('HTTP 500');
    };
    // The workload now reads db too: its record must say so, or db's next change passes for new.
    const t = w.deployment('a', 'web', ['cm', 'db']) as NonNullable<ReturnType<typeof w.deployment>>;
    const { old, now } = w.state.putWorkload(t);
    w.reconciler.workloadChanged(old, now);
    w.reconciler.configChanged(undefined, w.state.get({ kind: 'ConfigMap', namespace: 'a', name: 'db' }));
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    w.ledger.put = put;
    expect(Object.keys(w.ledger.get(ID)?.configs ?? {})).toEqual(['ConfigMap/a/cm']);
    await w.time.advance(w.time.clock.now + 5000); // the retry records it
    await w.settle();
    expect(w.ledger.get(ID)?.configs).toEqual(w.target());
    w.change('a', 'db', { u: 'y' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
  });

  it('at start, a config deleted while down reloads nothing unless --reload-on-delete', async () => {
    for (const [flags, runs] of [
      [[], 0],
      [['--reload-on-delete'], 1],
    ] as const) {
      const w = engineWorld([...flags]);
      const cm = w.putConfigMap('a', 'cm', { k: '1' });
      w.state.putConfig(cm);
      w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
      const t = w.state.workloads.get(ID);
      if (!t) throw new Error('no workload');
      const applied = watchedSet(t.rec, t.parsed, w.state, w.globals).digests;
      await w.ledger.put(ID, { configs: applied });
      w.state.deleteConfig(cm.ref);
      await w.reconciler.start();
      await w.time.advance(w.time.clock.now + 1000);
      await w.settle();
      expect(w.strategies.sweeps[0]).toBeDefined(); // the term started, and swept
      // With the flag the reload is planned, and held: the pods need the config.
      expect(w.events.filter((e) => e.reason === 'ReloadHeld')).toHaveLength(runs);
      expect(w.strategies.runs).toHaveLength(0);
      expect(w.ledger.get(ID)?.configs).toEqual(applied);
    }
  });
});

describe('Reconciler: every decision not to reload a change names it', () => {
  const named = (w: { logs: Array<{ msg: string; [k: string]: unknown }> }, msg: string) =>
    w.logs.filter((l) => l.msg === msg);

  it('a change with the same data and annotations: one line with the config and its resourceVersion', async () => {
    const w = await world([]);
    const rec = w.change('a', 'cm', { k: '1' });
    expect(named(w, 'config change needs no reload: its data and annotations are unchanged')).toEqual([
      expect.objectContaining({ config: 'ConfigMap/a/cm', resourceVersion: rec.resourceVersion }),
    ]);
    await w.time.advance(w.time.clock.now + 5000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
  });

  it('a change in a namespace out of scope: one line naming it', async () => {
    const w = engineWorld([], { inScope: (ns) => ns === 'a' });
    await w.reconciler.start();
    const rec = w.change('b', 'cm', { k: '1' });
    expect(named(w, 'config change ignored: its namespace is not in scope')).toEqual([
      expect.objectContaining({ config: 'ConfigMap/b/cm', resourceVersion: rec.resourceVersion }),
    ]);
  });

  it('a change no workload reloads on: the config changed line names it, with affected 0', async () => {
    const w = await world([]);
    const rec = w.change('a', 'other', { k: '2' });
    expect(named(w, 'config changed')).toEqual([
      expect.objectContaining({
        config: 'ConfigMap/a/other',
        resourceVersion: rec.resourceVersion,
        affected: 0,
      }),
    ]);
  });

  it('a metadata edit: the batch says no reload is needed, naming the config and the resourceVersion it judged', async () => {
    const w = await world([]);
    const rec = w.change('a', 'cm', { k: '1' }, { 'argocd.argoproj.io/sync-wave': '1' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    expect(named(w, 'no reload needed')).toEqual([
      expect.objectContaining({
        workload: 'Deployment/web',
        configs: ['ConfigMap/a/cm'],
        resourceVersions: { 'ConfigMap/a/cm': rec.resourceVersion },
      }),
    ]);
  });

  it('a reload names the change it was planned for (changeRV), so a wait for one change cannot take an earlier reload', async () => {
    const w = await world([]);
    const rec = w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(named(w, 'reload started')).toEqual([
      expect.objectContaining({ workload: 'Deployment/web', changeRV: rec.resourceVersion }),
    ]);
  });

  it('a change of a config the workload reads but does not reload on: a line naming it', async () => {
    const w = engineWorld([]);
    w.state.putConfig(w.putConfigMap('a', 'cm', { k: '1' }));
    const web = w.deployment('a', 'web', 'cm', { 'reloader.stakater.com/auto': 'false' });
    w.state.putWorkload(web as NonNullable<typeof web>);
    await w.reconciler.start();
    const rec = w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    expect(named(w, 'no reload: the workload reloads on none of its configs')).toEqual([
      expect.objectContaining({
        workload: 'Deployment/web',
        resourceVersions: { 'ConfigMap/a/cm': rec.resourceVersion },
      }),
    ]);
  });
});
