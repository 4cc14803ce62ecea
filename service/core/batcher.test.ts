import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type Batch, Batcher, batchCutoffMs, datingChange } from './batcher.ts';

describe('Batcher', () => {
  beforeEach(() => {
    vi.useFakeTimers();
    vi.setSystemTime(1_000_000);
  });
  afterEach(() => vi.useRealTimers());

  function make(debounceMs = 3000, maxWaitMs = 30_000) {
    const batches: Batch[] = [];
    const b = new Batcher({ debounceMs, maxWaitMs, onBatch: (x) => batches.push(x) });
    return { b, batches };
  }

  it('turns three configs changing within the debounce window into one batch', () => {
    const { b, batches } = make();
    b.add({ workload: 'W', config: 'ConfigMap/ns/a', observedAt: Date.now() });
    vi.advanceTimersByTime(1000);
    b.add({ workload: 'W', config: 'ConfigMap/ns/b', observedAt: Date.now() });
    vi.advanceTimersByTime(1000);
    b.add({ workload: 'W', config: 'Secret/ns/c', observedAt: Date.now() });
    vi.advanceTimersByTime(2999);
    expect(batches).toHaveLength(0);
    vi.advanceTimersByTime(1);
    expect(batches).toEqual([
      {
        workload: 'W',
        configs: ['ConfigMap/ns/a', 'ConfigMap/ns/b', 'Secret/ns/c'],
        firstObservedAt: 1_000_000,
        lastObservedAt: 1_002_000,
        observedAt: { 'ConfigMap/ns/a': 1_000_000, 'ConfigMap/ns/b': 1_001_000, 'Secret/ns/c': 1_002_000 },
      },
    ]);
  });

  it('lists the batches still open, read-only, and carries the sync a released change followed', () => {
    const { b, batches } = make();
    b.add({ workload: 'W', config: 'b', observedAt: 1 });
    vi.advanceTimersByTime(1000);
    b.add({ workload: 'W', config: 'a', observedAt: 2, via: { app: 'argocd/shop', revision: 'r1' } });
    b.add({ workload: 'V', config: 'c', observedAt: 3 });
    expect([...b.open()]).toEqual([
      { workload: 'W', configs: ['a', 'b'], since: 1_000_000 },
      { workload: 'V', configs: ['c'], since: 1_001_000 },
    ]);
    expect(b.pending).toBe(2); // reading fires nothing
    vi.advanceTimersByTime(3000);
    expect([...b.open()]).toEqual([]);
    expect(batches.map((x) => [x.workload, x.via])).toEqual([
      ['W', { app: 'argocd/shop', revision: 'r1' }],
      ['V', undefined],
    ]);
  });

  it('keeps the latest observation of each config, whatever order the changes arrive in', () => {
    const { b, batches } = make();
    b.add({ workload: 'W', config: 'a', observedAt: 1_000_500 });
    b.add({ workload: 'W', config: 'a', observedAt: 1_000_100 });
    b.add({ workload: 'W', config: 'b', observedAt: 1_000_200 });
    vi.advanceTimersByTime(3000);
    expect(batches[0]?.observedAt).toEqual({ a: 1_000_500, b: 1_000_200 });
  });

  it('keeps the time of a data change when a metadata-only edit of the config follows in the batch', () => {
    // Seed 5449: the edit's time would move the cutoff past pods that already read the new data.
    const { b, batches } = make();
    b.add({ workload: 'W', config: 'a', observedAt: 1_000_000 });
    b.add({ workload: 'W', config: 'a', observedAt: 1_002_000, metadataOnly: true });
    vi.advanceTimersByTime(5000);
    expect(batches[0]?.observedAt).toEqual({ a: 1_000_000 });
  });

  it('keeps workloads apart', () => {
    const { b, batches } = make();
    b.add({ workload: 'W1', config: 'c', observedAt: Date.now() });
    b.add({ workload: 'W2', config: 'c', observedAt: Date.now() });
    vi.advanceTimersByTime(3000);
    expect(batches.map((x) => x.workload).sort()).toEqual(['W1', 'W2']);
  });

  it('fires at the maximum wait even if changes never stop', () => {
    const { b, batches } = make(3000, 10_000);
    for (let t = 0; t < 20; t++) {
      b.add({ workload: 'W', config: `c${t % 2}`, observedAt: Date.now() });
      vi.advanceTimersByTime(1000);
    }
    expect(batches.length).toBe(2);
    expect(batches[0]?.lastObservedAt).toBe(1_000_000 + 9000);
  });

  it('honours a per-workload debounce override', () => {
    const { b, batches } = make(3000);
    b.add({ workload: 'W', config: 'c', observedAt: Date.now(), debounceMs: 0 });
    vi.advanceTimersByTime(0);
    expect(batches).toHaveLength(1);
  });

  it('clear drops open batches; flush fires them', () => {
    const { b, batches } = make();
    b.add({ workload: 'W1', config: 'c', observedAt: Date.now() });
    b.clear();
    vi.advanceTimersByTime(10_000);
    expect(batches).toHaveLength(0);
    b.add({ workload: 'W2', config: 'c', observedAt: Date.now() });
    b.flush();
    expect(batches.map((x) => x.workload)).toEqual(['W2']);
    expect(b.pending).toBe(0);
  });
});

