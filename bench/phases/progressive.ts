// Progressive reloads (issue 24, docs/progressive-reloads.md): `progressiveDeployments` Deployments (100 at
// small and full) of `replicas` pods each read ONE ConfigMap. Their pods read it at start, as an app
// does: pods admitted while its key `health` is `bad` never become Ready (a MutatingAdmissionPolicy
// and kwok's pod-unready stage, test/support/app-health.ts). Three changes, in this order:
//  1. a good change (a new good value) under a service WITHOUT --progressive-reloads: the seconds from
//     the write until every pod is replaced and Ready (`good_change_bulk_off_s`);
//  2. the same under a service WITH it (`good_change_bulk_s`): the gate's cost, against the first
//     wave's settle time (issue 24's target; reported, not asserted);
//  3. a bad change under the progressive service: the old pods replaced, in all Deployments, until
//     the ReloadHalted Event on the ConfigMap (`bad_change_pods_replaced`, exact: the expected value
//     comes from the Deployments as stored and the first wave), the Deployments touched (exact: the
//     first wave's), the surge pods created, the time to the halt. Last, since a halted change
//     would stay in the ledger for whatever came after.
// The Deployments, their namespace's policy and their kwok nodes are the phase's own, created here, so
// a run that skips the phase pays nothing for it. The bad change alone (`progressive-good` skipped)
// is what CI can afford.

import { readsConfigAtStart } from '../../test/support/app-health.ts';
import { pending, waitFor } from '../../test/support/wait-for.ts';
import { forEachBounded } from '../bounded.ts';
import { createNodes, nodesFor } from '../cluster.ts';
import type { Context } from '../context.ts';
import { quiet, startService, until } from '../context.ts';
import {
  PROGRESSIVE_CONFIG,
  PROGRESSIVE_KEY,
  progressiveDeployment,
  progressiveName,
  RUN_POD_LABEL,
} from '../fixture.ts';
import { expectedReplacedBeforeHalt, firstWave, type WaveMember, waveSizes } from '../progressive.ts';
import { replacedAndReady } from '../replaced.ts';
import type { ServiceProcess } from '../service.ts';
import { round } from '../stats.ts';
import { allDone, podsNow } from './bulk.ts';

/** The service's settings for the phase (reported with the figures). */
export const PROGRESSIVE_SETTINGS = {
  first_wave: 1,
  settle_s: 5,
  reload_deadline_s: 10,
  /** Service defaults, not set by the phase. */
  gather_s: 0.5,
  debounce_s: 3,
};

const BAD = 'bad';
const HALT_LOG = 'progressive reload halted: nothing more starts for this change';

export interface GoodChange {
  progressive: boolean;
  /** From the write accepted until every pod of every Deployment is new and Ready and its reload complete. */
  seconds: number;
  /** From the write to the first and the last 'reload started' of the change. */
  first_reload_started_s: number;
  last_reload_started_s: number;
  pods_replaced: number;
  reloads: number;
}

export interface BadChange {
  /** From the write accepted until the bench saw the ReloadHalted Event on the ConfigMap. */
  time_to_halt_s: number;
  /** The same to the service's halt log line. */
  time_to_halt_log_s: number | null;
  /** Old pods (running before the write) with a deletionTimestamp at the halt, in every Deployment. */
  old_pods_replaced: number;
  /** The same derived from the set-up: the first wave's Deployments, each stopping at its floor. */
  expected_old_pods_replaced: number;
  /** Old pods replaced once the halt's clean-up is over (its surge pods gone): nothing more. */
  old_pods_replaced_after_cleanup: number;
  surge_pods_created: number;
  /** Pods the ReplicaSets created meanwhile (evictions' replacements); never Ready. */
  other_new_pods: number;
  /** Deployments that had any pod created or deleted since the write, until the halt's clean-up ended. */
  deployments_touched: number;
  /**
   * The first wave: the only Deployments a bad change may touch. Without the gate every Deployment
   * would be (with maxUnavailable 0 they would lose no old pod either, but all would get surge pods).
   */
  first_wave: string[];
  /** Seconds from the halt until no surge pod was left. */
  surge_removed_s: number | null;
  halt_event: string;
}

export interface ProgressiveResult {
  deployments: number;
  replicas: number;
  settings: typeof PROGRESSIVE_SETTINGS;
  strategy: string;
  /** The waves of a change of every Deployment. */
  wave_sizes: number[];
  fleet_s: number;
  good_off: GoodChange | null;
  good_on: GoodChange | null;
  bad: BadChange;
}

export interface ProgressiveOptions {
  /** Measure the two good changes (timings) as well as the bad one. */
  good: boolean;
  /** Stops a service the phase started, recording its exit code (run.ts's stopService). */
  stop(label: string, svc: ServiceProcess): Promise<void>;
}

type Member = { namespace: string; name: string };

