import { describe, expect, it } from 'vitest';
import type { ReloadAction } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import { decide } from './decide.ts';

const t = (over: Partial<TrackedWorkload['parsed']['policy']> = {}, problems: string[] = []) =>
  ({ id: 'Deployment/a/web', parsed: { problems, policy: { ...over } } }) as unknown as TrackedWorkload;
const a: ReloadAction = {
  workload: 'Deployment/a/web',
  cutoffMs: 100,
  changeRV: '5',
  target: {},
  changed: ['b'],
};

describe('decide', () => {
  it('forgets a workload that is gone and drops one that is invalid or watches nothing', () => {
    expect(decide({ workload: undefined, tracked: false, action: a, now: 0 }).kind).toBe('forget');
    expect(decide({ workload: t({}, ['bad']), tracked: true, action: a, now: 0 }).kind).toBe('drop');
    expect(decide({ workload: t(), tracked: false, action: a, now: 0 }).kind).toBe('drop');
  });

  it('does not run an action older than the newest submitted or recorded', () => {
    const newer = { cutoffMs: 200, changeRV: '6' };
    expect(decide({ workload: t(), tracked: true, action: a, newest: newer, now: 0 }).kind).toBe(
      'superseded',
    );
    expect(decide({ workload: t(), tracked: true, action: a, recorded: newer, now: 0 }).kind).toBe(
      'superseded',
    );
    expect(
      decide({ workload: t(), tracked: true, action: a, newest: { cutoffMs: 100, changeRV: '5' }, now: 0 })
        .kind,
    ).toBe('run');
  });

  it('does not run an action planned for an earlier object of the same name (seed 13626)', () => {
    const w = { ...t(), rec: { ref: { kind: 'Deployment', uid: 'u-2' } } } as unknown as TrackedWorkload;
    expect(decide({ workload: w, tracked: true, action: { ...a, uid: 'u-1' }, now: 0 })).toEqual({
      kind: 'superseded',
      by: 'a new object of the same name',
    });
    expect(decide({ workload: w, tracked: true, action: { ...a, uid: 'u-2' }, now: 0 }).kind).toBe('run');
    // Planned before uids were known, or for a Job (its own reload recreates it): the uid decides nothing.
    expect(decide({ workload: w, tracked: true, action: a, now: 0 }).kind).toBe('run');
  });

  it('a run covers the held action: it names its configs too', () => {
    const d = decide({ workload: t(), tracked: true, action: a, held: { ...a, changed: ['a'] }, now: 0 });
    expect(d).toEqual({ kind: 'run', action: { ...a, changed: ['a', 'b'] } });
  });
});
