// Event to action: one config of one workload changes; the time from the API server accepting the
// update (the PATCH response) to the first pod action for that workload (a pod getting a
// deletionTimestamp, or a surge pod appearing), as the bench's pod watch sees it. Changes go one at
// a time, each to a different workload, and only while fewer than LATENCY_IN_FLIGHT reloads run, so
// no change waits behind another: neither in the queue nor for a write token (--api-write-burst).
import type { Context } from '../context.ts';
import { belowInFlight, changeConfig, firstAction } from '../context.ts';
import { workload } from '../fixture.ts';

/**
 * Reloads running at most when a change is sent (the old concurrency cap of 5, minus one): about 7
 * writes each over a few seconds stay well inside the default write burst (30), so a first action
 * never waits for a token here. Bulk measures what many at once cost.
 */
const LATENCY_IN_FLIGHT = 4;

export interface LatencySample {
  workload: string;
  ref: 'envFrom' | 'keyRef' | 'volume';
  action: 'eviction' | 'surge';
  latency_ms: number;
  /** From the change to the service's 'reload started' line: decision time, before the cutoff wait. */
  to_reload_started_ms?: number;
}

export async function latency(ctx: Context, indices: number[], timeoutMs: number): Promise<LatencySample[]> {
  const out: LatencySample[] = [];
  const refs = ['envFrom', 'keyRef', 'volume'] as const;
  for (const [k, i] of indices.entries()) {
    const w = workload(ctx.names, ctx.scale, i);
    const ref = refs[k % 3] as (typeof refs)[number];
    await belowInFlight(ctx, LATENCY_IN_FLIGHT);
    ctx.reloads.expect(w.namespace, w.name);
    const acceptedAt = await changeConfig(ctx, w[ref]);
    const action = await firstAction(ctx, w.namespace, w.name, acceptedAt, timeoutMs);
    const started = ctx.reloads.of(w.namespace, w.name).find((r) => r.startedAt >= acceptedAt);
    out.push({
      workload: `${w.namespace}/${w.name}`,
      ref,
      action: action.kind,
      latency_ms: action.at - acceptedAt,
      ...(started ? { to_reload_started_ms: started.startedAt - acceptedAt } : {}),
    });
    if ((k + 1) % 10 === 0 || k + 1 === indices.length) {
      ctx.say(`latency: ${k + 1}/${indices.length} changes, last ${action.at - acceptedAt} ms`);
    }
  }
  return out;
}
