// Restart duration: our reload of a Deployment of `restartReplicas` replicas against the native
// rolling update of an identical Deployment (a pod-template annotation patch, as `kubectl rollout
// restart` does), alternately first, in the same run. Each is timed from the API server accepting the
// trigger (config update or template patch) until every pod is new and Ready and the last old pod is
// going, taken from the pod watch's timestamps.

import { pending, waitFor } from '../../test/support/wait-for.ts';
import type { Context } from '../context.ts';
import { changeConfig, quiet, until } from '../context.ts';
import { RESTART_CONFIG, RESTART_NATIVE, RESTART_OURS } from '../fixture.ts';
import type { PodRecord } from '../pods.ts';

export interface RestartPair {
  ours_s: number;
  native_s: number;
  ratio: number;
  /** Ours from its first action (eviction or surge pod) instead of from the change. */
  ours_from_first_action_s: number;
}

/** The Deployment controller is done with the previous rollout, status included. */
async function rolledOut(ctx: Context, app: string): Promise<void> {
  const want = ctx.scale.restartReplicas;
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

async function timeReplacement(ctx: Context, app: string, trigger: () => Promise<number>) {
  await rolledOut(ctx, app);
  const { namespace } = { namespace: ctx.names.extra };
  const replicas = ctx.scale.restartReplicas;
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
    ...all.filter((p) => p.surge && p.firstSeenAt >= t0).map((p) => p.firstSeenAt),
  );
  return {
    seconds: (Math.max(lastOldGoing, lastReady) - t0) / 1000,
    fromFirstAction: (Math.max(lastOldGoing, lastReady) - firstAction) / 1000,
  };
}

export async function restart(ctx: Context): Promise<RestartPair[]> {
  const n = ctx.names;
  const pairs: RestartPair[] = [];
  const ours = async () => {
    ctx.reloads.expect(n.extra, RESTART_OURS);
    const r = await timeReplacement(ctx, RESTART_OURS, () =>
      changeConfig(ctx, { kind: 'ConfigMap', namespace: n.extra, name: RESTART_CONFIG }),
    );
    await quiet(ctx, 1000);
    return r;
  };
  const native = async () =>
    timeReplacement(ctx, RESTART_NATIVE, async () => {
      await ctx.kube.apps.patchNamespacedDeployment({
        name: RESTART_NATIVE,
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
    if (k % 2 === 0) {
      o = await ours();
      await settle(RESTART_OURS);
      v = await native();
      await settle(RESTART_NATIVE);
    } else {
      v = await native();
      await settle(RESTART_NATIVE);
      o = await ours();
      await settle(RESTART_OURS);
    }
    const pair = {
      ours_s: o.seconds,
      native_s: v.seconds,
      ratio: o.seconds / v.seconds,
      ours_from_first_action_s: o.fromFirstAction,
    };
    pairs.push(pair);
    ctx.say(
      `restart ${k + 1}: ours ${o.seconds.toFixed(2)}s, native ${v.seconds.toFixed(2)}s, ratio ${pair.ratio.toFixed(2)}`,
    );
  }
  return pairs;
}
