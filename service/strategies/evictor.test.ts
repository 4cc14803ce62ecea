// What a restart tells the status while it waits: for a restart-budget slot, or because a
// PodDisruptionBudget refused an eviction (engine/status.ts shows the reload as waiting, and why).
import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import { silentLogger } from '../log.ts';
import { budgetSlot, PodEvictor, type Views } from './evictor.ts';
import { RestartBudget } from './restart-budget.ts';
import type { StrategyContext } from './types.ts';

/** A context whose evictions the test answers, and that records what it tells the status. */
function context(answer: () => Promise<unknown>, budget?: RestartBudget) {
  const told: string[] = [];
  const ctx = {
    core: { createNamespacedPodEviction: answer, readNamespacedPod: answer },
    log: silentLogger,
    signal: new AbortController().signal,
    stallAfterMs: 60_000,
    onStall: () => {},
    progress: () => {},
    onWait: (why: string, on: boolean) => told.push(`${why} ${on}`),
    ...(budget ? { budget } : {}),
  } as unknown as StrategyContext;
  return { ctx, told };
}

const views: Views = { changed: async () => {}, failing: undefined, durable: async () => {} };
const pod = (name: string) => ({ name, uid: `uid-${name}` });
const refusal = (reason: string) =>
  Object.assign(new Error('429'), {
    code: 429,
    body: { message: 'Cannot evict pod', details: { causes: [{ reason, message: 'budget' }] } },
  });

describe('PodEvictor and the status', () => {
  it('says a PodDisruptionBudget refuses its evictions once, and that it no longer does after one passes', async () => {
    let refuse = true;
    const { ctx, told } = context(async () => {
      if (refuse) throw refusal('DisruptionBudget');
      return {};
    });
    const e = new PodEvictor(ctx, 'ns', 'Deployment/web', views);
    expect(await e.evict([pod('a')])).toBe(false);
    expect(await e.evict([pod('a')])).toBe(false);
    expect(told).toEqual(['pdb true']);
    refuse = false;
    expect(await e.evict([pod('a')])).toBe(true);
    expect(told).toEqual(['pdb true', 'pdb false']);
  });

  it('a 429 that is not a PodDisruptionBudget (the API server shedding load) is not one', async () => {
    const { ctx, told } = context(async () => {
      throw refusal('TooManyRequests');
    });
    expect(await new PodEvictor(ctx, 'ns', 'Deployment/web', views).evict([pod('a')])).toBe(false);
    expect(told).toEqual([]);
  });
});

describe('budgetSlot', () => {
  it('says the reload waits for a budget slot only while it does', async () => {
    const time = fakeTimers();
    const budget = RestartBudget.of({ perMinute: 1, perNamespacePerMinute: 0, timers: time.timers });
    const { ctx, told } = context(async () => ({}), budget);
    await budgetSlot(ctx, 'ns');
    expect(told).toEqual([]); // a free slot: no wait
    const second = budgetSlot(ctx, 'ns');
    await time.advance(time.clock.now + 1);
    expect(told).toEqual(['budget true']);
    await time.advance(time.clock.now + 60_000);
    await second;
    expect(told).toEqual(['budget true', 'budget false']);
  });

  it('takes nothing without a budget', async () => {
    const { ctx, told } = context(async () => ({}));
    await budgetSlot(ctx, 'ns');
    expect(told).toEqual([]);
  });
});
