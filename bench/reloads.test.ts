import { describe, expect, it } from 'vitest';
import type { PodObserver, PodRecord } from './pods.ts';
import { ReloadLog, type ReloadWindow } from './reloads.ts';

const T0 = Date.parse('2026-12-02T10:00:00.000Z');

function window(o: Partial<ReloadWindow> = {}): ReloadWindow {
  return {
    key: 'ns/web',
    process: 'svc',
    startedAt: T0 + 5,
    loggedAt: T0,
    // A snapshotting restart acts within milliseconds; its cutoff is 2 s ahead.
    cutoffMs: T0 + 2_000,
    resumed: false,
    completedAt: T0 + 3_000,
    ...o,
  };
}

function pod(name: string, o: Partial<PodRecord>): PodRecord {
  return {
    uid: `uid-${name}`,
    name,
    namespace: 'ns',
    app: 'web',
    surge: false,
    createdAsSurge: false,
    createdAt: T0 - 60_000,
    firstSeenAt: T0 - 60_000,
    ready: true,
    ...o,
  };
}

function doubles(windows: ReloadWindow[], pods: PodRecord[]) {
  const log = new ReloadLog();
  log.windows.push(...windows);
  const observer = { pods: new Map(pods.map((p) => [p.uid, p])) } as unknown as PodObserver;
  return log.doubleRecycles(observer).map((d) => d.pod);
}

describe('ReloadLog.doubleRecycles', () => {
  it('counts a replacement evicted again, though it was stamped before the cutoff', () => {
    const old = pod('old', { deletingAt: T0 + 50 });
    // Created by the ReplicaSet after the first eviction, in the same second as the change.
    const replacement = pod('new', { createdAt: T0, firstSeenAt: T0 + 60, deletingAt: T0 + 900 });
    expect(doubles([window()], [old, replacement])).toEqual(['ns/new']);
  });

  it('does not count the old pods a reload replaces, nor surge pods, nor pods left alone', () => {
    const old = pod('old', { deletingAt: T0 + 50 });
    const surge = pod('surge', { surge: true, createdAt: T0, firstSeenAt: T0 + 20, deletingAt: T0 + 2_500 });
    const kept = pod('kept', { createdAt: T0, firstSeenAt: T0 + 60 });
    expect(doubles([window()], [old, surge, kept])).toEqual([]);
  });

  it('still counts a pod created at or after the cutoff of a reload that used the timestamp rule', () => {
    const late = pod('late', { createdAt: T0 + 2_000, firstSeenAt: T0 - 1, deletingAt: T0 + 2_600 });
    expect(doubles([window()], [late])).toEqual(['ns/late']);
  });
});
