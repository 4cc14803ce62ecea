import { describe, expect, it } from 'vitest';
import {
  expiredRecords,
  expiryIntervalMs,
  INBOX_LABELS,
  inboxLabels,
  inboxSelector,
  isInboxRecord,
  readRecord,
  recordBody,
  recordName,
} from './inbox.ts';
import type { SyncNotification } from './notification.ts';

const n = (phase: SyncNotification['phase'], startedAt = '2026-12-02T10:00:00Z'): SyncNotification => ({
  app: { namespace: 'argocd', name: 'shop' },
  phase,
  startedAt,
  resources: [
    { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'web', name: 'app', status: 'Synced' },
    { group: 'apps', version: 'v1', kind: 'Deployment', namespace: 'web', name: 'web', status: 'Synced' },
    { group: '', version: 'v1', kind: 'Secret', namespace: 'web', name: 'creds', status: 'Synced' },
  ],
});

describe('notification inbox records', () => {
  it('names one record per app, start and running/ended, as a valid ConfigMap name', () => {
    const run = recordName('gr', n('Running'));
    expect(recordName('gr', n('Running'))).toBe(run);
    expect(recordName('gr', n('Terminating'))).toBe(run);
    expect(recordName('gr', n('Succeeded'))).not.toBe(run);
    expect(recordName('gr', n('Failed'))).toBe(recordName('gr', n('Succeeded')));
    expect(recordName('gr', n('Running', '2026-12-02T10:05:00Z'))).not.toBe(run);
    expect(run).toMatch(/^gr-notify-[0-9a-f]{20}$/);
  });

  it('keeps only what the gate reads, and reads back what it kept, validated', () => {
    const back = readRecord({ data: { notification: recordBody(n('Succeeded')) } });
    expect(back).toEqual({
      ...n('Succeeded'),
      resources: n('Succeeded').resources.filter((r) => r.kind !== 'Deployment'),
    });
    expect(() => readRecord({ data: { notification: '{"app":{}}' } })).toThrow(/app\.name/);
    expect(() => readRecord({ data: {} })).toThrow(/JSON object/);
  });

  it('tells inbox records from other ConfigMaps by both labels', () => {
    expect(isInboxRecord({ ...INBOX_LABELS })).toBe(true);
    expect(isInboxRecord({ 'app.kubernetes.io/component': 'notification' })).toBe(false);
    expect(isInboxRecord(undefined)).toBe(false);
  });

  it("selects one release's records only, and still tells any release's record from a config", () => {
    expect(inboxSelector('gr-a')).toBe(
      'app.kubernetes.io/name=gitops-reloader,app.kubernetes.io/component=notification,app.kubernetes.io/instance=gr-a',
    );
    expect(inboxSelector('gr-a')).not.toBe(inboxSelector('gr-b'));
    expect(isInboxRecord(inboxLabels('gr-b'))).toBe(true);
  });

  it('expires records older than the bound, oldest first, whatever their phase', () => {
    const now = 1_000_000;
    const recs = [
      { name: 'fresh', created: now - 1_000 },
      { name: 'older', created: now - 60_001 },
      { name: 'oldest', created: now - 90_000 },
      { name: 'at-the-bound', created: now - 60_000 },
    ];
    expect(expiredRecords(recs, now, 60_000)).toEqual(['oldest', 'older']);
    expect(expiredRecords([], now, 60_000)).toEqual([]);
  });

  it('looks for expired records often enough to stay within a tenth of the bound', () => {
    expect(expiryIntervalMs(10 * 60_000)).toBe(30_000);
    expect(expiryIntervalMs(60_000)).toBe(6_000);
    expect(expiryIntervalMs(2_000)).toBe(1_000);
  });
});
