// Progressive reloads driven one step at a time through the reconciler: fake clock and timers, a
// ledger in memory, strategies whose runs the test ends by hand and whose pods' health it sets.
import { describe, expect, it } from 'vitest';
import { engineWorld } from '../../test/support/engine-fakes.ts';
import { workloadRecord } from '../kube/to-record.ts';
import { Reconciler } from '../reconciler.ts';

const FLAGS = [
  '--progressive-reloads',
  '--progressive-gather=1s',
  '--progressive-settle=10s',
  '--min-reload-interval=0s',
  '--reload-deadline=30s',
];

/** Five Deployments in namespace a reading ConfigMap shared; `canary` first by priority. */
async function fleet(flags: string[] = FLAGS) {
  const w = engineWorld(flags);
  w.state.putConfig(w.putConfigMap('a', 'shared', { k: '1' }));
  for (const name of ['e', 'd', 'canary', 'b', 'a']) {
    const ann: Record<string, string> =
      name === 'canary' ? { 'gitops-reloader.io/reload-priority': '10' } : {};
    w.state.putWorkload(
      w.deployment('a', name, 'shared', ann) as NonNullable<ReturnType<typeof w.deployment>>,
    );
  }
  await w.reconciler.start();
  /** Lets the debounce and the gathering pass. */
  const gathered = async () => {
    await w.time.advance(w.time.clock.now + 1000); // debounce
    await w.settle();
    await w.time.advance(w.time.clock.now + 1000); // gathering
    await w.settle();
  };
  const running = () => w.strategies.runs.map((r) => r.req.workload.rec.ref.name);
  /** Changes the config to `value`; the canary's reload, the first wave, makes no progress for the deadline. */
  const haltAtCanary = async (value: string) => {
    w.change('a', 'shared', { k: value });
    await gathered();
    w.strategies.unhealthy.set('Deployment/a/canary', 'not Ready: canary-surge');
    await w.time.advance(w.time.clock.now + 30_000);
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    // Halted: its surge pods are gone, its old pods are healthy.
    w.strategies.unhealthy.delete('Deployment/a/canary');
  };
  return { ...w, gathered, running, haltAtCanary };
}

