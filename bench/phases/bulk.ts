// Bulk: N Deployments reloaded at once under the default concurrency cap and write rate limit. One config of each changes
// (all changes sent together, bounded like the fixture); the figure is the time from the first change
// accepted until every one of them has all its pods replaced and Ready and its reload complete. The
// proxy counts what the service sent meanwhile: API cost per reloaded pod, without watches and
// without Lease renewals (those are time-based, not per pod).
//
// The native comparison: an identical set of N Deployments, not opted in, each rolled by the
// Deployment controller after a `kubectl.kubernetes.io/restartedAt` pod-template patch (as `kubectl
// rollout restart` writes it), the patches sent with the same number in flight and timed the same way.
import { type Counts, diff, total } from '../api-proxy.ts';
import { forEachBounded } from '../bounded.ts';
import type { Context } from '../context.ts';
import { changeConfig, quiet, sleep, until } from '../context.ts';
import { workload } from '../fixture.ts';
import { replacedAndReady } from '../replaced.ts';

export interface BulkRun {
  deployments: number;
  seconds: number;
  pods_replaced: number;
  api_requests: number;
  api_requests_per_pod: number;
  api_requests_by_verb: Counts;
}

export interface BulkNativeRun {
  deployments: number;
  seconds: number;
  /** From the first patch accepted to the last one accepted. */
  triggers_s: number;
}

export const perPodRequest = (key: string) => !key.startsWith('watch ') && !key.endsWith(' leases');

/** Pod uids of the workloads now (the old pods, before the trigger). */
export function podsNow(ctx: Context, ws: readonly { namespace: string; name: string }[]): Set<string> {
  const old = new Set<string>();
  for (const w of ws) for (const p of ctx.pods.live(w.namespace, w.name)) old.add(p.uid);
  return old;
}

/** Waits until `done` holds for every workload; resolves with when it did (epoch ms). */
export async function allDone<W>(ctx: Context, what: string, ws: readonly W[], done: (w: W) => boolean) {
  let lastProgress = Date.now();
  return until(`${ws.length} Deployments ${what}`, 60 * 60_000, () => {
    const finished = ws.filter(done).length;
    if (Date.now() - lastProgress > 10_000) {
      lastProgress = Date.now();
      ctx.say(`${finished}/${ws.length} Deployments ${what}`);
    }
    return finished === ws.length ? Date.now() : undefined;
  });
}

export async function bulk(ctx: Context, indices: number[]): Promise<BulkRun> {
  const { scale: s, names: n } = ctx;
  const ws = indices.map((i) => workload(n, s, i));
  await quiet(ctx, 2000);
  const old = podsNow(ctx, ws);
  const before = await ctx.proxy.counts();
  let first = Number.POSITIVE_INFINITY;
  for (const w of ws) ctx.reloads.expect(w.namespace, w.name);
  const sentAt = Date.now();
  await forEachBounded(ws, s.inFlight, async (w) => {
    first = Math.min(first, await changeConfig(ctx, w.envFrom));
  });
  const end = await allDone(ctx, 'reloaded', ws, (w) => {
    const reloaded = ctx.reloads
      .of(w.namespace, w.name)
      .some((r) => r.startedAt >= sentAt && r.completedAt !== undefined);
    return reloaded && replacedAndReady(ctx.pods.live(w.namespace, w.name), old, s.replicas);
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

/** The native rolling update of `indices` (Deployments not opted in), all triggered at once. */
export async function bulkNative(ctx: Context, indices: number[]): Promise<BulkNativeRun> {
  const { scale: s, names: n } = ctx;
  const ws = indices.map((i) => workload(n, s, i));
  // Nothing of ours or of an earlier run still moving, as before our runs.
  await quiet(ctx, 2000);
  await allDone(
    ctx,
    'settled before the native run',
    ws,
    (w) =>
      ctx.pods.live(w.namespace, w.name).every((p) => p.ready) &&
      ctx.pods.live(w.namespace, w.name).length === s.replicas,
  );
  const old = podsNow(ctx, ws);
  let first = Number.POSITIVE_INFINITY;
  let last = 0;
  const restartedAt = new Date().toISOString();
  await forEachBounded(ws, s.inFlight, async (w) => {
    await ctx.kube.apps.patchNamespacedDeployment({
      name: w.name,
      namespace: w.namespace,
      body: [
        {
          op: 'add',
          path: '/spec/template/metadata/annotations',
          value: { 'kubectl.kubernetes.io/restartedAt': restartedAt },
        },
      ],
    });
    const at = Date.now();
    first = Math.min(first, at);
    last = Math.max(last, at);
  });
  const end = await allDone(ctx, 'rolled out (native)', ws, (w) =>
    replacedAndReady(ctx.pods.live(w.namespace, w.name), old, s.replicas),
  );
  const run: BulkNativeRun = {
    deployments: ws.length,
    seconds: (end - first) / 1000,
    triggers_s: (last - first) / 1000,
  };
  ctx.say(`bulk native: ${ws.length} Deployments in ${run.seconds.toFixed(1)}s`);
  return run;
}
