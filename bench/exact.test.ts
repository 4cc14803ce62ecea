import { describe, expect, it } from 'vitest';
import { type BenchResult, checkExact } from './exact.ts';

const run = (o: Partial<BenchResult> = {}): BenchResult => ({
  reloads_per_sync: 1,
  double_recycles: 0,
  spurious_reloads: 0,
  bad_change_pods_replaced: 0,
  bad_change_deployments_touched: 1,
  skipped: [],
  details: { progressive: { bad: { expected_old_pods_replaced: 0, first_wave: ['p-000'] } } },
  ...o,
});
const status = (r: BenchResult) => Object.fromEntries(checkExact(r).map((c) => [c.key, c.status]));

describe('checkExact', () => {
  it('passes a run whose exact figures are as expected', () => {
    expect(Object.values(status(run()))).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
  });

  it('fails a bad change that touched more than the first wave, or replaced more than its floor allows', () => {
    expect(status(run({ bad_change_deployments_touched: 100 })).bad_change_deployments_touched).toBe(
      'failed',
    );
    expect(status(run({ bad_change_pods_replaced: 2 })).bad_change_pods_replaced).toBe('failed');
  });

  it('takes the expected values from the set-up the run reports', () => {
    const r = run({
      bad_change_pods_replaced: 2,
      bad_change_deployments_touched: 2,
      details: { progressive: { bad: { expected_old_pods_replaced: 2, first_wave: ['a', 'b'] } } },
    });
    expect(status(r)).toMatchObject({ bad_change_pods_replaced: 'ok', bad_change_deployments_touched: 'ok' });
  });

  it('fails a figure that is missing while its phase ran (it failed), or has nothing to compare with', () => {
    const r = run({ bad_change_pods_replaced: null, bad_change_deployments_touched: null, details: {} });
    expect(status(r)).toMatchObject({
      bad_change_pods_replaced: 'failed',
      bad_change_deployments_touched: 'failed',
    });
  });

  it('reports the figures of a skipped phase as not measured', () => {
    const r = run({ skipped: ['progressive', 'precision'], reloads_per_sync: null, details: {} });
    expect(status(r)).toEqual({
      reloads_per_sync: 'skipped',
      double_recycles: 'ok',
      spurious_reloads: 'ok',
      bad_change_pods_replaced: 'skipped',
      bad_change_deployments_touched: 'skipped',
    });
  });
});