describe('progressive reloads', () => {
  it('reloads the first wave (highest priority) alone, the next only after it settled healthy, then doubling', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    expect(w.running()).toEqual(['canary']);
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 9_000);
    await w.settle();
    expect(w.running()).toEqual(['canary']); // still settling
    await w.time.advance(w.time.clock.now + 1_000);
    await w.settle();
    expect(w.running()).toEqual(['canary', 'a', 'b']); // wave 2: two, by name
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    w.strategies.runs[2]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    // Wave 3 starts when wave 2 completed, without waiting for its settle.
    expect(w.running()).toEqual(['canary', 'a', 'b', 'd', 'e']);
  });

  it('a failed first wave halts the change: nothing else starts, its surge pods go, and a halt is reported on the config', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: 'bad' });
    await w.gathered();
    expect(w.running()).toEqual(['canary']);
    w.strategies.unhealthy.set('Deployment/a/canary', 'not Ready: canary-surge');
    await w.time.advance(w.time.clock.now + 30_000); // no progress for --reload-deadline
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.strategies.dropped).toEqual(['Deployment/a/canary']);
    const halted = w.events.filter((e) => e.reason === 'ReloadHalted').map((e) => e.message);
    expect(halted[0]).toMatch(
      /^change halted at wave 1: Deployment\/canary its reload made no progress for --reload-deadline: not Ready: canary-surge/,
    );
    expect(halted.filter((m) => m.startsWith('held:'))).toHaveLength(4);
    const why = () => w.reconciler.status().waiting.map((x) => `${x.workload} ${x.why}`);
    // The canary backs off before its retry, which the halt then holds too.
    expect(why()).toEqual([
      'Deployment/a/a halt',
      'Deployment/a/b halt',
      'Deployment/a/canary retry',
      'Deployment/a/d halt',
      'Deployment/a/e halt',
    ]);
    // The canary's retry is held too: nothing runs again, however long.
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(w.running()).toEqual(['canary']);
  });

  it('no progress with every pod healthy (a PodDisruptionBudget) is not a failed wave: the reload is retried, and the next workload takes its place', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    await w.time.advance(w.time.clock.now + 30_000);
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 2_000);
    await w.settle();
    // The canary's PodDisruptionBudget holds only the canary: `a` takes its place in the first wave.
    expect(w.running()).toEqual(['canary', 'a', 'canary']);
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
  });

  it('an API error is retried, not a failed wave: only no progress for --reload-deadline halts', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('HTTP 500'), errorKind: 'update_workload' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 2_000); // the first retry's back-off
    await w.settle();
    expect(w.running()).toEqual(['canary', 'canary']);
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
  });

  it('pods that do not stay healthy through the settle time halt the change', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: 'crashy' });
    await w.gathered();
    w.strategies.unhealthy.set('Deployment/a/canary', 'restarted: canary-x (3×)');
    w.strategies.unhealthyPods.set('Deployment/a/canary', ['canary-x']);
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(w.running()).toEqual(['canary']);
    expect(w.events.find((e) => e.reason === 'ReloadHalted')?.message).toMatch(
      /did not stay healthy for 10s: restarted: canary-x \(3×\)/,
    );
    // The status names the pods that failed.
    expect(w.reconciler.status().halted).toEqual([
      expect.objectContaining({ workload: 'Deployment/a/canary', wave: 1, pods: ['canary-x'] }),
    ]);
  });

  it('an older change’s settle does not judge the workload’s reload for a newer change (execution simulation seed 28)', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 5_000); // half the settle
    await w.settle();
    w.change('a', 'shared', { k: '3' });
    await w.gathered();
    expect(w.running()).toEqual(['canary', 'canary']);
    // The newer reload is under way, one of its pods restarted: judging it is its own settle's job.
    w.strategies.unhealthy.set('Deployment/a/canary', 'restarted: canary-y (1×)');
    await w.time.advance(w.time.clock.now + 5_000); // the older settle's time is up
    await w.settle();
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
  });

  it('a pod template changed while settling starts the settle again over its own rollout (execution simulation seed 73)', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    // Its owner rolls a new template: a pod of that rollout restarted once while it started.
    const rec = w.deployment('a', 'canary', 'shared', { 'gitops-reloader.io/reload-priority': '10' });
    w.state.putWorkload({ ...(rec as NonNullable<typeof rec>), templateHash: 'the owner’s new template' });
    w.strategies.unhealthy.set('Deployment/a/canary', 'restarted: canary-new (1×)');
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
    w.strategies.unhealthy.delete('Deployment/a/canary'); // the rollout is done
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    expect(w.running()).toEqual(['canary', 'a', 'b']);
  });

  it('a pod not Ready after the settle is read again until --reload-deadline more, and only then halts (execution simulation seed 104)', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    w.strategies.unhealthy.set('Deployment/a/canary', 'not Ready: canary-0');
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 10_000 + 29_000); // settle + most of the deadline
    await w.settle();
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
    await w.time.advance(w.time.clock.now + 2_000);
    await w.settle();
    expect(w.events.find((e) => e.reason === 'ReloadHalted')?.message).toMatch(/not Ready: canary-0/);
  });

  it('a newer change of the config (the fix) supersedes the halt and reloads every workload once, from the first wave', async () => {
    const w = await fleet();
    await w.haltAtCanary('bad');
    w.change('a', 'shared', { k: 'fixed' });
    await w.gathered();
    expect(w.running()).toEqual(['canary', 'canary']);
    const fix = w.strategies.runs[1];
    expect(fix?.req.action.target['ConfigMap/a/shared']).toBe(
      w.state.configs.get('ConfigMap/a/shared')?.digest.all,
    );
    fix?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    for (const r of w.strategies.runs.slice(2)) r.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    for (const r of w.strategies.runs.slice(4)) r.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(w.running().sort()).toEqual(['a', 'b', 'canary', 'canary', 'd', 'e']);
  });

  it('a halt survives a new term: it has a record of its own, keyed by the change, and holds every reload of the change', async () => {
    const w = await fleet();
    await w.haltAtCanary('bad');
    expect(w.ledger.get('Deployment/a/canary')?.halt).toBeUndefined();
    expect(w.ledger.halts()).toEqual([
      expect.objectContaining({
        config: 'ConfigMap/a/shared',
        digest: w.state.configs.get('ConfigMap/a/shared')?.digest.all,
        wave: 1,
        workload: 'Deployment/a/canary',
      }),
    ]);
    // A leader change: a new reconciler on the same ledger resumes the canary's pending reload and
    // finds the others' changes, and holds them all.
    await w.reconciler.stop();
    const next = new Reconciler(w.deps);
    await next.start();
    await w.settle();
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(w.running()).toEqual(['canary']);
    // Restored from the ledger, which keeps no pods: the status says so with an empty list.
    expect(next.status().halted).toEqual([
      expect.objectContaining({ workload: 'Deployment/a/canary', wave: 1, pods: [] }),
    ]);
    // The fix still supersedes it, and the canary reloads first.
    const rec = w.putConfigMap('a', 'shared', { k: 'fixed' });
    next.configChanged(w.state.putConfig(rec), rec);
    await w.gathered();
    expect(w.running()).toEqual(['canary', 'canary']);
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await next.stop();
  });

  it('a reload carrying two configs’ changes halts and records both, keyed by the change: a rewrite of the canary’s entry drops neither, a new term holds both, and a config deleted meanwhile ends its own and its companion’s (ADR 0042, 0045)', async () => {
    const w = engineWorld(FLAGS);
    w.state.putConfig(w.putConfigMap('a', 'shared', { k: '1' }));
    w.state.putConfig(w.putConfigMap('a', 'extra', { k: '1' }));
    const put = (name: string, cms: string[], ann: Record<string, string> = {}) =>
      w.state.putWorkload(w.deployment('a', name, cms, ann) as NonNullable<ReturnType<typeof w.deployment>>);
    put('canary', ['extra', 'shared'], { 'gitops-reloader.io/reload-priority': '10' });
    put('only-shared', ['shared']);
    put('only-extra', ['extra']);
    await w.reconciler.start();
    w.change('a', 'extra', { k: '2' });
    w.change('a', 'shared', { k: 'bad' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    const running = () => w.strategies.runs.map((r) => r.req.workload.rec.ref.name);
    expect(running()).toEqual(['canary']);
    expect(w.strategies.runs[0]?.req.action.changed).toEqual(['ConfigMap/a/extra', 'ConfigMap/a/shared']);
    w.strategies.unhealthy.set('Deployment/a/canary', 'not Ready: canary-surge');
    await w.time.advance(w.time.clock.now + 30_000);
    w.strategies.runs[0]?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    w.strategies.unhealthy.delete('Deployment/a/canary');
    const digest = (c: string) => w.state.configs.get(`ConfigMap/a/${c}`)?.digest.all;
    const recorded = () =>
      w.ledger
        .halts()
        .map((h) => [h.config, h.digest, h.workload])
        .sort();
    expect(recorded()).toEqual([
      ['ConfigMap/a/extra', digest('extra'), 'Deployment/a/canary'],
      ['ConfigMap/a/shared', digest('shared'), 'Deployment/a/canary'],
    ]);
    // Each names the other: halted together, which one failed cannot be told (ADR 0045).
    expect(
      w.ledger
        .halts()
        .map((h) => [h.config, h.with?.map((c) => c.config)])
        .sort(),
    ).toEqual([
      ['ConfigMap/a/extra', ['ConfigMap/a/shared']],
      ['ConfigMap/a/shared', ['ConfigMap/a/extra']],
    ]);
    // Any rewrite of the canary's entry (a reload of another config, a dropped reload) keeps both.
    await w.ledger.put('Deployment/a/canary', { configs: { 'ConfigMap/a/other': 'x' } });
    expect(recorded()).toHaveLength(2);
    // A new term holds both changes: neither reader starts.
    await w.reconciler.stop();
    const next = new Reconciler(w.deps);
    await next.start();
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(running()).toEqual(['canary']);
    expect(
      next
        .status()
        .halted.map((h) => h.config)
        .sort(),
    ).toEqual(['ConfigMap/a/extra', 'ConfigMap/a/shared']);
    await next.stop();
    // The config deleted while no term ran: its halt has ended, and its record goes at the next start;
    // so does the halt of the change halted with it, which its failure no longer speaks for (ADR 0045).
    w.state.deleteConfig({ kind: 'ConfigMap', namespace: 'a', name: 'extra' });
    const third = new Reconciler(w.deps);
    await third.start();
    await w.settle();
    expect(recorded()).toEqual([]);
    expect(third.status().halted).toEqual([]);
    await third.stop();
  });

  it('a halt kept on a workload’s entry by an older version moves to a record of its own at start-up', async () => {
    const w = await fleet();
    await w.reconciler.stop();
    const entry = w.ledger.get('Deployment/a/canary');
    const digest = w.state.configs.get('ConfigMap/a/shared')?.digest.all as string;
    const halt = {
      config: 'ConfigMap/a/shared',
      digest,
      cutoff: '2026-01-01T00:00:00.000Z',
      wave: 1,
      why: 'its pods did not stay healthy',
      at: '2026-01-01T00:00:01.000Z',
    };
    await w.ledger.put('Deployment/a/canary', { configs: entry?.configs ?? {}, halt });
    const next = new Reconciler(w.deps);
    await next.start();
    await w.settle();
    expect(w.ledger.get('Deployment/a/canary')?.halt).toBeUndefined();
    expect(w.ledger.halts()).toEqual([
      expect.objectContaining({ ...halt, workload: 'Deployment/a/canary', uid: 'uid-shared' }),
    ]);
    expect(next.status().halted).toEqual([expect.objectContaining({ config: 'ConfigMap/a/shared' })]);
    await next.stop();
  });

  it('gitops-reloader.io/progressive-resume on the config continues a halted change from the failed workload', async () => {
    const w = await fleet();
    await w.haltAtCanary('slow');
    await w.time.advance(w.time.clock.now + 5_000); // its retry comes, and is held
    await w.settle();
    expect(w.running()).toEqual(['canary']);
    expect(w.ledger.halts()).toHaveLength(1);
    w.change('a', 'shared', { k: 'slow' }, { 'gitops-reloader.io/progressive-resume': 'ops-1' });
    await w.settle();
    expect(w.ledger.halts()).toEqual([]);
    expect(w.events.map((e) => e.reason)).toContain('ReloadResumed');
    // Nothing is held by a halt any more: the others wait for their wave.
    expect(w.reconciler.status().waiting.filter((x) => x.why === 'halt')).toEqual([]);
    expect(w.running()).toEqual(['canary', 'canary']); // the canary again, with the same change
    expect(w.strategies.runs[1]?.req.action.cutoffMs).toBe(w.strategies.runs[0]?.req.action.cutoffMs);
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    expect(w.running()).toEqual(['canary', 'canary', 'a', 'b']);
  });

  it('a revert to the content the pods run lifts the halt and runs nothing; the same bad content later is planned again', async () => {
    const w = await fleet();
    await w.haltAtCanary('bad');
    expect(w.ledger.halts()).toHaveLength(1);
    w.change('a', 'shared', { k: '1' }); // what every pod runs
    await w.gathered();
    await w.time.advance(w.time.clock.now + 600_000);
    await w.settle();
    expect(w.running()).toEqual(['canary']);
    expect(w.ledger.halts()).toEqual([]);
    // Nothing of the halted change is left under way: the bad content again is a change again.
    w.change('a', 'shared', { k: 'bad' });
    await w.gathered();
    expect(w.running()).toEqual(['canary', 'canary']);
  });

  it('a reload waiting for its wave whose workload is deleted and created again is not lost (simulation seed 5875)', async () => {
    const w = engineWorld(FLAGS);
    w.state.putConfig(w.putConfigMap('a', 'cm', { k: '1' }));
    const web = () => w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>;
    w.state.putWorkload(web());
    await w.reconciler.start();
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 2_000); // debounce and gathering: it runs
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(w.time.clock.now + 1_000); // its batch waits for its change's gathering
    await w.settle();
    // Deleted while its reload runs, and the gathering ends while it is gone.
    w.state.deleteWorkload('Deployment/a/web');
    await w.reconciler.workloadDeleted('Deployment/a/web');
    await w.time.advance(w.time.clock.now + 1_000);
    await w.settle();
    // Created again (a new object of the name) while the first reload still runs; then that one ends.
    const again = web();
    const { now } = w.state.putWorkload({ ...again, ref: { ...again.ref, uid: 'uid-web-2' } });
    w.reconciler.workloadChanged(undefined, now);
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    // The new object is judged afresh, and its pods (older than cm=3) reloaded, in a wave of its own.
    expect(w.strategies.runs).toHaveLength(2);
    const last = w.strategies.runs[1];
    expect(last?.req.workload.rec.ref.uid).toBe('uid-web-2');
    last?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    const entry = w.ledger.get('Deployment/a/web');
    expect(entry?.configs['ConfigMap/a/cm']).toBe(w.state.configs.get('ConfigMap/a/cm')?.digest.all);
    expect(entry?.pending).toBeUndefined();
  });

  it('workloads that read different keys of one config take part in one change, in one set of waves', async () => {
    const w = engineWorld(FLAGS);
    w.state.putConfig(w.putConfigMap('a', 'shared', { x: '1', y: '1' }));
    // Each reads one key: their own digests of the change differ; the change is one.
    for (const [name, key] of [
      ['a', 'x'],
      ['b', 'y'],
      ['c', 'x'],
    ] as const) {
      const rec = workloadRecord('Deployment', {
        metadata: {
          name,
          namespace: 'a',
          uid: `uid-${name}`,
          annotations: { 'reloader.stakater.com/auto': 'true' },
        },
        spec: {
          replicas: 1,
          template: {
            spec: {
              containers: [
                { name: 'c', env: [{ name: 'K', valueFrom: { configMapKeyRef: { name: 'shared', key } } }] },
              ],
            },
          },
        },
        status: { observedGeneration: 0, replicas: 1, updatedReplicas: 1, readyReplicas: 1 },
      });
      w.state.putWorkload(rec as NonNullable<typeof rec>);
    }
    await w.reconciler.start();
    w.change('a', 'shared', { x: '2', y: '2' });
    await w.time.advance(w.time.clock.now + 1_000); // debounce
    await w.settle();
    await w.time.advance(w.time.clock.now + 1_000); // gathering
    await w.settle();
    const targets = new Set(w.strategies.runs.map((r) => r.req.action.target['ConfigMap/a/shared']));
    // One first wave of one, for the whole change (not one per key digest).
    expect(w.strategies.runs.map((r) => r.req.workload.rec.ref.name)).toEqual(['a']);
    expect(targets.size).toBe(1);
  });

  it('a member whose pods were already not Ready when the change came is not judged: the next one takes its place, and nothing is halted (issue 34, the stuck neighbour)', async () => {
    const w = await fleet();
    const canary = w.state.workloads.get('Deployment/a/canary');
    if (!canary) throw new Error('no canary');
    canary.rec.status = { ...canary.rec.status, readyReplicas: 0 }; // a crash loop, before the change
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    // The canary reloads too (it reads the config), but holds no place: `a` is the first wave.
    expect(w.running()).toEqual(['canary', 'a']);
    expect(w.reconciler.status().excused).toEqual([
      expect.objectContaining({
        workload: 'Deployment/a/canary',
        config: 'ConfigMap/a/shared',
        why: '1 of 1 pods were not Ready before the change reached it',
      }),
    ]);
    expect(w.logs.some((l) => l.msg.startsWith('progressive reload: not judged for this change'))).toBe(true);
    // Its pods stay not Ready after its reload: not the change's fault.
    w.strategies.unhealthy.set('Deployment/a/canary', 'not Ready: canary-0');
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 120_000);
    await w.settle();
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
    expect(w.running()).toEqual(['canary', 'a', 'b', 'd']); // wave 2, then the last
    for (const r of w.strategies.runs.slice(2)) r.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.running()).toEqual(['canary', 'a', 'b', 'd', 'e']);
  });

  it('a running reload whose new pod runs without becoming Ready for the settle time halts the change then, not at --reload-deadline, and gives back its slot', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: 'bad' });
    await w.gathered();
    expect(w.running()).toEqual(['canary']);
    const at = w.time.clock.now;
    w.strategies.podFacts.set('Deployment/a/canary', [
      { name: 'canary-old', createdMs: at - 3_600_000, ready: true, restarts: 0, terminating: false },
      { name: 'canary-surge', createdMs: at, ready: false, restarts: 0, terminating: false, started: true },
    ]);
    await w.time.advance(at + 10_000);
    await w.settle();
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]); // not yet: 10 s from its second's end
    await w.time.advance(at + 12_000);
    await w.settle();
    const halted = w.events.find((e) => e.reason === 'ReloadHalted')?.message;
    expect(halted).toMatch(
      /^change halted at wave 1: Deployment\/canary its new pods were not healthy within the settle time \(10s\): not Ready: canary-surge/,
    );
    // The run is stopped (its strategy sees its signal), its surge pods removed, and its retry held.
    const run = w.strategies.runs[0];
    expect(run?.req.signal.aborted).toBe(true);
    run?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.strategies.dropped).toContain('Deployment/a/canary');
    await w.time.advance(w.time.clock.now + 2_000);
    await w.settle();
    expect(
      w.logs.some(
        (l) =>
          l.msg === 'reload held: its change was halted by a failed wave' &&
          l.workload === 'Deployment/canary',
      ),
    ).toBe(true);
    expect(w.running()).toEqual(['canary']);
  });

  it('the fix written while the bad change’s canary still waits stops that reload at once, and reloads every workload once, the canary first (issue 34, finding 0)', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: 'bad' });
    await w.gathered();
    expect(w.running()).toEqual(['canary']);
    await w.time.advance(w.time.clock.now + 3_000); // its surge pod is not Ready; no deadline yet
    await w.settle();
    w.change('a', 'shared', { k: 'fixed' });
    const bad = w.strategies.runs[0];
    expect(bad?.req.signal.aborted).toBe(true);
    bad?.end({ kind: 'failed', error: new Error('aborted'), errorKind: 'update_workload' });
    await w.settle();
    expect(w.strategies.dropped).toEqual(['Deployment/a/canary']);
    await w.gathered();
    const target = (i: number) => w.strategies.runs[i]?.req.action.target['ConfigMap/a/shared'];
    expect(w.running()).toEqual(['canary', 'canary']);
    expect(target(1)).not.toBe(target(0));
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await w.time.advance(w.time.clock.now + 10_000);
    await w.settle();
    for (const r of w.strategies.runs.slice(2)) r.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    for (const r of w.strategies.runs.slice(4)) r.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.running()).toEqual(['canary', 'canary', 'a', 'b', 'd', 'e']);
    expect(
      new Set(w.strategies.runs.slice(1).map((r) => r.req.action.target['ConfigMap/a/shared'])).size,
    ).toBe(1);
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
    expect(w.reconciler.status().halted).toEqual([]);
  });

  it('a member whose reload waits (a CronJob’s Job under Forbid) is excused at once: the next workload takes its place (issue 34, finding 2)', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    w.strategies.runs[0]?.end({ kind: 'waiting', why: 'a Job still runs under Forbid', retryMs: 30_000 });
    await w.settle();
    expect(w.running()).toEqual(['canary', 'a']);
    expect(w.logs.some((l) => l.msg.startsWith('progressive reload: it waits for something else'))).toBe(
      true,
    );
  });

  it('a member that fails fast on every try (a quota refuses its new pods) is judged at --reload-deadline after its admission, across retries', async () => {
    const w = await fleet();
    w.change('a', 'shared', { k: '2' });
    await w.gathered();
    const refused = {
      kind: 'failed',
      error: new Error('exceeded quota'),
      errorKind: 'update_workload',
    } as const;
    w.strategies.runs[0]?.end(refused);
    await w.settle();
    const at = w.time.clock.now;
    for (let i = 0; i < 20 && !w.running().includes('a'); i++) {
      await w.time.advance(w.time.clock.now + 5_000);
      await w.settle();
      const last = w.strategies.runs.at(-1);
      if (last?.req.workload.rec.ref.name === 'canary') last.end(refused);
      await w.settle();
    }
    // Its pods are healthy: not the config's fault. It holds no wave, and `a` takes its place.
    expect(w.time.clock.now - at).toBeGreaterThanOrEqual(30_000); // not before its deadline
    expect(w.running().filter((n) => n !== 'canary')).toEqual(['a']);
    expect(w.events.filter((e) => e.reason === 'ReloadHalted')).toEqual([]);
  });

  // `b` is in no wave: it opts out, or its strategy replaces no pod the waves could settle (an
  // annotate or git reload hands the rollout to the workload's controller or to Argo CD).
  it.each([
    ['a workload that opts out', { 'gitops-reloader.io/progressive': 'false' }],
    ['a workload with the annotate strategy', { 'gitops-reloader.io/strategy': 'annotate' }],
  ])('%s reloads at once, outside the waves', async (_what, ann) => {
    const w = engineWorld(FLAGS);
    w.state.putConfig(w.putConfigMap('a', 'shared', { k: '1' }));
    for (const name of ['a', 'b', 'c']) {
      w.state.putWorkload(
        w.deployment('a', name, 'shared', name === 'b' ? ann : {}) as NonNullable<
          ReturnType<typeof w.deployment>
        >,
      );
    }
    await w.reconciler.start();
    w.change('a', 'shared', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    // `a` is the first wave, `c` waits for the second; `b` is in no wave.
    expect(w.strategies.runs.map((r) => r.req.workload.rec.ref.name).sort()).toEqual(['a', 'b']);
  });

  it('--progressive-reloads=false turns it off: every reload starts at once', async () => {
    const w = await fleet(['--progressive-reloads=false', '--min-reload-interval=0s']);
    w.change('a', 'shared', { k: '2' });
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(w.running()).toHaveLength(5);
  });
});
