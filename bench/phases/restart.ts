// Restart duration, per Deployment shape: our reload of a Deployment against the native rolling
// update of an identical Deployment (a pod-template annotation patch, as `kubectl rollout restart`
// does), alternately first, in the same run. Each is timed from the API server accepting the trigger
// (config update or template patch) until every pod is new and Ready and the last old pod is going,
// taken from the pod watch's timestamps. The shapes are issue 15's: 25 %/25 % and 1/0 with 10
// replicas, and a single replica with the default strategy.

import { pending, waitFor } from '../../test/support/wait-for.ts';
import type { Context } from '../context.ts';
import { changeConfig, quiet, until } from '../context.ts';
import type { RestartShape } from '../fixture.ts';
import type { PodRecord } from '../pods.ts';
import { oursFirst } from '../ratio.ts';
import { round } from '../stats.ts';

export interface RestartPair {
  ours_s: number;
  native_s: number;
  ratio: number;
  /** Ours from its first action (eviction or surge pod) instead of from the change. */
  ours_from_first_action_s: number;
  /** Which went first in this pair. */
  first: 'ours' | 'native';
}

export interface RestartShapeResult {
  shape: string;
  replicas: number;
  strategy: string;
  pairs: RestartPair[];
}

/** The Deployment controller is done with the previous rollout, status included. */
async function rolledOut(ctx: Context, app: string, want: number): Promise<void> {
  await waitFor(
    async () => {
      const d = await ctx.kube.apps.readNamespacedDeployment({ name: app, namespace: ctx.names.extra });
      const st = d.status;
      const done =
        (st?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0) &&
        st?.replicas === want &&
        st?.updatedReplicas === want &&
        st?.availableReplicas === want;
      return done ? true : pending(st);
    },
    { describe: `${app} fully rolled out`, timeout: 5 * 60_000, interval: 200 },
  );
}

async function timeReplacement(ctx: Context, app: string, replicas: number, trigger: () => Promise<number>) {
  await rolledOut(ctx, app, replicas);
  const namespace = ctx.names.extra;
  const old = new Set(ctx.pods.live(namespace, app).map((p) => p.uid));
  if (old.size !== replicas) throw new Error(`${app} has ${old.size} live pods, expected ${replicas}`);
  const t0 = await trigger();
  const pods = await until(`every pod of ${app} replaced and Ready`, 10 * 60_000, () => {
    const live = ctx.pods.live(namespace, app).filter((p) => !p.surge);
    const oldLeft = ctx.pods.live(namespace, app).some((p) => old.has(p.uid));
    return !oldLeft && live.length === replicas && live.every((p) => p.ready) ? live : undefined;
  });
  const all = ctx.pods.ofApp(namespace, app);
  const lastOldGoing = Math.max(...all.filter((p) => old.has(p.uid)).map((p) => p.deletingAt ?? 0));
  const lastReady = Math.max(...pods.map((p: PodRecord) => p.readyAt ?? 0));
  const firstAction = Math.min(
    ...all.filter((p) => old.has(p.uid) && p.deletingAt !== undefined).map((p) => p.deletingAt as number),
    ...all.filter((p) => p.createdAsSurge && p.firstSeenAt >= t0).map((p) => p.firstSeenAt),
  );
  return {
    seconds: (Math.max(lastOldGoing, lastReady) - t0) / 1000,
    fromFirstAction: (Math.max(lastOldGoing, lastReady) - firstAction) / 1000,
  };
}

async function pairsOf(ctx: Context, shape: RestartShape): Promise<RestartPair[]> {
  const n = ctx.names;
  const pairs: RestartPair[] = [];
  const ours = async () => {
    ctx.reloads.expect(n.extra, shape.ours);
    const r = await timeReplacement(ctx, shape.ours, shape.replicas, () =>
      changeConfig(ctx, { kind: 'ConfigMap', namespace: n.extra, name: shape.config }),
    );
    await quiet(ctx, 1000);
    return r;
  };
  const native = async () =>
    timeReplacement(ctx, shape.native, shape.replicas, async () => {
      await ctx.kube.apps.patchNamespacedDeployment({
        name: shape.native,
        namespace: n.extra,
        body: [
          {
            op: 'add',
            path: '/spec/template/metadata/annotations',
            value: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() },
          },
        ],
      });
      return Date.now();
    });
  const settle = async (app: string) =>
    until(`old pods of ${app} gone`, 5 * 60_000, () =>
      ctx.pods.ofApp(n.extra, app).every((p) => p.deletingAt === undefined || p.goneAt !== undefined)
        ? true
        : undefined,
    );
  for (let k = 0; k < ctx.scale.restartPairs; k++) {
    let o: Awaited<ReturnType<typeof ours>>;
    let v: Awaited<ReturnType<typeof native>>;
    if (oursFirst(k)) {
      o = await ours();
      await settle(shape.ours);
      v = await native();
      await settle(shape.native);
    } else {
      v = await native();
      await settle(shape.native);
      o = await ours();
      await settle(shape.ours);
    }
    const pair: RestartPair = {
      ours_s: o.seconds,
      native_s: v.seconds,
      ratio: round(o.seconds / v.seconds, 3),
      ours_from_first_action_s: o.fromFirstAction,
      first: oursFirst(k) ? 'ours' : 'native',
    };
    pairs.push(pair);
    ctx.say(
      `restart ${shape.key} ${k + 1}: ours ${o.seconds.toFixed(2)}s (${o.fromFirstAction.toFixed(2)}s from its first action), native ${v.seconds.toFixed(2)}s, ratio ${pair.ratio.toFixed(2)}`,
    );
  }
  return pairs;
}

/** `restartPairs` pairs of one shape. */
export async function restart(ctx: Context, shape: RestartShape): Promise<RestartShapeResult> {
  return {
    shape: shape.key,
    replicas: shape.replicas,
    strategy: shape.rollingUpdate
      ? `RollingUpdate maxSurge=${shape.rollingUpdate.maxSurge} maxUnavailable=${shape.rollingUpdate.maxUnavailable}`
      : 'default (RollingUpdate 25%/25%)',
    pairs: await pairsOf(ctx, shape),
  };
}
