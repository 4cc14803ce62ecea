import { describe, expect, it } from 'vitest';
import { type AppSync, appFromObject, SyncTracker } from './sync-tracker.ts';

function app(phase?: string, startedAt?: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: { name: 'shop', namespace: 'argocd' },
    spec: {
      source: { repoURL: 'https://git.example/shop.git', path: 'deploy', targetRevision: 'main' },
      destination: { server: 'https://kubernetes.default.svc', namespace: 'web' },
    },
    ...(phase
      ? {
          status: {
            operationState: {
              phase,
              startedAt,
              ...(phase === 'Running' ? {} : { finishedAt: '2026-12-02T10:00:09Z' }),
              operation: { sync: { revision: 'abc' } },
              syncResult: {
                revision: 'abc',
                resources: [
                  {
                    group: '',
                    version: 'v1',
                    kind: 'ConfigMap',
                    namespace: 'web',
                    name: 'cfg',
                    status: 'Synced',
                  },
                  { kind: 'Broken' },
                ],
              },
            },
          },
        }
      : {}),
    ...extra,
  };
}

const read = (raw: unknown) => appFromObject(raw) as AppSync;

describe('appFromObject', () => {
  it('keeps phase, times, revision, resources, sources and destination', () => {
    const a = read(app('Succeeded', '2026-12-02T10:00:00Z'));
    expect(a.app).toEqual({ namespace: 'argocd', name: 'shop' });
    expect(a.operation).toEqual({
      phase: 'Succeeded',
      startedAt: '2026-12-02T10:00:00Z',
      finishedAt: '2026-12-02T10:00:09Z',
      revision: 'abc',
      message: undefined,
      resources: [
        { group: '', version: 'v1', kind: 'ConfigMap', namespace: 'web', name: 'cfg', status: 'Synced' },
      ],
    });
    expect(a.sources).toEqual([
      { repoURL: 'https://git.example/shop.git', path: 'deploy', chart: undefined, targetRevision: 'main' },
    ]);
    expect(a.destination.namespace).toBe('web');
    expect(a.requested).toBe(false);
  });

  it('returns undefined for an object without a name or namespace', () => {
    expect(appFromObject({ metadata: { name: 'x' } })).toBeUndefined();
    expect(appFromObject(null)).toBeUndefined();
  });
});

describe('SyncTracker', () => {
  it('reports a start and one end per operation', () => {
    const t = new SyncTracker();
    expect(t.observe(read(app()))).toBeUndefined();
    expect(t.observe(read(app(undefined, undefined, { operation: { sync: {} } })))?.kind).toBe('started');
    expect(t.isSyncing('argocd/shop')).toBe(true);
    expect(
      t.observe(read(app('Running', '2026-12-02T10:00:00Z', { operation: { sync: {} } }))),
    ).toBeUndefined();
    expect(t.observe(read(app('Succeeded', '2026-12-02T10:00:00Z')))?.kind).toBe('ended');
    expect(t.isSyncing('argocd/shop')).toBe(false);
    // The same ended operation seen again (a relist) is not a new end.
    expect(t.observe(read(app('Succeeded', '2026-12-02T10:00:00Z')))).toBeUndefined();
    // A re-sync of the same revision is a new operation: a new startedAt.
    expect(t.observe(read(app('Running', '2026-12-02T10:05:00Z')))?.kind).toBe('started');
    expect(t.observe(read(app('Failed', '2026-12-02T10:05:00Z')))?.kind).toBe('ended');
  });

  it('reports the end of an operation whose Running phase it never saw', () => {
    const t = new SyncTracker();
    t.observe(read(app('Succeeded', '2026-12-02T10:00:00Z')));
    expect(t.observe(read(app('Error', '2026-12-02T11:00:00Z')))?.kind).toBe('ended');
  });

  it('counts Terminating as still running', () => {
    const t = new SyncTracker();
    t.observe(read(app('Terminating', '2026-12-02T10:00:00Z')));
    expect(t.isSyncing('argocd/shop')).toBe(true);
  });
});
