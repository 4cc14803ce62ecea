import { describe, expect, it } from 'vitest';
import {
  createDecision,
  decodeRecord,
  encodeRecord,
  JOB_KEY,
  type JobSpecRecord,
  MAX_JOB_BYTES,
  RECORD_KEY,
  recordName,
} from './job-spec-record.ts';

const job = (spec: Record<string, unknown> = {}) => ({
  apiVersion: 'batch/v1',
  kind: 'Job',
  metadata: { name: 'migrate', namespace: 'shop' },
  spec: {
    template: { spec: { containers: [{ name: 'c', env: [{ name: 'PASSWORD', value: 'hunter2' }] }] } },
    ...spec,
  },
});

const record = (o: Partial<JobSpecRecord> = {}): JobSpecRecord => ({
  namespace: 'shop',
  name: 'migrate',
  oldUid: 'u-1',
  cutoff: '2026-12-04T04:00:00.000Z',
  phase: 'deleting',
  job: job(),
  ...o,
});

describe('Job reload records', () => {
  it('round-trips through ConfigMap data', () => {
    const r = record({ phase: 'creating', creatingAt: '2026-12-04T04:00:01.000Z' });
    expect(decodeRecord(encodeRecord(r))).toEqual({ ok: true, record: r });
  });

  it('names one ConfigMap per Job, a valid name, the same every time', () => {
    const a = recordName('gitops-reloader', 'shop', 'migrate');
    expect(a).toMatch(/^gitops-reloader-job-[0-9a-f]{20}$/);
    expect(recordName('gitops-reloader', 'shop', 'migrate')).toBe(a);
    expect(recordName('gitops-reloader', 'shop', 'other')).not.toBe(a);
    expect(recordName('gitops-reloader', 'sho', 'p-migrate')).not.toBe(
      recordName('gitops-reloader', 'shop', '-migrate'),
    );
  });

  it('refuses to record a Job too large for a ConfigMap', () => {
    const big = record({ job: job({ big: 'x'.repeat(MAX_JOB_BYTES) }) });
    expect(() => encodeRecord(big)).toThrow(RangeError);
  });

  it('rejects a hand-edited record that would create a Job elsewhere, and never quotes the Job', () => {
    const data = encodeRecord(record());
    const moved = {
      ...data,
      [JOB_KEY]: JSON.stringify({ ...job(), metadata: { name: 'migrate', namespace: 'bank' } }),
    };
    const d = decodeRecord(moved);
    expect(d.ok).toBe(false);
    expect(JSON.stringify(d)).not.toContain('hunter2');
    expect(decodeRecord({ ...data, [JOB_KEY]: JSON.stringify({ ...job(), kind: 'Pod' }) }).ok).toBe(false);
    expect(decodeRecord({ ...data, [RECORD_KEY]: '{"namespace":"shop"' }).ok).toBe(false);
    expect(
      decodeRecord({
        ...data,
        [RECORD_KEY]: JSON.stringify({ ...JSON.parse(data[RECORD_KEY] as string), phase: 'x' }),
      }).ok,
    ).toBe(false);
    expect(decodeRecord(undefined).ok).toBe(false);
  });

  it('creates the Job when the create cannot have gone out, or when nothing but a person removes the Job', () => {
    const now = Date.parse('2026-12-04T05:00:00.000Z');
    expect(createDecision(record(), now)).toBe('create');
    expect(createDecision(record({ phase: 'creating', creatingAt: '2026-12-04T04:59:59.000Z' }), now)).toBe(
      'create',
    );
  });

  it('does not create again when the Job may have run and been removed by its TTL since', () => {
    const now = Date.parse('2026-12-04T05:00:00.000Z');
    const ttl = (s: number, at: string) =>
      record({ phase: 'creating', creatingAt: at, job: job({ ttlSecondsAfterFinished: s }) });
    expect(createDecision(ttl(0, '2026-12-04T04:59:59.000Z'), now)).toBe('uncertain');
    expect(createDecision(ttl(60, '2026-12-04T04:58:00.000Z'), now)).toBe('uncertain');
    // Too little time has passed for the TTL to have removed it: it was never created.
    expect(createDecision(ttl(3600, '2026-12-04T04:58:00.000Z'), now)).toBe('create');
    // In phase deleting the create never went out, TTL or not.
    expect(createDecision(record({ job: job({ ttlSecondsAfterFinished: 0 }) }), now)).toBe('create');
  });
});