describe('batchCutoffMs', () => {
  const batch = (observedAt: Record<string, number>): Batch => ({
    workload: 'W',
    configs: Object.keys(observedAt).sort(),
    firstObservedAt: Math.min(...Object.values(observedAt)),
    lastObservedAt: Math.max(...Object.values(observedAt)),
    observedAt,
  });
  // The identity, so that each case shows which time was taken.
  const at = (written: Record<string, number> = {}, newestCutoffMs?: number) => ({
    newestCutoffMs,
    writtenAtMs: (id: string) => written[id],
    cutoffOf: (ms: number) => ms,
  });

  it('dates the change by the configs that changed, not by a later, unchanged one', () => {
    // A notification listed Secret/creds (unchanged) when it arrived, 6 s after ConfigMap/app changed.
    const b = batch({ 'ConfigMap/ns/app': 1_000_000, 'Secret/ns/creds': 1_006_000 });
    expect(batchCutoffMs(b, ['ConfigMap/ns/app'], at())).toBe(1_000_000);
  });

  it('takes the newest of several changed configs', () => {
    const b = batch({ a: 1_000_000, b: 1_003_000, c: 1_009_000 });
    expect(batchCutoffMs(b, ['a', 'b'], at())).toBe(1_003_000);
  });

  it('falls back to the latest observation when a changed config is not in the batch', () => {
    const b = batch({ a: 1_000_000, b: 1_003_000 });
    expect(batchCutoffMs(b, ['a', 'z'], at())).toBe(1_003_000);
    expect(batchCutoffMs(b, [], at())).toBe(1_003_000);
  });

  it("dates a change by the config's newest write when that is earlier than the batch saw it (seeds 7270, 8616)", () => {
    // A template change at 1_079_000 started the batch; the config was last written at 1_021_000.
    const b = batch({ workload: 1_079_000 });
    expect(batchCutoffMs(b, ['cm'], at({ cm: 1_021_000 }))).toBe(1_021_000);
    // Observed again late (a notification listing it): the write still dates it.
    expect(batchCutoffMs(batch({ cm: 1_079_000 }), ['cm'], at({ cm: 1_021_000 }))).toBe(1_021_000);
    // A write after the observation (clock skew) never moves the cutoff later than the observation.
    expect(batchCutoffMs(batch({ cm: 1_000_000 }), ['cm'], at({ cm: 1_000_400 }))).toBe(1_000_000);
  });

  it('does not date a change by a metadata edit, when a reload planned earlier carries it', () => {
    // app's data changed (reload planned, cutoff 1_023_000); later only its annotations were edited,
    // which moved its newest write too.
    const b = { ...batch({ app: 1_070_000 }), metadataOnly: ['app'] };
    expect(batchCutoffMs(b, ['app'], at({ app: 1_070_000 }, 1_023_000))).toBe(1_023_000);
    // With no reload planned, the edit is the only (late, safe) bound.
    expect(batchCutoffMs(b, ['app'], at({ app: 1_070_000 }))).toBe(1_070_000);
  });

  it('is never before the newest planned reload, which it supersedes (seeds 711, 87)', () => {
    const b = batch({ workload: 1_079_000 });
    expect(batchCutoffMs(b, ['cm'], at({ cm: 1_021_000 }, 1_046_000))).toBe(1_046_000);
    expect(batchCutoffMs(b, ['cm'], at({ cm: 1_060_000 }, 1_046_000))).toBe(1_060_000);
  });
});

describe('datingChange', () => {
  const data = (observedAt: number) => ({ observedAt });
  const meta = (observedAt: number) => ({ observedAt, metadataOnly: true });

  it('takes the only observation when there is no earlier one', () => {
    expect(datingChange(undefined, meta(1_000_000))).toEqual(meta(1_000_000));
  });

  it('keeps the data change when a metadata-only edit follows it', () => {
    expect(datingChange(data(1_000_000), meta(1_004_000))).toEqual(data(1_000_000));
  });

  it('takes the data change when it follows a metadata-only edit', () => {
    expect(datingChange(meta(1_000_000), data(1_004_000))).toEqual(data(1_004_000));
  });

  it('takes the later of two data changes, in either order of arrival', () => {
    expect(datingChange(data(1_000_000), data(1_004_000))).toEqual(data(1_004_000));
    expect(datingChange(data(1_004_000), data(1_000_000))).toEqual(data(1_004_000));
  });

  it('takes the later of two metadata-only edits', () => {
    expect(datingChange(meta(1_000_000), meta(1_004_000))).toEqual(meta(1_004_000));
  });
});
