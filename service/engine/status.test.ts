import { describe, expect, it } from 'vitest';
import { engineWorld } from '../../test/support/engine-fakes.ts';
import type { Change, ChangeGate, ChangeSink } from '../core/batcher.ts';
import { hashConfig } from '../core/config-hash.ts';
import type { ConfigRecord } from '../core/records.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import { DONE_KEPT, formatStatus, StatusBook, type StatusBookDeps } from './status.ts';
import type { RoomTable } from './waiting-room.ts';

const action = (workload: string, changed = ['ConfigMap/ns/cm']): ReloadAction => ({
  workload,
  changed,
  cutoffMs: 0,
  target: {},
  changeRV: '1',
});
const room = (t: Partial<RoomTable> = {}): RoomTable => ({
  brake: false,
  phases: [],
  halts: [],
  excused: [],
  ...t,
});
const none = { room: room(), debouncing: [], syncHeld: [] };
const waits = (a: ReloadAction, reason: 'brake' | 'wave' | 'halt' | 'window') => ({
  workload: a.workload,
  phase: { kind: 'waiting' as const, reason, since: 0, action: a },
});
const HALT = {
  config: 'ConfigMap/ns/cm',
  digest: 'd',
  wave: 1,
  workload: 'Deployment/ns/c',
  why: 'not Ready',
  atMs: 0,
};
/** A book on a clock, with no ledger record and no config known. */
const book = (now: () => number, o: Partial<StatusBookDeps> = {}) =>
  new StatusBook({ now, applied: () => undefined, current: () => undefined, ...o });

