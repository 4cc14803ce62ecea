// The start-up judgement (judgeAtStart) on its own: a ledger in memory, the world's caches, and a
// catch-up the test answers for (the pods' age is service/catch-up.ts's part).
import { describe, expect, it } from 'vitest';
import { engineWorld, MemoryLedger } from '../../test/support/engine-fakes.ts';
import type { CatchUp, KeyState } from '../core/catch-up.ts';
import { MISSING } from '../core/config-hash.ts';
import { effectiveCutoff } from '../core/cutoff.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import { watchedSet } from '../core/plan.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { ReconcilerDeps } from './deps.ts';
import { judgeAtStart } from './startup.ts';

const ID = 'Deployment/a/web';
const CM = 'ConfigMap/a/cm';

class KeyedLedger extends MemoryLedger {
  key: KeyState = 'same';
  override keyState(): KeyState {
    return this.key;
  }
  override async stampKey() {
    this.key = 'same';
  }
}

/** A Deployment reading ConfigMap cm (absent: deleted), a ledger holding `entry`, and what catchUp says. */
function setup(o: {
  data?: Record<string, string>;
  writtenAtMs?: number;
  entry: LedgerEntry;
  key?: KeyState;
  catchUp?: CatchUp;
  held?: boolean;
}) {
  const w = engineWorld([]);
  if (o.data)
    w.state.putConfig({
      ...w.putConfigMap('a', 'cm', o.data),
      ...(o.writtenAtMs !== undefined ? { writtenAtMs: o.writtenAtMs } : {}),
    });
  w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
  const ledger = new KeyedLedger();
  ledger.key = o.key ?? 'same';
  ledger.map.set(ID, o.entry);
  const asked: string[][] = [];
  const d: ReconcilerDeps = {
    cfg: w.cfg,
    state: w.state,
    ledger,
    events: { async emit() {} },
    log: w.deps.log,
    globals: w.globals,
    hashKey: Buffer.alloc(32, 7),
    strategies: w.strategies,
    inScope: () => true,
    timers: w.time.timers,
    ...(o.catchUp ? { catchUp: async () => o.catchUp as CatchUp } : {}),
  };
  const submitted: ReloadAction[] = [];
  const set = () => {
    const t = w.state.workloads.get(ID);
    return t ? watchedSet(t.rec, t.parsed, w.state, w.globals).digests : {};
  };
  const run = () =>
    judgeAtStart(d, {
      set,
      reportPolicy: () => undefined,
      changeRV: () => '0',
      submit: (a) => submitted.push(a),
      heldByGate: (_t, changed) => {
        asked.push(changed);
        return o.held ?? false;
      },
    });
  return { w, ledger, submitted, asked, set, run };
}

const pending = (target: Record<string, string>) => ({
  cutoff: '2025-12-31T23:59:00.000Z',
  target,
  changed: [CM],
  startedAt: '2025-12-31T23:59:00.000Z',
  targets: ['old-pod'],
});

