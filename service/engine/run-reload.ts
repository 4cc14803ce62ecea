// Runs one reload action that the reconciler decided to run, and says how it ended (an Outcome). It
// writes the pending entry, runs the strategy through the StrategiesPort under the reload's deadline,
// records the result, and reports it (log, Event, metrics). It sets no retry or hold timer and
// re-enters nothing: the reconciler turns the outcome into a timer (docs/adr/0020).

import { realTimers } from '../core/batcher.ts';
import { namespaceKey, setDigest } from '../core/config-hash.ts';
import { firstSeenRecord, verdict } from '../core/plan.ts';
import { ProgressDeadline } from '../core/progress-deadline.ts';
import { type CutReason, type Outcome, type ReloadAction, retryDelayMs } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import type { ReconcilerDeps } from './deps.ts';
import { inWaves } from './progressive.ts';
import type { Recorder } from './recorder.ts';
import { display, emitOn, fields } from './report.ts';
import type { ExecResult, RunWait } from './strategies-port.ts';

export interface RunContext {
  d: ReconcilerDeps;
  recorder: Recorder;
  /** Aborts when the reconciler stops or its term ends. */
  signal: AbortSignal;
  /** Consecutive failed attempts of this workload's reload so far. */
  failures: number;
  /** Told the pods the run snapshotted, as soon as it has (the surge sweep spares a running reload's pods). */
  onBegin?(): void;
  /** Aborts with a CutReason when the engine stops this reload early (progressive reloads). */
  cut?: AbortSignal;
  /** Told when the run waits for a restart-budget slot or a PodDisruptionBudget, and when no longer (the status). */
  onWait?(why: RunWait, waiting: boolean): void;
}