/** Writes the shared ConfigMap's key; resolves with when the API server accepted it (epoch ms). */
async function setHealth(ctx: Context, value: string): Promise<number> {
  await ctx.kube.core.patchNamespacedConfigMap({
    name: PROGRESSIVE_CONFIG,
    namespace: ctx.names.progressive,
    body: [{ op: 'add', path: `/data/${PROGRESSIVE_KEY}`, value }],
  });
  return Date.now();
}

async function startProgressiveService(ctx: Context, progressive: boolean): Promise<ServiceProcess> {
  const p = PROGRESSIVE_SETTINGS;
  const svc = await startService(ctx, {
    label: progressive ? 'progressive' : 'progressive-off',
    proxied: false,
    flags: [
      `--reload-deadline=${p.reload_deadline_s}s`,
      ...(progressive
        ? [
            '--progressive-reloads',
            `--progressive-first-wave=${p.first_wave}`,
            `--progressive-settle=${p.settle_s}s`,
          ]
        : ['--progressive-reloads=false']),
    ],
  });
  await svc.waitReady(15 * 60_000);
  await svc.waitActing(15 * 60_000);
  return svc;
}

/** Creates the ConfigMap, the policy, the kwok nodes and the Deployments; waits until all pods are Ready. */
async function fleet(ctx: Context) {
  const { kube, scale: s, names: n } = ctx;
  const namespace = n.progressive;
  await createNodes(kube, n.run, nodesFor(s.progressiveDeployments * s.replicas), 'p-node');
  await kube.core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: PROGRESSIVE_CONFIG }, data: { [PROGRESSIVE_KEY]: 'good-0' } },
  });
  const health = await readsConfigAtStart(kube, namespace, {
    config: PROGRESSIVE_CONFIG,
    key: PROGRESSIVE_KEY,
    bad: BAD,
    podLabel: { key: RUN_POD_LABEL, value: n.run },
  });
  const indices = Array.from({ length: s.progressiveDeployments }, (_, i) => i);
  await forEachBounded(indices, s.inFlight, async (i) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: progressiveDeployment(n, s, i) });
  });
  const ws: Member[] = indices.map((i) => ({ namespace, name: progressiveName(i) }));
  await allDone(ctx, 'Ready (progressive fleet)', ws, (w) => {
    const live = ctx.pods.live(w.namespace, w.name);
    return live.length === s.replicas && live.every((p) => p.ready);
  });
  // What the first wave is made of, as the API server stored it (strategy defaults filled in).
  const stored = await kube.apps.listNamespacedDeployment({ namespace });
  const members: WaveMember[] = stored.items.map((d) => ({
    namespace,
    name: d.metadata?.name as string,
    priority: Number(d.metadata?.annotations?.['gitops-reloader.io/reload-priority'] ?? 0),
    replicas: d.spec?.replicas ?? 1,
    maxSurge: d.spec?.strategy?.rollingUpdate?.maxSurge,
    maxUnavailable: d.spec?.strategy?.rollingUpdate?.maxUnavailable,
  }));
  const ru = stored.items[0]?.spec?.strategy?.rollingUpdate;
  const strategy = `${stored.items[0]?.spec?.strategy?.type} maxSurge=${ru?.maxSurge} maxUnavailable=${ru?.maxUnavailable}`;
  return { health, ws, members, strategy };
}

async function goodChange(ctx: Context, ws: Member[], progressive: boolean): Promise<GoodChange> {
  const s = ctx.scale;
  await quiet(ctx, 2000);
  const old = podsNow(ctx, ws);
  const sentAt = Date.now();
  const t0 = await setHealth(ctx, `good-${sentAt}`);
  const since = (w: Member) => ctx.reloads.of(w.namespace, w.name).filter((r) => r.startedAt >= sentAt);
  const end = await allDone(
    ctx,
    `reloaded (good change, progressive ${progressive ? 'on' : 'off'})`,
    ws,
    (w) => {
      const done = since(w).some((r) => r.completedAt !== undefined);
      return done && replacedAndReady(ctx.pods.live(w.namespace, w.name), old, s.replicas);
    },
  );
  const windows = ws.flatMap(since);
  const starts = windows.map((r) => r.startedAt);
  const run: GoodChange = {
    progressive,
    seconds: round((end - t0) / 1000, 2),
    first_reload_started_s: round((Math.min(...starts) - t0) / 1000, 2),
    last_reload_started_s: round((Math.max(...starts) - t0) / 1000, 2),
    pods_replaced: windows.reduce((a, r) => a + (r.replaced ?? 0), 0),
    reloads: windows.length,
  };
  ctx.say(
    `progressive ${progressive ? 'on' : 'off'}: a good change of ${ws.length} Deployments in ${run.seconds}s (reloads started ${run.first_reload_started_s}s to ${run.last_reload_started_s}s after the write)`,
  );
  return run;
}