describe('judgeAtStart', () => {
  it('logs a baseline once it is written: a stop right after the line finds it in the ledger (engine simulation seed 83 on the real control plane)', async () => {
    const s = setup({ data: { k: '1' }, entry: { configs: {} }, catchUp: { kind: 'baseline' } });
    s.ledger.map.delete(ID);
    const loggedAtWrite: boolean[] = [];
    const putMany = s.ledger.putMany.bind(s.ledger);
    s.ledger.putMany = async (es) => {
      loggedAtWrite.push(s.w.logs.some((l) => l.msg === 'baseline recorded'));
      await putMany(es);
    };
    await s.run();
    expect(s.ledger.get(ID)).toEqual({ configs: s.set() });
    expect(loggedAtWrite).toEqual([false]);
    expect(s.w.logs.filter((l) => l.msg === 'baseline recorded')).toHaveLength(1);
  });

  it('a pending reload whose config changed again while down is judged by the pods: none older than the change, none restarted (simulation seed 144)', async () => {
    const s = setup({
      data: { k: '3' },
      entry: { configs: { [CM]: 'd1' }, pending: pending({ [CM]: 'd2' }) },
      catchUp: { kind: 'current', differing: [CM] },
    });
    await s.run();
    expect(s.submitted).toEqual([]);
    expect(s.ledger.get(ID)).toEqual({ configs: s.set() });
  });

  it('a pending reload whose config changed again while down is held while its Argo CD sync runs (simulation seed 47)', async () => {
    const s = setup({
      data: { k: '3' },
      entry: { configs: { [CM]: 'd1' }, pending: pending({ [CM]: 'd2' }) },
      catchUp: { kind: 'reload', changed: [CM] },
      held: true,
    });
    await s.run();
    expect(s.asked).toEqual([[CM]]);
    expect(s.submitted).toEqual([]);
  });

  it('a pending reload whose configs hold what the ledger records as applied is dropped, and says so', async () => {
    const s = setup({ data: { k: '3' }, entry: { configs: {} }, catchUp: { kind: 'none', deleted: [] } });
    const applied = s.set();
    s.ledger.map.set(ID, { configs: applied, pending: pending({ [CM]: 'd2' }) });
    await s.run();
    expect(s.submitted).toEqual([]);
    expect(s.ledger.get(ID)).toEqual({ configs: applied });
    expect(s.w.logs.filter((l) => l.msg.startsWith('pending reload dropped'))).toEqual([
      expect.objectContaining({
        workload: 'Deployment/web',
        configs: [CM],
        msg: 'pending reload dropped: the configs hold what the ledger records as applied',
      }),
    ]);
  });

  it('a pending reload whose target is what the configs hold resumes with its cutoff and pods', async () => {
    const s = setup({ data: { k: '3' }, entry: { configs: { [CM]: 'd1' }, pending: pending({}) } });
    const target = s.set();
    s.ledger.map.set(ID, { configs: { [CM]: 'd1' }, pending: pending(target) });
    await s.run();
    expect(s.submitted).toMatchObject([
      { resumed: true, targets: ['old-pod'], cutoffMs: Date.parse('2025-12-31T23:59:00.000Z') },
    ]);
  });

  it('after a key change a config missing at start keeps its recorded digest: its return is judged a change, so nothing it brings is lost (simulation seed 1402)', async () => {
    // Known cost (simulation seed 155): if it returns with the data it had, every pod reading it
    // restarts once; dropping the digest instead would take a return with new data for a new config.
    const s = setup({ entry: { configs: { [CM]: 'old-key-digest' } }, key: 'other' });
    expect(s.set()).toEqual({ [CM]: MISSING });
    await s.run();
    expect(s.submitted).toEqual([]);
    expect(s.ledger.get(ID)?.configs).toEqual({ [CM]: 'old-key-digest' });
  });

  it('a change found at start reloads the pods older than the newest write of the config, not every pod older than the start (simulation seed 83)', async () => {
    // A pod created after the write (a rollout while down, or a reload cut by the leader change)
    // already reads the data: the cutoff is the write's, plus the clock margin.
    const written = Date.parse('2026-01-01T00:00:00Z') - 600_000;
    const s = setup({
      data: { k: '2' },
      writtenAtMs: written,
      entry: { configs: { [CM]: 'd1' } },
      catchUp: { kind: 'reload', changed: [CM] },
    });
    await s.run();
    expect(s.submitted).toMatchObject([{ changed: [CM], cutoffMs: effectiveCutoff(written) }]);
  });

  it('a change found at start whose write time cannot be told takes the start as its cutoff', async () => {
    const s = setup({
      data: { k: '2' },
      entry: { configs: { [CM]: 'd1' } },
      catchUp: { kind: 'reload', changed: [CM] },
    });
    await s.run();
    expect(s.submitted).toMatchObject([{ cutoffMs: effectiveCutoff(s.w.time.clock.now) }]);
  });

  it('after a key change a pending reload whose configs were written again since it began replaces every pod older than that write (simulation seed 1963)', async () => {
    // Its snapshot alone would leave the pods it replaced before the new write (they read old data).
    const began = Date.parse('2025-12-31T23:59:00.000Z');
    const written = began + 30_000;
    const s = setup({
      data: { k: '3' },
      writtenAtMs: written,
      entry: { configs: { [CM]: 'd1' }, pending: pending({ [CM]: 'd2' }) },
      key: 'unknown',
    });
    await s.run();
    expect(s.submitted).toHaveLength(1);
    expect(s.submitted[0]).toMatchObject({ cutoffMs: effectiveCutoff(written) });
    expect(s.submitted[0]?.targets).toBeUndefined();
    expect(s.submitted[0]?.resumed).toBeFalsy();
  });

  it('after a key change a pending reload whose configs were not written since it began goes on as it was', async () => {
    const s = setup({
      data: { k: '3' },
      writtenAtMs: Date.parse('2025-12-31T23:58:00.000Z'),
      entry: { configs: { [CM]: 'd1' }, pending: pending({ [CM]: 'd2' }) },
      key: 'unknown',
    });
    await s.run();
    expect(s.submitted).toMatchObject([
      { resumed: true, targets: ['old-pod'], cutoffMs: Date.parse('2025-12-31T23:59:00.000Z') },
    ]);
  });
});