export async function runReload(c: RunContext, t: TrackedWorkload, a: ReloadAction): Promise<Outcome> {
  const { d, recorder } = c;
  const { ledger, log, cfg } = d;
  const now = () => (d.timers ?? realTimers).now();
  const strategy = t.parsed.policy.strategy;
  const changed = a.changed.map(display);
  const f = { ...fields(t), strategy, configs: changed };
  const event = emitOn(d.events);
  // Planned against an older record: a reload that completed since applied everything this one would
  // (without --reload-on-delete a deletion alone is no change, and is not recorded either).
  if (verdict(a.target, ledger.get(t.id)?.configs, { reloadOnDelete: cfg.reloadOnDelete }).kind === 'none') {
    log.info(
      { ...fields(t), configs: a.changed.map(display), changeRV: a.changeRV },
      'reload not needed: a completed reload applied this content',
    );
    return { kind: 'dropped', reason: 'already applied' };
  }
  // Never into an outage: a replaced pod could not start while a config it needs is missing.
  const missing = await missingNeeded(c, t);
  if (missing.length > 0) return { kind: 'config-missing', action: a, missing };
  const metric = d.metrics?.reloadStarted(strategy, t.rec.ref.kind, t.rec.ref.namespace);
  if (!a.resumed) {
    const seconds = Math.max(0, now() - a.cutoffMs) / 1000;
    d.metrics?.eventToAction(seconds);
    d.metrics?.reloader.actionLatency(t.rec.ref.kind, seconds);
  }
  if (cfg.dryRun) {
    metric?.finish('skipped');
    d.metrics?.reloader.skipped('dry_run');
    log.info(
      { ...f, changeRV: a.changeRV, cutoff: new Date(a.cutoffMs).toISOString() },
      'dry-run: would reload',
    );
    await event(t, 'ReloadPlanned', `dry run: would ${strategy} because ${changed.join(', ')} changed`);
    await recorder.done(a);
    return { kind: 'done' };
  }
  const previous = ledger.get(t.id);
  const cutoff = new Date(a.cutoffMs).toISOString();
  const startedAt = new Date(now()).toISOString();
  // The strategy calls begin() before its first write: the pending entry then names the pods it
  // replaces, at no extra request. A retry after a failure replaces the same pods.
  let targets = a.targets;
  const begin = async (snapshot?: readonly string[]) => {
    targets = snapshot;
    await ledger.put(t.id, {
      configs: previous?.configs ?? firstSeenRecord(a.target, a.changed),
      pending: {
        cutoff,
        target: a.target,
        changed: a.changed,
        startedAt,
        ...(snapshot ? { targets: [...snapshot] } : {}),
      },
      ...(previous?.reloadedAt ? { reloadedAt: previous.reloadedAt } : {}),
    });
  };
  log.info({ ...f, changeRV: a.changeRV, cutoff, resumed: a.resumed ?? false }, 'reload started');
  // The reload's own deadline: when it made no progress for --reload-deadline, the slot is given back
  // and the reload re-queued. Progress (a pod evicted, a surge pod created) starts the period again,
  // so a slow restart that keeps moving is never cut (docs/adr/0028).
  const deadline = new AbortController();
  const progress = new ProgressDeadline(d.timers ?? realTimers, cfg.reloadDeadlineMs, () =>
    deadline.abort(new Error(`the reload made no progress for ${cfg.reloadDeadlineMs / 1000}s`)),
  );
  const signal = AbortSignal.any([c.signal, deadline.signal, ...(c.cut ? [c.cut] : [])]);
  let r: Exclude<ExecResult, { kind: 'done' | 'unsupported' }>;
  try {
    const res = await d.strategies.run({
      workload: t,
      action: a,
      strategy,
      changed,
      // Keyed per namespace, as the checksum plugin keys it (ADR 0010).
      configHash: setDigest(a.target, namespaceKey(d.hashKey, t.rec.ref.namespace)),
      begin,
      signal,
      term: c.signal,
      stallAfterMs: cfg.stallAfterMs,
      ...(cfg.progressive && inWaves(t) ? { canary: true } : {}),
      onStall: (why) => {
        metric?.stalled();
        d.metrics?.reloadStall('blocked');
        log.warn({ ...f, why }, 'reload stalled');
        void event(
          t,
          'ReloadStalled',
          `reload blocked for over ${cfg.stallAfterMs / 1000}s: ${why}`,
          'Warning',
        );
      },
      onProgress: () => progress.progress(),
      ...(c.onWait ? { onWait: c.onWait } : {}),
      log,
    });
    if (res.kind === 'done') {
      await recorder.done(a, new Date(now()).toISOString());
      if (res.notNeeded) {
        metric?.finish('not-needed');
        log.info({ ...f, replaced: 0, notNeeded: true }, 'reload complete');
        await event(t, 'ReloadNotNeeded', `${changed.join(', ')} changed; ${res.summary}`);
        return { kind: 'done' };
      }
      metric?.finish('success', res.replaced);
      log.info({ ...f, replaced: res.replaced }, 'reload complete');
      // The cutoff is what decided only when no snapshot of pods did (ADR 0008); a CronJob or Job
      // reload runs a new Job and has no pods to judge by it.
      const batch = t.rec.ref.kind === 'CronJob' || t.rec.ref.kind === 'Job';
      const notifies = d.strategies.notifies;
      const rule = targets || notifies || batch ? '' : ` (cutoff ${cutoff})`;
      // The sync (Argo CD Application, Flux Kustomization or HelmRelease) whose end released it.
      const via = a.via
        ? ` (after sync of ${a.via.app}${a.via.revision ? ` at ${a.via.revision}` : ''})`
        : '';
      await event(
        res.uid ? { ...t, rec: { ...t.rec, ref: { ...t.rec.ref, uid: res.uid } } } : t,
        notifies ? 'ReloadNotified' : 'Reloaded',
        `${changed.join(', ')} changed${via}; ${res.summary}${rule}`,
      );
      // Reloader alerts when it has updated the workload; --webhook-url's notice is not a reload.
      if (!notifies) alert(d, t, a, 'reloaded');
      return { kind: 'done' };
    }
    if (res.kind === 'unsupported') {
      // Cut by the term or the deadline, it ends as they do (below).
      if (signal.aborted) throw new Error(res.why);
      metric?.finish('skipped');
      d.metrics?.reloader.skipped('unsupported');
      await recorder.done(a);
      log.info({ ...f, why: res.why, changeRV: a.changeRV }, 'reload skipped');
      await event(t, 'ReloadSkipped', `${changed.join(', ')} changed; ${res.why}`);
      return { kind: 'done' };
    }
    r = res;
  } catch (err) {
    // The ledger write (or the Event) failed: like a failed strategy, retried from the same pods.
    r = {
      kind: 'failed',
      error: err instanceof Error ? err : new Error(String(err)),
      errorKind: 'update_workload',
    };
  } finally {
    progress.stop();
  }
  if (c.signal.aborted) {
    metric?.finish('interrupted');
    log.info(f, 'reload interrupted; the pending action stays in the ledger');
    return { kind: 'interrupted' };
  }
  if (c.cut?.aborted) {
    metric?.finish('interrupted');
    return cutShort(c, t, a, c.cut.reason as CutReason, f, targets);
  }
  if (deadline.signal.aborted) {
    // Not a failure of the workload's config: something (a PDB, a rollout that never gets Ready)
    // blocks it. Give the slot back, say so every time, and try again later from the same pods.
    metric?.finish('interrupted');
    d.metrics?.reloadStall('deadline');
    const n = c.failures + 1;
    const retryMs = retryDelayMs(n);
    log.warn(
      { ...f, attempt: n, deadlineMs: cfg.reloadDeadlineMs, retryInMs: retryMs },
      'reload deadline passed; slot released, re-queued',
    );
    await event(
      t,
      'ReloadStalled',
      `attempt ${n} made no progress for ${cfg.reloadDeadlineMs / 1000}s; released its slot, retrying in ${retryMs / 1000}s`,
      'Warning',
    );
    return {
      kind: 'retry',
      action: a,
      afterMs: retryMs,
      failed: true,
      stalled: true,
      ...(targets ? { targets } : {}),
    };
  }
  if (r.kind === 'waiting') {
    // Not a failure, and nothing was written: the ledger still holds the old digests, so a restarted
    // service finds the change again; this one tries again after a while.
    metric?.finish('skipped');
    log.info({ ...f, why: r.why, retryInMs: r.retryMs }, 'reload waiting');
    await event(t, 'ReloadDeferred', `${changed.join(', ')} changed; ${r.why}`);
    return { kind: 'retry', action: a, afterMs: r.retryMs, failed: false, waiting: true };
  }
  metric?.finish('failure');
  d.metrics?.reloader.error(r.errorKind);
  d.metrics?.reloader.retry();
  const retryMs = retryDelayMs(c.failures + 1);
  log.error({ ...f, err: r.error.message, retryInMs: retryMs }, 'reload failed');
  // One alert per run of failures: the retries that follow would repeat it every backoff.
  if (c.failures === 0) alert(d, t, a, 'failed', r.error.message);
  await event(t, 'ReloadFailed', `${r.error.message}; retrying in ${retryMs / 1000}s`, 'Warning');
  return { kind: 'retry', action: a, afterMs: retryMs, failed: true, ...(targets ? { targets } : {}) };
}

