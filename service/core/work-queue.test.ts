import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import { groupShare, WorkQueue } from './work-queue.ts';

interface A {
  workload: string;
  n: number;
  minIntervalMs?: number;
  notBefore?: number;
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe('WorkQueue', () => {
  it('runs one action per workload at a time and keeps only the newest queued one', async () => {
    const gate = deferred();
    const ran: number[] = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 5,
      minIntervalMs: 0,
      run: async (a) => {
        ran.push(a.n);
        if (a.n === 1) await gate.promise;
      },
    });
    q.submit({ workload: 'W', n: 1 });
    q.submit({ workload: 'W', n: 2 });
    q.submit({ workload: 'W', n: 3 });
    expect(ran).toEqual([1]);
    gate.resolve();
    await q.drained();
    expect(ran).toEqual([1, 3]);
  });

  it('caps concurrency across workloads', async () => {
    const gates = new Map<string, ReturnType<typeof deferred>>();
    let peak = 0;
    const q = new WorkQueue<A>({
      maxConcurrent: 2,
      minIntervalMs: 0,
      run: async (a) => {
        peak = Math.max(peak, q.active);
        const g = deferred();
        gates.set(a.workload, g);
        await g.promise;
      },
    });
    for (const w of ['a', 'b', 'c', 'd']) q.submit({ workload: w, n: 0 });
    expect(q.active).toBe(2);
    // Two run, two wait: the waiting count is the queue depth metrics report.
    expect(q.waiting).toBe(2);
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setImmediate(r));
      for (const g of gates.values()) g.resolve();
    }
    await q.drained();
    expect(peak).toBe(2);
    expect([...gates.keys()].sort()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('waits the minimum interval before reloading the same workload again', async () => {
    let now = 0;
    const pendingTimers: Array<{ at: number; fn: () => void }> = [];
    const timers = {
      now: () => now,
      set: (fn: () => void, ms: number) => {
        const t = { at: now + ms, fn };
        pendingTimers.push(t);
        return t;
      },
      clear: (h: unknown) => {
        const i = pendingTimers.indexOf(h as (typeof pendingTimers)[number]);
        if (i >= 0) pendingTimers.splice(i, 1);
      },
    };
    const ran: Array<[number, number]> = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 1,
      minIntervalMs: 10_000,
      timers,
      run: async (a) => {
        ran.push([a.n, now]);
      },
    });
    q.submit({ workload: 'W', n: 1 });
    await new Promise((r) => setImmediate(r));
    now = 2000;
    q.submit({ workload: 'W', n: 2 });
    expect(ran).toEqual([[1, 0]]);
    expect(pendingTimers.map((t) => t.at)).toEqual([10_000]);
    now = 10_000;
    pendingTimers[0]?.fn();
    await q.drained();
    expect(ran).toEqual([
      [1, 0],
      [2, 10_000],
    ]);
  });

  it('merges a new action into the queued one when asked', async () => {
    const gate = deferred();
    const ran: number[] = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 1,
      minIntervalMs: 0,
      merge: (a, b) => ({ workload: a.workload, n: a.n + b.n }),
      run: async (a) => {
        ran.push(a.n);
        if (ran.length === 1) await gate.promise;
      },
    });
    q.submit({ workload: 'W', n: 1 });
    q.submit({ workload: 'W', n: 10 });
    q.submit({ workload: 'W', n: 100 });
    gate.resolve();
    await q.drained();
    expect(ran).toEqual([1, 110]);
  });

  it('stop waits for running actions and drops queued ones', async () => {
    const gate = deferred();
    const ran: number[] = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 1,
      minIntervalMs: 0,
      run: async (a) => {
        ran.push(a.n);
        await gate.promise;
      },
    });
    q.submit({ workload: 'a', n: 1 });
    q.submit({ workload: 'b', n: 2 });
    const stopped = q.stop();
    gate.resolve();
    await stopped;
    expect(ran).toEqual([1]);
  });

  it("holds a workload's own longer interval (a batch window) after its reload, and merges what came in", async () => {
    const { clock, pending, timers } = fakeTimers();
    const ran: Array<[number, number]> = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 1,
      minIntervalMs: 1000,
      timers,
      merge: (a, b) => ({ ...b, n: a.n + b.n }),
      run: async (a) => {
        ran.push([a.n, clock.now]);
      },
    });
    q.submit({ workload: 'W', n: 1, minIntervalMs: 30_000 });
    await new Promise((r) => setImmediate(r));
    clock.now = 2000;
    q.submit({ workload: 'W', n: 10, minIntervalMs: 30_000 });
    clock.now = 5000;
    q.submit({ workload: 'W', n: 100, minIntervalMs: 30_000 });
    expect(ran).toEqual([[1, 0]]);
    expect(pending.map((t) => t.at)).toEqual([30_000]);
    clock.now = 30_000;
    pending[0]?.fn();
    await q.drained();
    expect(ran).toEqual([
      [1, 0],
      [110, 30_000],
    ]);
  });

  it('starts nothing before notBefore, even the first action of a workload', async () => {
    const { clock, pending, timers } = fakeTimers();
    const ran: number[] = [];
    const q = new WorkQueue<A>({
      maxConcurrent: 1,
      minIntervalMs: 0,
      timers,
      run: async (a) => void ran.push(a.n),
    });
    clock.now = 1000;
    q.submit({ workload: 'W', n: 1, notBefore: 8000 });
    expect(ran).toEqual([]);
    expect(pending.map((t) => t.at)).toEqual([8000]);
    clock.now = 8000;
    pending[0]?.fn();
    await q.drained();
    expect(ran).toEqual([1]);
  });
});