describe('StatusBook', () => {
  it('shows a reload running until it ends, then among the done, newest first, with its outcome', () => {
    let now = Date.parse('2026-12-04T10:00:00Z');
    const b = book(() => now);
    b.started(action('Deployment/ns/a'));
    expect(b.status(none).running).toEqual([
      { workload: 'Deployment/ns/a', configs: ['ConfigMap/cm'], since: '2026-12-04T10:00:00.000Z' },
    ]);
    now += 1_000;
    b.ended(action('Deployment/ns/a'), { kind: 'done' });
    b.started(action('Deployment/ns/b'));
    b.ended(action('Deployment/ns/b'), {
      kind: 'retry',
      action: action('Deployment/ns/b'),
      afterMs: 1,
      failed: true,
    });
    const s = b.status(none);
    expect(s.running).toEqual([]);
    expect(s.done.map((d) => [d.workload, d.outcome])).toEqual([
      ['Deployment/ns/b', 'failed, retrying'],
      ['Deployment/ns/a', 'done'],
    ]);
  });

  it('keeps the last DONE_KEPT reloads only', () => {
    const b = book(() => 0);
    for (let i = 0; i < DONE_KEPT + 10; i++) b.ended(action(`Deployment/ns/w${i}`), { kind: 'done' });
    const done = b.status(none).done;
    expect(done).toHaveLength(DONE_KEPT);
    expect(done[0]?.workload).toBe(`Deployment/ns/w${DONE_KEPT + 9}`);
  });

  it('says why each reload waits, and lists the halts', () => {
    const b = book(() => 0);
    const s = b.status({
      ...none,
      room: room({
        brake: true,
        phases: [
          { workload: 'Deployment/ns/q', phase: { kind: 'queued', action: action('Deployment/ns/q') } },
          waits(action('Deployment/ns/w'), 'window'),
          waits(action('Deployment/ns/h'), 'halt'),
          waits(action('Deployment/ns/v'), 'wave'),
          { workload: 'Deployment/ns/r', phase: { kind: 'retry', at: 1, attempt: 1 } },
          waits(action('Deployment/ns/b'), 'brake'),
        ],
        halts: [HALT],
      }),
    });
    expect(s.waiting.map((w) => `${w.workload} ${w.why}`)).toEqual([
      'Deployment/ns/b brake',
      'Deployment/ns/h halt',
      'Deployment/ns/q queue',
      'Deployment/ns/r retry',
      'Deployment/ns/v wave',
      'Deployment/ns/w window',
    ]);
    expect(s.halted).toEqual([
      {
        config: 'ConfigMap/ns/cm',
        wave: 1,
        workload: 'Deployment/ns/c',
        why: 'not Ready',
        since: '1970-01-01T00:00:00.000Z',
        pods: [],
      },
    ]);
    const text = formatStatus(s);
    expect(text).toContain('brake: ON (no reload starts)');
    expect(text).toContain(
      'halted (1)\n  ConfigMap/ns/cm at wave 1, since 1970-01-01T00:00:00.000Z: Deployment/ns/c not Ready',
    );
    expect(text).toContain('waiting (6)');
  });

  it('says why a reload waits before its queue: debounce, and a sync hold per Application', () => {
    const b = book(() => 0);
    const s = b.status({
      ...none,
      debouncing: [
        { workload: 'Deployment/ns/d', configs: ['ConfigMap/ns/a', 'request'], since: 1_000 },
        // A batch that only judges a new workload is no change waiting.
        { workload: 'Deployment/ns/new', configs: ['workload'], since: 1_000 },
      ],
      syncHeld: [
        { workload: 'Deployment/ns/s', config: 'ConfigMap/ns/b', app: 'argocd/app', since: 3_000 },
        { workload: 'Deployment/ns/s', config: 'Secret/ns/a', app: 'argocd/app', since: 2_000 },
      ],
    });
    expect(s.waiting).toEqual([
      {
        workload: 'Deployment/ns/d',
        configs: ['ConfigMap/a', 'gitops-reloader.io/reload-requested-at'],
        why: 'debounce',
        since: '1970-01-01T00:00:01.000Z',
      },
      {
        workload: 'Deployment/ns/s',
        configs: ['ConfigMap/b', 'Secret/a'],
        why: 'sync-hold',
        app: 'argocd/app',
        since: '1970-01-01T00:00:02.000Z',
      },
    ]);
    expect(formatStatus(s)).toContain(
      'Deployment/ns/s: sync-hold for argocd/app since 1970-01-01T00:00:02.000Z (ConfigMap/b, Secret/a)',
    );
  });

  it('shows a running reload that waits for a budget slot or a PodDisruptionBudget as waiting, and running again after', () => {
    let now = 0;
    const b = book(() => now);
    b.started(action('Deployment/ns/a'));
    now = 5_000;
    // Two slots awaited at once (a handover of two pods): waiting until both are taken.
    b.waiting('Deployment/ns/a', 'budget', true);
    now = 6_000;
    b.waiting('Deployment/ns/a', 'budget', true);
    b.waiting('Deployment/ns/a', 'budget', false);
    const why = () => b.status(none).waiting.map((w) => `${w.workload} ${w.why} ${w.since}`);
    expect(why()).toEqual(['Deployment/ns/a budget 1970-01-01T00:00:05.000Z']);
    expect(b.status(none).running).toEqual([]);
    b.waiting('Deployment/ns/a', 'budget', false);
    expect(why()).toEqual([]);
    now = 7_000;
    b.waiting('Deployment/ns/a', 'pdb', true);
    now = 8_000;
    b.waiting('Deployment/ns/a', 'pdb', true); // still refused: since stays
    expect(why()).toEqual(['Deployment/ns/a pdb 1970-01-01T00:00:07.000Z']);
    b.waiting('Deployment/ns/a', 'pdb', false);
    expect(why()).toEqual([]);
    expect(b.status(none).running.map((r) => r.workload)).toEqual(['Deployment/ns/a']);
    // Told after its end (a late callback): nothing shows.
    b.ended(action('Deployment/ns/a'), { kind: 'done' });
    b.waiting('Deployment/ns/a', 'pdb', true);
    expect(why()).toEqual([]);
  });

  it('names the pods a halt failed at, and none for a halt restored after a restart', () => {
    const s = book(() => 0).status({
      ...none,
      room: room({
        halts: [
          { ...HALT, pods: ['c-surge-1', 'c-surge-2'] },
          { ...HALT, config: 'ConfigMap/ns/other' },
        ],
      }),
    });
    expect(s.halted.map((h) => h.pods)).toEqual([['c-surge-1', 'c-surge-2'], []]);
    const text = formatStatus(s);
    expect(text).toContain('Deployment/ns/c not Ready; pods: c-surge-1, c-surge-2');
    expect(text).toContain('not Ready; pods: (not kept across a restart)');
  });

  it('gives each done reload its cause: the keys that changed (names only) and the Argo CD sync', () => {
    const key = Buffer.alloc(32, 1);
    const rec = (data: Record<string, string>): ConfigRecord => ({
      ref: { kind: 'ConfigMap', namespace: 'ns', name: 'cm' },
      uid: 'u',
      resourceVersion: '1',
      annotations: {},
      labels: {},
      digest: hashConfig({ data }, key),
    });
    const old = rec({ a: '1', b: '2', gone: 'x' });
    const now = rec({ a: '1', b: 'secret-value', added: 'y' });
    let applied: Record<string, string> = { 'ConfigMap/ns/cm': old.digest.all };
    const b = book(() => 0, {
      applied: () => applied,
      current: (c) => (c === 'ConfigMap/ns/cm' ? now.digest : undefined),
    });
    b.sawConfig(old, now);
    const a: ReloadAction = {
      ...action('Deployment/ns/w'),
      target: { 'ConfigMap/ns/cm': now.digest.all },
      via: { app: 'argocd/shop', revision: 'abc123' },
    };
    b.started(a);
    applied = {}; // what the ledger says after the reload does not matter: the record at its start does
    b.ended(a, { kind: 'done' });
    const [done] = b.status(none).done;
    expect(done).toEqual({
      workload: 'Deployment/ns/w',
      configs: ['ConfigMap/cm'],
      keys: { 'ConfigMap/cm': ['added', 'b', 'gone'] },
      via: { app: 'argocd/shop', revision: 'abc123' },
      at: '1970-01-01T00:00:00.000Z',
      outcome: 'done',
    });
    const json = JSON.stringify(b.status(none));
    expect(json).not.toContain('secret-value');
    expect(json).not.toContain(now.digest.all);
    expect(formatStatus(b.status(none))).toContain(
      'Deployment/ns/w: done (ConfigMap/cm [added, b, gone]; after sync of argocd/shop at abc123)',
    );
  });

  it('leaves the keys out when the old content was never seen (a change found at start)', () => {
    const b = book(() => 0, { applied: () => ({ 'ConfigMap/ns/cm': 'f'.repeat(32) }) });
    const a = { ...action('Deployment/ns/w'), target: { 'ConfigMap/ns/cm': 'e'.repeat(32) } };
    b.started(a);
    b.ended(a, { kind: 'done' });
    expect(b.status(none).done[0]).not.toHaveProperty('keys');
    expect(b.status(none).done[0]).not.toHaveProperty('via');
  });

  it('a standby says so', () => {
    expect(formatStatus({ leader: false })).toMatch(/not the leader/);
  });
});