/** Tells the chat alerts (if any) how a reload ended; queued, never awaited. */
function alert(
  d: RunContext['d'],
  t: TrackedWorkload,
  a: ReloadAction,
  outcome: 'reloaded' | 'failed',
  error?: string,
): void {
  const { kind, namespace, name } = t.rec.ref;
  d.alerts?.notify({
    outcome,
    workload: { kind, namespace, name },
    changed: a.changed,
    ...(error !== undefined ? { error } : {}),
  });
}

/**
 * The engine stopped the reload early: its surge pods (never Ready, or of content no longer current)
 * are removed first, so that the next reload of the workload starts clean. A halted one is retried,
 * and the halt then holds it (a resume continues it); a superseded one is dropped: the newer change's
 * reload replaces every pod created before its own cutoff, those this one made included.
 */
async function cutShort(
  c: RunContext,
  t: TrackedWorkload,
  a: ReloadAction,
  why: CutReason,
  f: Record<string, unknown>,
  targets: readonly string[] | undefined,
): Promise<Outcome> {
  await c.d.strategies
    .dropSurgePods(t, c.signal)
    .catch((err: Error) => c.d.log.warn({ ...f, err: err.message }, 'could not remove surge pods'));
  if (why.kind === 'superseded') {
    c.d.log.info(
      { ...f, config: display(why.config) },
      'reload stopped: a newer change of its config supersedes it; slot released',
    );
    return { kind: 'dropped', reason: `superseded by a newer change of ${display(why.config)}` };
  }
  c.d.log.warn({ ...f, why: why.why }, 'reload stopped: its change was halted; slot released');
  return { kind: 'retry', action: a, afterMs: 1_000, failed: false, ...(targets ? { targets } : {}) };
}

/** The configs the pods need that are missing; none when that cannot be told (the reload goes on). */
async function missingNeeded(c: RunContext, t: TrackedWorkload): Promise<string[]> {
  try {
    return await c.d.strategies.missingNeeded(t, c.signal);
  } catch (err) {
    c.d.log.warn(
      { ...fields(t), err: (err as Error).message },
      'could not tell whether the configs the pods need exist; reloading',
    );
    return [];
  }
}