describe('WorkQueue fairness and bounded state', () => {
  it('bounds every namespace to ⌊(cap − 1) / 2⌋ slots, at least 1', () => {
    expect([1, 2, 3, 4, 5, 6, 20].map(groupShare)).toEqual([1, 1, 1, 1, 2, 2, 9]);
    // Any two namespaces together leave a slot free whenever the cap allows it (cap ≥ 3).
    for (let cap = 3; cap <= 64; cap++) expect(2 * groupShare(cap)).toBeLessThanOrEqual(cap - 1);
  });

  it('two stuck namespaces leave a slot for a third, which starts at once', async () => {
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof deferred>>();
    const q = new WorkQueue<A>({
      maxConcurrent: 3,
      minIntervalMs: 0,
      groupOf: (w) => w.split('/')[0] as string,
      run: async (a) => {
        started.push(a.workload);
        const g = deferred();
        gates.set(a.workload, g);
        await g.promise;
      },
    });
    // Two tenants' stuck reloads are queued first, and never finish on their own.
    for (const w of ['tenant/a', 'tenant/b', 'tenant/c', 'stuck/p', 'stuck/q'])
      q.submit({ workload: w, n: 0 });
    expect(started).toEqual(['tenant/a', 'stuck/p']);
    expect(q.active).toBe(2);
    // A third namespace's reload arrives later and runs at once, with both tenants still stuck.
    q.submit({ workload: 'third/y', n: 0 });
    expect(started).toEqual(['tenant/a', 'stuck/p', 'third/y']);
    // A freed slot goes to the least busy namespace with work waiting, within its share.
    gates.get('tenant/a')?.resolve();
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual(['tenant/a', 'stuck/p', 'third/y', 'tenant/b']);
    for (let i = 0; i < 6; i++) {
      for (const g of gates.values()) g.resolve();
      await new Promise((r) => setImmediate(r));
    }
    await q.drained();
    expect(started.sort()).toEqual(['stuck/p', 'stuck/q', 'tenant/a', 'tenant/b', 'tenant/c', 'third/y']);
  });

  it('holds one namespace to its share even when the other slots are idle', async () => {
    let running = 0;
    let most = 0;
    const q = new WorkQueue<A>({
      maxConcurrent: 20,
      minIntervalMs: 0,
      groupOf: (w) => w.split('/')[0] as string,
      run: async () => {
        running++;
        most = Math.max(most, running);
        await new Promise((r) => setImmediate(r));
        running--;
      },
    });
    for (let i = 0; i < 40; i++) q.submit({ workload: `tenant/w${i}`, n: i });
    await q.drained();
    expect(most).toBe(9);
  });

  it('forgets a workload once it is idle and its minimum interval is over', async () => {
    let now = 0;
    const jobs: Array<{ at: number; fn: () => void }> = [];
    const timers = {
      now: () => now,
      set: (fn: () => void, ms: number) => {
        const j = { at: now + ms, fn };
        jobs.push(j);
        return j;
      },
      clear: (h: unknown) => {
        const i = jobs.indexOf(h as (typeof jobs)[number]);
        if (i >= 0) jobs.splice(i, 1);
      },
    };
    const q = new WorkQueue<A>({ maxConcurrent: 2, minIntervalMs: 1000, timers, run: async () => {} });
    for (let i = 0; i < 100; i++) q.submit({ workload: `ns/w${i}`, n: i });
    await q.drained();
    expect(q.size).toBe(100);
    now = 1000;
    for (const j of jobs.splice(0)) if (j.at <= now) j.fn();
    expect(q.size).toBe(0);
  });
});