/** Polls for the ReloadHalted Event on the ConfigMap; resolves with when the bench saw it. */
async function haltEvent(ctx: Context, timeoutMs: number): Promise<{ at: number; message: string }> {
  return waitFor(
    async () => {
      const list = await ctx.kube.core.listNamespacedEvent({
        namespace: ctx.names.progressive,
        fieldSelector: `involvedObject.kind=ConfigMap,involvedObject.name=${PROGRESSIVE_CONFIG},reason=ReloadHalted`,
      });
      const e = list.items[0];
      return e
        ? { at: Date.now(), message: e.message ?? '' }
        : pending('no ReloadHalted Event on the ConfigMap');
    },
    { describe: `the ReloadHalted Event on ${PROGRESSIVE_CONFIG}`, timeout: timeoutMs, interval: 200 },
  );
}

async function badChange(
  ctx: Context,
  svc: ServiceProcess,
  ws: Member[],
  members: WaveMember[],
): Promise<BadChange> {
  const p = PROGRESSIVE_SETTINGS;
  await quiet(ctx, 2000);
  const old = podsNow(ctx, ws);
  const from = svc.logs.length;
  const t0 = await setHealth(ctx, BAD);
  // Debounce, gather, then a first wave that makes no progress for the reload deadline.
  const halt = await haltEvent(ctx, 120_000 + 2 * (p.debounce_s + p.gather_s + p.reload_deadline_s) * 1000);
  const haltLog = svc.logs.slice(from).find((l) => l.msg === HALT_LOG);
  const pods = ws.flatMap((w) => ctx.pods.ofApp(w.namespace, w.name));
  const oldReplaced = (by: number) =>
    pods.filter((x) => old.has(x.uid) && x.deletingAt !== undefined && x.deletingAt <= by).length;
  const atHalt = oldReplaced(halt.at);
  const created = pods.filter((x) => !old.has(x.uid) && x.firstSeenAt >= t0 && x.firstSeenAt <= halt.at);
  // The halt removes the failing workload's surge pods; then nothing more happens for the change.
  let surgeRemovedS: number | null = null;
  try {
    const gone = await until('no surge pod left after the halt', 60_000, () =>
      ws.every((w) => ctx.pods.live(w.namespace, w.name).every((x) => !x.surge)) ? Date.now() : undefined,
    );
    surgeRemovedS = round((gone - halt.at) / 1000, 2);
  } catch (err) {
    ctx.say(`progressive: ${(err as Error).message}`);
  }
  const touched = ws.filter((w) =>
    ctx.pods
      .ofApp(w.namespace, w.name)
      .some((x) => (x.deletingAt ?? 0) >= t0 || (!old.has(x.uid) && x.firstSeenAt >= t0)),
  );
  const bad: BadChange = {
    time_to_halt_s: round((halt.at - t0) / 1000, 2),
    time_to_halt_log_s: haltLog ? round((haltLog.seenAt - t0) / 1000, 2) : null,
    old_pods_replaced: atHalt,
    expected_old_pods_replaced: expectedReplacedBeforeHalt(members, p.first_wave),
    old_pods_replaced_after_cleanup: oldReplaced(Date.now()),
    surge_pods_created: created.filter((x) => x.createdAsSurge).length,
    other_new_pods: created.filter((x) => !x.createdAsSurge).length,
    deployments_touched: touched.length,
    first_wave: firstWave(members, p.first_wave).map((m) => m.name),
    surge_removed_s: surgeRemovedS,
    halt_event: halt.message,
  };
  ctx.say(
    `progressive: a bad change halted after ${bad.time_to_halt_s}s; ${atHalt} old pods replaced (expected ${bad.expected_old_pods_replaced}), ${bad.surge_pods_created} surge pods, ${bad.deployments_touched} Deployments touched`,
  );
  return bad;
}

export async function progressive(ctx: Context, o: ProgressiveOptions): Promise<ProgressiveResult> {
  const t0 = Date.now();
  const f = await fleet(ctx);
  try {
    const fleetS = round((Date.now() - t0) / 1000, 1);
    ctx.say(`progressive: ${f.ws.length} Deployments sharing ${PROGRESSIVE_CONFIG} Ready in ${fleetS}s`);
    for (const w of f.ws) ctx.reloads.expect(w.namespace, w.name);
    let goodOff: GoodChange | null = null;
    if (o.good) {
      const off = await startProgressiveService(ctx, false);
      goodOff = await goodChange(ctx, f.ws, false);
      await o.stop('progressive-off-service', off);
    }
    const svc = await startProgressiveService(ctx, true);
    const goodOn = o.good ? await goodChange(ctx, f.ws, true) : null;
    const bad = await badChange(ctx, svc, f.ws, f.members);
    await o.stop('progressive-service', svc);
    return {
      deployments: f.ws.length,
      replicas: ctx.scale.replicas,
      settings: PROGRESSIVE_SETTINGS,
      strategy: f.strategy,
      wave_sizes: waveSizes(f.ws.length, PROGRESSIVE_SETTINGS.first_wave),
      fleet_s: fleetS,
      good_off: goodOff,
      good_on: goodOn,
      bad,
    };
  } finally {
    await f.health.remove();
  }
}
