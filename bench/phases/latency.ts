// Event to action: one config of one workload changes; the time from the API server accepting the
// update (the PATCH response) to the first pod action for that workload (a pod getting a
// deletionTimestamp, or a surge pod appearing), as the bench's pod watch sees it. Changes go one at
// a time, each to a different workload, and only while fewer reloads run than the concurrency cap,
// so no change waits in the queue behind another.
import type { Context } from '../context.ts';
import { belowInFlight, changeConfig, firstAction, SERVICE_DEFAULTS } from '../context.ts';
import { workload } from '../fixture.ts';

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
    await belowInFlight(ctx, SERVICE_DEFAULTS.maxConcurrentReloads - 1);
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