describe('the status, through the reconciler', () => {
  /** A started world whose Deployment web reads ConfigMap cm (keys k and x). */
  async function world(flags: string[] = [], o: Parameters<typeof engineWorld>[1] = {}) {
    const w = engineWorld(['--min-reload-interval=0s', ...flags], o);
    w.state.putConfig(w.putConfigMap('a', 'cm', { k: '1', x: 'same' }));
    w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
    await w.reconciler.start();
    return w;
  }
  const why = (w: Awaited<ReturnType<typeof world>>) =>
    w.reconciler.status().waiting.map((x) => `${x.workload} ${x.why}`);

  it('a change is waiting for its debounce, then running, then waiting for a budget slot, then done with the keys it changed', async () => {
    const w = await world();
    w.change('a', 'cm', { k: 'new-value', x: 'same' });
    await w.settle();
    expect(w.reconciler.status().waiting).toEqual([
      {
        workload: 'Deployment/a/web',
        configs: ['ConfigMap/cm'],
        why: 'debounce',
        since: new Date(w.time.clock.now).toISOString(),
      },
    ]);
    await w.time.advance(w.time.clock.now + 1000);
    await w.settle();
    expect(why(w)).toEqual([]);
    expect(w.reconciler.status().running.map((r) => r.workload)).toEqual(['Deployment/a/web']);
    const run = w.strategies.runs[0];
    run?.req.onWait?.('budget', true);
    expect(why(w)).toEqual(['Deployment/a/web budget']);
    expect(w.reconciler.status().running).toEqual([]);
    run?.req.onWait?.('budget', false);
    run?.req.onWait?.('pdb', true);
    expect(why(w)).toEqual(['Deployment/a/web pdb']);
    run?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    const s = w.reconciler.status();
    expect(s.waiting).toEqual([]);
    expect(s.done).toEqual([
      expect.objectContaining({
        workload: 'Deployment/a/web',
        keys: { 'ConfigMap/cm': ['k'] },
        outcome: 'done',
      }),
    ]);
    expect(JSON.stringify(s)).not.toContain('new-value');
  });

  it('a change the Argo CD gate holds waits for its sync, and its reload names the Application and revision', async () => {
    let sink: ChangeSink | undefined;
    const held: Change[] = [];
    const gate: ChangeGate = {
      attach: (s) => {
        sink = s;
      },
      detach() {},
      hold: (c) => held.push(c) > 0,
      held: () =>
        held.map((c) => ({
          workload: c.workload,
          config: c.config,
          app: 'argocd/shop',
          since: c.observedAt,
        })),
    };
    const w = await world([], { gate });
    w.change('a', 'cm', { k: '2', x: 'same' });
    expect(w.reconciler.status().waiting).toEqual([
      expect.objectContaining({ workload: 'Deployment/a/web', why: 'sync-hold', app: 'argocd/shop' }),
    ]);
    // The sync ended: the gate releases the change with the sync it followed.
    for (const c of held.splice(0))
      sink?.add({ ...c, debounceMs: 0, via: { app: 'argocd/shop', revision: 'abc' } });
    await w.time.advance(w.time.clock.now + 1);
    await w.settle();
    w.strategies.runs[0]?.end({ kind: 'done', replaced: 1, summary: 'restarted' });
    await w.settle();
    expect(w.reconciler.status().done).toEqual([
      expect.objectContaining({
        workload: 'Deployment/a/web',
        via: { app: 'argocd/shop', revision: 'abc' },
        keys: { 'ConfigMap/cm': ['k'] },
      }),
    ]);
  });
});
