import { describe, expect, it } from 'vitest';
import { compareRecency, isOlder, mergeActions, type ReloadAction, retryDelayMs } from './reload-action.ts';

const action = (cutoffMs: number, changeRV: string, target: string, changed: string[]): ReloadAction => ({
  workload: 'Deployment/a/web',
  cutoffMs,
  changeRV,
  target: { 'ConfigMap/a/cm': target },
  changed,
});

describe('reload actions by recency of their change', () => {
  it('orders by cutoff, then by config resourceVersion', () => {
    expect(compareRecency({ cutoffMs: 100, changeRV: '9' }, { cutoffMs: 200, changeRV: '1' })).toBeLessThan(
      0,
    );
    expect(
      compareRecency({ cutoffMs: 200, changeRV: '10' }, { cutoffMs: 200, changeRV: '9' }),
    ).toBeGreaterThan(0);
    expect(compareRecency({ cutoffMs: 200, changeRV: '0' }, { cutoffMs: 200, changeRV: '0' })).toBe(0);
    expect(isOlder({ cutoffMs: 1, changeRV: '1' }, undefined)).toBe(false);
  });

  it('the issue 20 probe: a retry of A1 (T1, cutoff 100) merged into queued A2 (T2, cutoff 200) keeps A2', () => {
    const a2 = action(200, '12', 'T2', ['ConfigMap/a/cm']);
    const retryOfA1 = {
      ...action(100, '11', 'T1', ['ConfigMap/a/cm', 'Secret/a/s']),
      resumed: true,
      targets: ['p1'],
    };
    const merged = mergeActions(a2, retryOfA1);
    expect(merged).toMatchObject({ target: { 'ConfigMap/a/cm': 'T2' }, cutoffMs: 200, changeRV: '12' });
    expect(merged.targets).toBeUndefined(); // A1's pod snapshot is not A2's
    expect(merged.changed).toEqual(['ConfigMap/a/cm', 'Secret/a/s']);
    // Either order of submission gives the same action.
    expect(mergeActions(retryOfA1, a2)).toEqual(merged);
  });

  it('a tie goes to the action submitted later', () => {
    const a = action(100, '5', 'A', ['x']);
    const b = action(100, '5', 'B', ['y']);
    expect(mergeActions(a, b).target).toEqual({ 'ConfigMap/a/cm': 'B' });
  });

  it('keeps the Argo CD sync of the newer change, else the one either carries', () => {
    const viaOld = { app: 'argocd/a', revision: 'r1' };
    const viaNew = { app: 'argocd/a', revision: 'r2' };
    const older = { ...action(100, '5', 'A', ['x']), via: viaOld };
    expect(mergeActions(older, { ...action(200, '6', 'B', ['x']), via: viaNew }).via).toEqual(viaNew);
    expect(mergeActions(older, action(200, '6', 'B', ['x'])).via).toEqual(viaOld);
    expect(mergeActions(action(100, '5', 'A', ['x']), action(200, '6', 'B', ['x']))).not.toHaveProperty(
      'via',
    );
  });

  it('backs off 2, 5, 15, 30, then 60 s', () => {
    expect([1, 2, 3, 4, 5, 6, 50].map(retryDelayMs)).toEqual([2000, 5000, 15000, 30000, 60000, 60000, 60000]);
  });
});
