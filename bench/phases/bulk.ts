// Bulk: N Deployments reloaded at once under the default concurrency cap. One config of each changes
// (all changes sent together, bounded like the fixture); the figure is the time from the first change
// accepted until every one of them has all its pods replaced and Ready and its reload complete. The
// proxy counts what the service sent meanwhile: API cost per reloaded pod, without watches and
// without Lease renewals (those are time-based, not per pod).
import { type Counts, diff, total } from '../api-proxy.ts';
import { forEachBounded } from '../bounded.ts';
import type { Context } from '../context.ts';
import { changeConfig, quiet, sleep, until } from '../context.ts';
import { workload } from '../fixture.ts';

export interface BulkRun {
  deployments: number;
  seconds: number;
  pods_replaced: number;
  api_requests: number;
  api_requests_per_pod: number;
  api_requests_by_verb: Counts;
}

export const perPodRequest = (key: string) => !key.startsWith('watch ') && !key.endsWith(' leases');

export async function bulk(ctx: Context, indices: number[]): Promise<BulkRun> {
  const { scale: s, names: n } = ctx;
  const ws = indices.map((i) => workload(n, s, i));
  await quiet(ctx, 2000);
  const old = new Set<string>();
  for (const w of ws) for (const p of ctx.pods.live(w.namespace, w.name)) old.add(p.uid);
  const before = await ctx.proxy.counts();
  let first = Number.POSITIVE_INFINITY;
  for (const w of ws) ctx.reloads.expect(w.namespace, w.name);
  const sentAt = Date.now();
  await forEachBounded(ws, s.inFlight, async (w) => {
    first = Math.min(first, await changeConfig(ctx, w.envFrom));
  });
  const done = (w: (typeof ws)[number]) => {
    const reloaded = ctx.reloads
      .of(w.namespace, w.name)
      .some((r) => r.startedAt >= sentAt && r.completedAt !== undefined);
    if (!reloaded) return false;
    const live = ctx.pods.live(w.namespace, w.name);
    return live.length === s.replicas && live.every((p) => p.ready && !p.surge && !old.has(p.uid));
  };
  let lastProgress = Date.now();
  const end = await until(`${ws.length} Deployments reloaded`, 60 * 60_000, () => {
    const finished = ws.filter(done).length;
    if (Date.now() - lastProgress > 10_000) {
      lastProgress = Date.now();
      ctx.say(`bulk: ${finished}/${ws.length} reloaded`);
    }
    return finished === ws.length ? Date.now() : undefined;
  });
  // The 'Reloaded' Event is written just after the 'reload complete' line: let it land.
  await sleep(1000);
  const requests = diff(await ctx.proxy.counts(), before);
  const replaced = ws
    .flatMap((w) => ctx.reloads.of(w.namespace, w.name).filter((r) => r.startedAt >= sentAt))
    .reduce((a, r) => a + (r.replaced ?? 0), 0);
  const perPod = total(requests, perPodRequest);
  const run: BulkRun = {
    deployments: ws.length,
    seconds: (end - first) / 1000,
    pods_replaced: replaced,
    api_requests: perPod,
    api_requests_per_pod: replaced > 0 ? perPod / replaced : Number.NaN,
    api_requests_by_verb: requests,
  };
  ctx.say(
    `bulk: ${ws.length} Deployments in ${run.seconds.toFixed(1)}s; ${perPod} requests for ${replaced} pods (${run.api_requests_per_pod.toFixed(2)}/pod)`,
  );
  return run;
}
