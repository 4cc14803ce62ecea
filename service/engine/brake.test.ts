// The emergency brake driven through the reconciler: fake clock and timers, a ledger in memory.
import { describe, expect, it } from 'vitest';
import { engineWorld } from '../../test/support/engine-fakes.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import { Reconciler } from '../reconciler.ts';
import { Brake, brakeCheck } from './brake.ts';
import { WaitingRoom } from './waiting-room.ts';

async function world(flags: string[]) {
  const w = engineWorld(['--min-reload-interval=0s', ...flags]);
  w.state.putConfig(w.putConfigMap('a', 'cm', { k: '1' }));
  w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
  await w.reconciler.start();
  return w;
}

describe('the brake', () => {
  it('holds every reload, records nothing as applied, and the released service reloads the change once', async () => {
    const w = await world(['--brake']);
    const applied = w.ledger.get('Deployment/a/web')?.configs;
    w.change('a', 'cm', { k: '2' });
    w.change('a', 'cm', { k: '3' });
    await w.time.advance(w.time.clock.now + 60_000);
    await w.settle();
    expect(w.strategies.runs).toHaveLength(0);
    expect(w.ledger.get('Deployment/a/web')?.configs).toEqual(applied);
    expect(w.events.filter((e) => e.reason === 'ReloadHeld').map((e) => e.message)).toEqual([
      'held by the emergency brake (--brake): no reload starts until it is released; the change is kept and reloaded then',
    ]);
    // Released: a new term without --brake (the service restarted) finds the change and reloads once.
    await w.reconciler.stop();
    const released = new Reconciler({ ...w.deps, cfg: { ...w.deps.cfg, brake: false } });
    await released.start();
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.strategies.runs[0]?.req.action.changed).toEqual(['ConfigMap/a/cm']);
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    await released.stop();
  });

  it('a reload interrupted by the brake resumes from its pod snapshot when it is released', async () => {
    const w = await world([]);
    w.change('a', 'cm', { k: '2' });
    await w.time.advance(w.time.clock.now + 1_000);
    await w.settle();
    const run = w.strategies.runs[0];
    await run?.req.begin(['pod-a', 'pod-b']);
    // The brake is set: the service restarts with it; the running reload is interrupted.
    const stopping = w.reconciler.stop();
    run?.end({ kind: 'failed', error: new Error('the service is stopping'), errorKind: 'update_workload' });
    await stopping;
    const braked = new Reconciler({ ...w.deps, cfg: { ...w.deps.cfg, brake: true } });
    await braked.start();
    await w.settle();
    expect(w.strategies.runs).toHaveLength(1);
    expect(w.ledger.get('Deployment/a/web')?.pending?.targets).toEqual(['pod-a', 'pod-b']);
    await braked.stop();
    const released = new Reconciler({ ...w.deps, cfg: { ...w.deps.cfg, brake: false } });
    await released.start();
    await w.settle();
    expect(w.strategies.runs).toHaveLength(2);
    expect(w.strategies.runs[1]?.req.action.targets).toEqual(['pod-a', 'pod-b']);
    expect(w.strategies.runs[1]?.req.action.cutoffMs).toBe(run?.req.action.cutoffMs);
    w.strategies.runs[1]?.end({ kind: 'done', replaced: 2, summary: 'restarted' });
    await w.settle();
    await released.stop();
  });

  it('with --brake-allows-requests, the Argo CD action still reloads', async () => {
    const w = await world(['--brake', '--brake-allows-requests']);
    const t = w.state.workloads.get('Deployment/a/web');
    if (!t) throw new Error('no workload');
    const next = w.deployment('a', 'web', 'cm', {
      'gitops-reloader.io/reload-requested-at': '2026-01-01T00:00:05Z',
    });
    w.state.putWorkload(next as NonNullable<typeof next>);
    const now = w.state.workloads.get('Deployment/a/web');
    w.reconciler.workloadChanged(t, now as NonNullable<typeof now>);
    await w.time.advance(w.time.clock.now + 1_000);
    await w.settle();
    expect(w.strategies.runs.map((r) => r.req.action.changed)).toEqual([['request']]);
  });

  it('holds a reload of a workload the cache does not hold (yet), and says so', () => {
    const w = engineWorld(['--brake']);
    const room = new WaitingRoom(w.time.timers);
    const brake = new Brake(w.deps, room);
    const a = { workload: 'Deployment/a/gone', changed: ['ConfigMap/a/cm'], changeRV: '7' } as ReloadAction;
    expect(brake.holds(a)).toBe(true);
    expect(room.table().phases.map((p) => [p.workload, p.phase.kind])).toEqual([
      ['Deployment/a/gone', 'waiting'],
    ]);
    expect(w.logs.filter((l) => l.msg === 'reload held by the brake (--brake)')).toEqual([
      expect.objectContaining({
        workload: 'Deployment/gone',
        namespace: 'a',
        configs: ['ConfigMap/a/cm'],
        changeRV: '7',
      }),
    ]);
  });

  it('is a pure admission check: run, or wait for the brake, never dropped', () => {
    const change = { changed: ['ConfigMap/a/cm'] };
    const request = { changed: ['request'] };
    expect(brakeCheck({ brake: false, brakeAllowsRequests: false }, change)).toEqual({ kind: 'run' });
    expect(brakeCheck({ brake: true, brakeAllowsRequests: false }, change)).toEqual({
      kind: 'wait',
      reason: 'brake',
    });
    expect(brakeCheck({ brake: true, brakeAllowsRequests: false }, request).kind).toBe('wait');
    expect(brakeCheck({ brake: true, brakeAllowsRequests: true }, request)).toEqual({ kind: 'run' });
    expect(
      brakeCheck({ brake: true, brakeAllowsRequests: true }, { changed: ['request', 'ConfigMap/a/cm'] }).kind,
    ).toBe('wait');
  });
});
