import type { V1Job } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { isFinished, reloadJobName } from './cronjob-run.ts';

describe('reloadJobName', () => {
  it('is the same for the same cutoff, different for another, and a valid Job name', () => {
    const name = 'a'.repeat(52);
    const t = Date.parse('2026-12-03T06:00:01Z');
    expect(reloadJobName(name, t)).toBe(reloadJobName(name, t));
    expect(reloadJobName(name, t)).not.toBe(reloadJobName(name, t + 1000));
    expect(reloadJobName(name, t).length).toBeLessThanOrEqual(63);
    expect(reloadJobName('nightly', t)).toMatch(/^nightly-r[0-9a-z]+$/);
  });
});

describe('isFinished', () => {
  it.each([
    [[{ type: 'Complete', status: 'True' }], true],
    [[{ type: 'Failed', status: 'True' }], true],
    [[{ type: 'SuccessCriteriaMet', status: 'True' }], false],
    [[{ type: 'Complete', status: 'False' }], false],
    [[], false],
  ])('%j → %s', (conditions, done) => {
    expect(isFinished({ status: { conditions } } as V1Job)).toBe(done);
  });
});
