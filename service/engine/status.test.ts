import { describe, expect, it } from 'vitest';
import type { ReloadAction } from '../core/reload-action.ts';
import { DONE_KEPT, formatStatus, StatusBook, type StatusBookDeps } from './status.ts';

const action = (workload: string, changed = ['ConfigMap/ns/cm']): ReloadAction => ({
  workload,
  changed,
  cutoffMs: 0,
  target: {},
  changeRV: '1',
});
const none = {
  brake: false,
  debouncing: [],
  syncHeld: [],
  queued: [],
  retrying: [],
  held: [],
  parked: [],
  braked: [],
  halts: [],
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
      brake: true,
      queued: [action('Deployment/ns/q')],
      retrying: ['Deployment/ns/r'],
      held: [action('Deployment/ns/w')],
      parked: [
        { action: action('Deployment/ns/h'), halted: true },
        { action: action('Deployment/ns/v'), halted: false },
      ],
      braked: ['Deployment/ns/b'],
      halts: [
        {
          config: 'ConfigMap/ns/cm',
          digest: 'd',
          wave: 1,
          workload: 'Deployment/ns/c',
          why: 'not Ready',
          atMs: 0,
        },
      ],
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

  it('a standby says so', () => {
    expect(formatStatus({ leader: false })).toMatch(/not the leader/);
  });
});
