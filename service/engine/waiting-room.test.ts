import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import { HOLD_RECHECK_MS, WaitingRoom } from './waiting-room.ts';

const action = (workload: string, changed: string[], cutoffMs = 1): ReloadAction => ({
  workload,
  changed,
  cutoffMs,
  target: {},
  changeRV: String(cutoffMs),
});
const kinds = (room: WaitingRoom) =>
  room.table().phases.map(({ workload, phase }) => {
    const why = phase.kind === 'waiting' ? ` ${phase.reason}` : '';
    return `${workload} ${phase.kind}${why}`;
  });

describe('the waiting room', () => {
  it('counts failed runs for the back-off, is in `retry` until the retry fires, and starts again after a success', async () => {
    const time = fakeTimers();
    const room = new WaitingRoom(time.timers);
    const fired: string[] = [];
    room.retry('Deployment/a/r', 1_000, true, () => fired.push('first'));
    room.retry('Deployment/a/r', 2_000, false, () => fired.push('waiting'));
    expect(room.failures('Deployment/a/r')).toBe(1);
    expect(room.retrying('Deployment/a/r')).toBe(true);
    expect(room.table().phases).toEqual([
      { workload: 'Deployment/a/r', phase: { kind: 'retry', at: 2_000, attempt: 1 } },
    ]);
    await time.advance(1_000);
    expect(fired).toEqual(['first']);
    // Any retry that fires ends the phase: the reconciler submits it, and it is queued or waits anew.
    expect(room.retrying('Deployment/a/r')).toBe(false);
    await time.advance(2_000);
    expect(fired).toEqual(['first', 'waiting']);
    room.succeeded('Deployment/a/r');
    expect(room.failures('Deployment/a/r')).toBe(0);
  });

  it('holds a reload until its window opens, looked at again at least hourly; a new hold replaces the old and its timer', async () => {
    const time = fakeTimers();
    const room = new WaitingRoom(time.timers);
    const fired: ReloadAction[] = [];
    const far = 5 * HOLD_RECHECK_MS;
    expect(room.holdForWindow(action('Deployment/a/w', ['ConfigMap/a/x']), far, (a) => fired.push(a))).toBe(
      undefined,
    );
    const replaced = room.holdForWindow(action('Deployment/a/w', ['ConfigMap/a/y'], 2), 10_000, (a) =>
      fired.push(a),
    );
    expect(replaced?.until).toBe(far);
    expect(room.table().phases).toEqual([
      {
        workload: 'Deployment/a/w',
        phase: { kind: 'waiting', reason: 'window', since: 0, until: 10_000, action: expect.anything() },
      },
    ]);
    expect(time.pending).toHaveLength(1);
    await time.advance(10_000);
    expect(fired.map((a) => a.changed)).toEqual([['ConfigMap/a/y']]);
    expect(room.windowAction('Deployment/a/w')).toBeUndefined();
    room.holdForWindow(action('Deployment/a/v', ['ConfigMap/a/x']), far, (a) => fired.push(a));
    await time.advance(10_000 + HOLD_RECHECK_MS);
    expect(fired).toHaveLength(2);
    expect(room.releaseWindow('Deployment/a/v')).toBeUndefined();
  });

  it('keeps one planned reload per workload and reason, which later changes join, until it leaves', () => {
    const time = fakeTimers();
    const room = new WaitingRoom(time.timers);
    expect(room.wait(action('Deployment/a/v', ['ConfigMap/a/x']), 'wave')).toBe(false);
    time.clock.now = 500;
    expect(room.wait(action('Deployment/a/v', ['ConfigMap/a/y'], 2), 'wave')).toBe(true);
    expect(room.waiting('wave').map((a) => a.changed)).toEqual([['ConfigMap/a/x', 'ConfigMap/a/y']]);
    const [row] = room.table().phases;
    expect(row?.phase).toMatchObject({ kind: 'waiting', reason: 'wave', since: 0 });
    expect(room.waitingOf('Deployment/a/v', 'brake')).toBeUndefined();
    room.leave('Deployment/a/v', 'brake'); // not what it waits for
    expect(room.count('wave')).toBe(1);
    room.leave('Deployment/a/v', 'wave');
    expect(room.count('wave')).toBe(0);
  });

  it("keeps the queued action (the newest change's, every config named) while the queue keeps the key and its timing", () => {
    const room = new WaitingRoom(fakeTimers().timers);
    const newer = { ...action('Deployment/a/q', ['ConfigMap/a/y'], 5), notBefore: 900 };
    expect(room.enqueue(newer)).toEqual({ workload: 'Deployment/a/q', notBefore: 900 });
    // An older change submitted later (a retry) joins it; the newer change's action and timing win.
    expect(room.enqueue({ ...action('Deployment/a/q', ['ConfigMap/a/x'], 2), minIntervalMs: 7 })).toEqual({
      workload: 'Deployment/a/q',
      notBefore: 900,
    });
    expect(room.table().phases.map((p) => p.phase.kind)).toEqual(['queued']);
    const taken = room.take('Deployment/a/q');
    expect(taken).toMatchObject({ cutoffMs: 5, changed: ['ConfigMap/a/x', 'ConfigMap/a/y'] });
    expect(room.take('Deployment/a/q')).toBeUndefined();
    expect(room.table().phases).toEqual([]);
  });

  it('is the one table the status reads: queued, window, wave or halt, retry, brake, and what the checks know', () => {
    const time = fakeTimers();
    const room = new WaitingRoom(time.timers);
    room.enqueue(action('Deployment/a/q', ['ConfigMap/a/x']));
    const halt = {
      config: 'ConfigMap/a/x',
      digest: 'd',
      wave: 1,
      workload: 'Deployment/a/c',
      why: 'x',
      atMs: 0,
    };
    room.know({
      brake: true,
      halted: (a) => a.workload === 'Deployment/a/h',
      halts: () => [halt],
      excused: () => [],
    });
    room.wait(action('Deployment/a/b', ['ConfigMap/a/x']), 'brake');
    room.retry('Deployment/a/r', 1_000, true, () => undefined);
    room.wait(action('Deployment/a/h', ['ConfigMap/a/x']), 'wave');
    room.wait(action('Deployment/a/v', ['ConfigMap/a/x']), 'wave');
    room.holdForWindow(action('Deployment/a/w', ['ConfigMap/a/x']), 9_000, () => undefined);
    expect(kinds(room)).toEqual([
      'Deployment/a/q queued',
      'Deployment/a/w waiting window',
      'Deployment/a/h waiting halt',
      'Deployment/a/v waiting wave',
      'Deployment/a/r retry',
      'Deployment/a/b waiting brake',
    ]);
    const t = room.table();
    expect(t.brake).toBe(true);
    expect([...t.halts]).toEqual([halt]);
  });

  it('arms and disarms every timer after the batch; clearing it (the term ended) clears them all and what waits', async () => {
    const time = fakeTimers();
    const room = new WaitingRoom(time.timers);
    const fired: string[] = [];
    const h = room.arm(() => fired.push('disarmed'), 100);
    room.arm(() => fired.push('armed'), 200);
    room.disarm(h);
    room.disarm(h); // twice: nothing more
    await time.advance(300);
    expect(fired).toEqual(['armed']);
    room.arm(() => fired.push('cleared'), 100);
    room.retry('Deployment/a/r', 100, true, () => fired.push('retry'));
    room.wait(action('Deployment/a/b', ['ConfigMap/a/x']), 'brake');
    room.holdForWindow(action('Deployment/a/w', ['ConfigMap/a/x']), 1_000, () => fired.push('window'));
    room.enqueue(action('Deployment/a/q', ['ConfigMap/a/x']));
    room.clear();
    expect(time.pending).toEqual([]);
    await time.advance(10_000);
    expect(fired).toEqual(['armed']);
    expect(room.table().phases).toEqual([]);
  });
});
