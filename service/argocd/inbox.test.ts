import { describe, expect, it } from 'vitest';
import { INBOX_LABELS, isInboxRecord, readRecord, recordBody, recordName } from './inbox.ts';
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
});
