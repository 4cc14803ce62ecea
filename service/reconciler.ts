// Turns observations into reload actions and runs them. Config and workload events feed the
// Batcher; each batch is judged against the ledger (watchedSet + verdict); a reload becomes an
// action in the WorkQueue, whose runner writes the pending action to the ledger, runs the
// strategy, records the result, and reports it as an Event.

import type { Config } from './config/config.ts';
import { type AnnotationGlobals, KEYS } from './core/annotations.ts';
import { type Batch, Batcher, type Change, type ChangeGate, changeObservedAt } from './core/batcher.ts';
import { namespaceKey, setDigest } from './core/config-hash.ts';
import { effectiveCutoff } from './core/cutoff.ts';
import type { LedgerEntry } from './core/ledger-entry.ts';
import { heldMessage } from './core/needed-configs.ts';
import { isTracked, REQUEST, verdict, watchedSet } from './core/plan.ts';
import { type ConfigRecord, compareResourceVersions } from './core/records.ts';
import { windowState } from './core/restart-window.ts';
import { configId } from './core/types.ts';
import { WorkQueue } from './core/work-queue.ts';
import type { ClusterAccess } from './kube/access.ts';
import type { AppsApi, BatchApi, CoreApi, CustomApi } from './kube/api.ts';
import { missingNeededConfigs } from './kube/config-presence.ts';
import { apiVersionOf, type EventReason, type EventRecorder } from './kube/events.ts';
import { JobSpecStore } from './kube/job-spec-store.ts';
import type { Ledger } from './kube/ledger.ts';
import { readWorkloadAt } from './kube/read-at.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { ClusterState, TrackedWorkload } from './state.ts';
import type { GitCommitter } from './strategies/git-commit.ts';
import { JobResumer } from './strategies/job-resume.ts';
import {
  type ReloadWebhookOptions,
  redact,
  sendReloadNotice,
  WebhookDeliveryError,
} from './strategies/reload-webhook.ts';
import { runStrategy } from './strategies/run.ts';
import { deleteSurgePodsOf, sweepSurgePods } from './strategies/surge-sweep.ts';
import { templateChangeCheck } from './strategies/template-change.ts';
import { ReloadWaiting, type StrategyResult, StrategyUnsupported } from './strategies/types.ts';

export interface ReloadAction {
  workload: string;
  changed: string[];
  cutoffMs: number;
  target: Record<string, string>;
  /**
   * The newest resourceVersion among the configs in `target` when the action was planned. A pod
   * template changed after it means the template rollout's pods already see the change.
   */
  changeRV: string;
  /** True when resuming a pending action found in the ledger (after a crash or leader change). */
  resumed?: boolean;
  /** The pods a resumed restart replaces: the snapshot its first run recorded. */
  targets?: readonly string[];
  /** The workload's batch window (pause-period), and when its current one ends (see WorkQueue). */
  minIntervalMs?: number;
  notBefore?: number;
}

/** A reload held until a maintenance window opens; re-tried by `timer`. */
interface Held {
  action: ReloadAction;
  opensAt: number;
  timer: ReturnType<typeof setTimeout>;
}

/** Longest a held reload sleeps before looking at its window again (clock jumps, edited windows). */
const HOLD_RECHECK_MS = 3_600_000;

export interface ReconcilerDeps {
  cfg: Config;
  state: ClusterState;
  ledger: Ledger;
  events: EventRecorder;
  log: Logger;
  globals: AnnotationGlobals;
  hashKey: Buffer;
  core: CoreApi;
  apps: AppsApi;
  batch: BatchApi;
  custom: CustomApi;
  kc: ClusterAccess;
  inScope(namespace: string): boolean;
  gate?: ChangeGate;
  metrics?: Metrics;
  /** The git strategy (one GitWriter per process). */
  git?: GitCommitter;
  /** The leadership term this reconciler acts for: nothing it started writes or evicts once it aborts. */
  term?: AbortSignal;
  /** --webhook-url: POST each reload's details there instead of reloading. */
  webhook?: ReloadWebhookOptions;
}

const RETRY_MS = [2_000, 5_000, 15_000, 30_000, 60_000];

function fields(t: TrackedWorkload) {
  return { workload: `${t.rec.ref.kind}/${t.rec.ref.name}`, namespace: t.rec.ref.namespace };
}

export class Reconciler {
  readonly #d: ReconcilerDeps;
  readonly #batcher: Batcher;
  readonly #queue: WorkQueue<ReloadAction>;
  readonly #abort = new AbortController();
  /** Aborts when this reconciler stops or its leadership term ends, whichever comes first. */
  readonly #signal: AbortSignal;
  readonly #failures = new Map<string, number>();
  readonly #retryTimers = new Set<ReturnType<typeof setTimeout>>();
  /** Per workload: the content (target digests) of the reload queued, running or waiting for a retry. */
  readonly #inFlight = new Map<string, Record<string, string>>();
  /** Workloads with a retry timer set. */
  readonly #retrying = new Set<string>();
  readonly #held = new Map<string, Held>();
  /** Workloads whose reload is running now. */
  readonly #running = new Set<string>();
  #live = false;
  #sweepTimer: ReturnType<typeof setInterval> | undefined;
  /** Changes seen while start() judges the world; replayed once it is done, so none is lost. */
  #starting = false;
  readonly #buffered: Array<() => void> = [];
  /** When each workload's queued action was first submitted (reloader_workqueue_latency_seconds). */
  readonly #queuedAt = new Map<string, number>();
  #detachDepth: (() => void) | undefined;
  /** Job reloads' records of the Job to create (docs/adr/0021), and the run finishing them, if any. */
  readonly #jobSpecs: JobSpecStore;
  readonly #jobResumer: JobResumer;

  constructor(d: ReconcilerDeps) {
    this.#d = d;
    this.#jobSpecs = new JobSpecStore({
      core: d.core,
      namespace: d.ledger.namespace,
      prefix: d.ledger.prefix,
      warn: (msg, f) => d.log.warn(f, msg),
    });
    this.#signal = d.term ? AbortSignal.any([d.term, this.#abort.signal]) : this.#abort.signal;
    d.ledger.fence(this.#signal);
    this.#jobResumer = new JobResumer({
      batch: d.batch,
      store: this.#jobSpecs,
      events: d.events,
      log: d.log,
      signal: this.#signal,
      busy: (id) => this.#running.has(id),
      pending: (id) => d.ledger.get(id)?.pending !== undefined,
    });
    this.#batcher = new Batcher({
      debounceMs: d.cfg.debounceMs,
      maxWaitMs: d.cfg.maxDebounceWaitMs,
      onBatch: (b) => this.#onBatch(b),
    });
    d.gate?.attach(this.#batcher);
    this.#queue = new WorkQueue<ReloadAction>({
      maxConcurrent: d.cfg.maxConcurrentReloads,
      minIntervalMs: d.cfg.minReloadIntervalMs,
      run: (a) => this.#runTracked(a),
      // Fair across namespaces: one tenant's stuck reloads never hold every slot.
      groupOf: (w) => w.split('/')[1] ?? '',
      // The newer action has the later cutoff; it must still name every config that changed.
      merge: (a, b) => ({ ...b, changed: [...new Set([...a.changed, ...b.changed])].sort() }),
    });
    this.#detachDepth = d.metrics?.reloader.queueDepthFrom(() => this.#queue.waiting);
  }

  /** Judges every known workload against the ledger once the caches are synced (invariant I6). */
  async start(): Promise<void> {
    const { state, ledger, log } = this.#d;
    this.#starting = true;
    await ledger.load();
    // Digests made with another HMAC key cannot be compared with ours: re-baseline, never reload.
    const keyChanged = ledger.keyChanged();
    let rebaselined = 0;
    const baselines: Array<[string, LedgerEntry]> = [];
    const now = Date.now();
    const drop: Array<[string, LedgerEntry]> = [];
    for (const t of state.workloads.values()) {
      if (!this.#d.inScope(t.rec.ref.namespace)) continue;
      this.#reportPolicy(t);
      if (t.parsed.problems.length > 0) {
        const entry = ledger.get(t.id);
        if (entry?.pending) {
          drop.push([
            t.id,
            { configs: entry.configs, ...(entry.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}) },
          ]);
          log.info(fields(t), 'pending reload dropped: the reload annotations are invalid');
        }
        continue;
      }
      const set = this.#set(t);
      const entry = ledger.get(t.id);
      if (!set) {
        // Opted out (or nothing left to watch) with a reload pending: that reload is dropped, and its
        // surge pods go with the clean-up below.
        if (entry?.pending) {
          drop.push([
            t.id,
            { configs: entry.configs, ...(entry.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}) },
          ]);
          log.info(fields(t), 'pending reload dropped: the workload is no longer reloaded');
        }
        continue;
      }
      if (entry?.pending) {
        // After a key change the targets always differ; the reload in progress goes on as it was.
        const same =
          keyChanged || JSON.stringify(sorted(entry.pending.target)) === JSON.stringify(sorted(set));
        this.#submit({
          workload: t.id,
          changed: entry.pending.changed,
          cutoffMs: same ? Date.parse(entry.pending.cutoff) : effectiveCutoff(now),
          target: set,
          changeRV: this.#changeRV(Object.keys(set)),
          resumed: same,
          ...(same && entry.pending.targets ? { targets: entry.pending.targets } : {}),
        });
        continue;
      }
      const v = verdict(set, entry?.configs, { reloadOnDelete: this.#d.cfg.reloadOnDelete });
      if (keyChanged && entry && v.kind === 'reload') {
        baselines.push([t.id, { ...entry, configs: set }]);
        rebaselined++;
      } else if (v.kind === 'baseline' || v.kind === 'rebaseline') {
        if (!isTracked({ digests: set, reasons: {}, skipped: {}, problems: [] })) continue;
        baselines.push([t.id, { ...entry, configs: v.kind === 'rebaseline' ? v.record : set }]);
        if (v.kind === 'baseline') log.info(fields(t), 'baseline recorded');
      } else if (v.kind === 'reload') {
        log.info({ ...fields(t), configs: v.changed }, 'changed while the service was down');
        this.#submit({
          workload: t.id,
          changed: v.changed,
          cutoffMs: effectiveCutoff(now),
          target: set,
          changeRV: this.#changeRV(v.changed),
        });
      }
    }
    if (baselines.length > 0 || drop.length > 0) await ledger.putMany([...baselines, ...drop]);
    if (keyChanged) {
      await ledger.stampKey();
      this.#d.metrics?.keyChanged(rebaselined);
      log.warn(
        { workloads: rebaselined },
        'the HMAC key differs from the one the ledger was written with: every workload re-baselined, none reloaded',
      );
    }
    await this.#cleanUpSurgePods();
    const gone = [...ledger.entries().keys()].filter((id) => !state.workloads.has(id));
    if (gone.length > 0) await ledger.removeMany(gone);
    await this.#resumeJobs();
    if (this.#signal.aborted) return; // stopped (leadership lost) while starting
    this.#live = true;
    this.#starting = false;
    for (const replay of this.#buffered.splice(0)) replay();
    this.#sweepTimer = setInterval(() => {
      this.#cleanUpSurgePods().catch((err: Error) =>
        log.warn({ err: err.message }, 'surge-pod sweep failed; the next one retries'),
      );
      void this.#resumeJobs();
    }, this.#d.cfg.surgeSweepIntervalMs);
    this.#sweepTimer.unref?.();
  }

  /** Surge pods no pending reload needs go (see strategies/surge-sweep.ts). */
  async #cleanUpSurgePods(): Promise<void> {
    const { core, cfg, state, ledger, log } = this.#d;
    if (cfg.dryRun) return;
    await sweepSurgePods({
      core,
      namespaces: cfg.namespaces,
      inScope: (ns) => this.#d.inScope(ns),
      pendingOwners: () => {
        const pending = new Set<string>();
        for (const t of state.workloads.values()) if (ledger.get(t.id)?.pending) pending.add(t.rec.ref.uid);
        // A reload running here may have created a surge pod before its pending write landed.
        for (const id of this.#running) {
          const uid = state.workloads.get(id)?.rec.ref.uid;
          if (uid) pending.add(uid);
        }
        return pending;
      },
      signal: this.#signal,
      log,
    });
  }

  /** Finishes Job reloads cut between the delete and the create (strategies/job-resume.ts). */
  #resumeJobs(): Promise<void> {
    return this.#d.cfg.dryRun ? Promise.resolve() : this.#jobResumer.run();
  }

  /** A ConfigMap or Secret was added, changed or deleted after the initial sync. */
  configChanged(old: ConfigRecord | undefined, now: ConfigRecord | undefined): void {
    if (!this.#live) {
      if (this.#starting) this.#buffered.push(() => this.configChanged(old, now));
      return;
    }
    const rec = (now ?? old) as ConfigRecord;
    const m = this.#d.metrics?.reloader;
    const eventType = !old ? 'add' : !now ? 'delete' : 'update';
    // Reloader's resource names: a SecretProviderClass changes through its pod statuses.
    const resource = {
      ConfigMap: 'configmaps',
      Secret: 'secrets',
      SecretProviderClass: 'secretproviderclasspodstatuses',
    }[rec.ref.kind];
    const started = performance.now();
    const done = (result: 'success' | 'skipped' | 'error') =>
      m?.reconciled(eventType, resource, result, (performance.now() - started) / 1000);
    if (!this.#d.inScope(rec.ref.namespace)) {
      m?.skipped('ignored_or_not_selected');
      return;
    }
    if (old && now && old.digest.all === now.digest.all && same(old.annotations, now.annotations)) {
      m?.skipped('no_data_change');
      done('skipped');
      return;
    }
    try {
      const id = configId(rec.ref);
      const affected = this.#d.state.affectedBy(rec.ref);
      this.#d.log.debug(
        { config: id, namespace: rec.ref.namespace, affected: affected.length },
        'config changed',
      );
      if (affected.length === 0) m?.skipped('no_match');
      const observedAt = Date.now();
      for (const w of affected) {
        const t = this.#d.state.workloads.get(w);
        if (t) m?.workloadsScanned(t.rec.ref.kind);
        const change: Change = {
          workload: w,
          config: id,
          observedAt,
          debounceMs: t?.parsed.policy.debounceMs,
        };
        if (this.#d.gate?.hold(change, rec)) continue;
        this.#batcher.add(change);
      }
      done('success');
    } catch (err) {
      done('error');
      m?.error('handler_error');
      this.#d.log.error(
        { config: configId(rec.ref), namespace: rec.ref.namespace, err: (err as Error).message },
        'could not handle a config change',
      );
    }
  }

  /** A workload was added or changed after the initial sync. */
  workloadChanged(old: TrackedWorkload | undefined, now: TrackedWorkload): void {
    if (!this.#live) {
      if (this.#starting) this.#buffered.push(() => this.workloadChanged(old, now));
      return;
    }
    if (!this.#d.inScope(now.rec.ref.namespace)) return;
    this.#reportPolicy(now, old);
    // A held reload looks at its (maybe edited) window again.
    const held = this.#held.get(now.id);
    if (held && !same(now.rec.annotations, old?.rec.annotations ?? {})) {
      clearTimeout(held.timer);
      this.#held.delete(now.id);
      this.#submit(held.action);
    }
    const req = now.rec.annotations[KEYS.reloadRequestedAt];
    if (req && req !== old?.rec.annotations[KEYS.reloadRequestedAt]) {
      this.#batcher.add({ workload: now.id, config: REQUEST, observedAt: Date.now(), debounceMs: 0 });
    }
    if (!old && !this.#running.has(now.id)) {
      // A new workload: record its baseline so its first config change is recognised. (One that
      // appears while its reload runs is that reload's doing, a recreated Job: the reload records it.)
      this.#batcher.add({ workload: now.id, config: 'workload', observedAt: Date.now(), debounceMs: 0 });
    }
  }

  async workloadDeleted(id: string): Promise<void> {
    this.#failures.delete(id);
    // A Job whose reload was cut mid-wait (deadline) is created again as soon as the old one is gone.
    if (this.#live && this.#d.ledger.get(id)?.pending && id.startsWith('Job/') && !this.#running.has(id)) {
      void this.#resumeJobs();
    }
    // A reload that deletes its workload (a Job run again) records the outcome itself.
    if (!this.#live || !this.#d.ledger.get(id) || this.#running.has(id)) return;
    await this.#d.ledger
      .remove(id)
      .catch((err: Error) => this.#d.log.warn({ err: err.message }, 'ledger remove failed'));
  }

  async stop(): Promise<void> {
    this.#detachDepth?.();
    this.#live = false;
    this.#starting = false;
    this.#buffered.length = 0;
    this.#batcher.clear();
    this.#d.gate?.detach(this.#batcher);
    clearInterval(this.#sweepTimer);
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
    for (const h of this.#held.values()) clearTimeout(h.timer);
    this.#held.clear();
    this.#abort.abort(new Error('the service is stopping'));
    await this.#queue.stop();
  }

  #set(t: TrackedWorkload): Record<string, string> | undefined {
    const s = watchedSet(t.rec, t.parsed, this.#d.state, this.#d.globals);
    for (const p of s.problems) void this.#event(t, 'ReloadConfigInvalid', p, 'Warning');
    return isTracked(s) ? s.digests : undefined;
  }

  #reportPolicy(t: TrackedWorkload, old?: TrackedWorkload): void {
    const { problems, warnings, notes } = t.parsed;
    if (notes.length > 0 && notes.join() !== old?.parsed.notes.join()) {
      this.#d.log.info({ ...fields(t), notes }, 'Reloader annotation read with our meaning');
      void this.#event(t, 'ReloadAnnotationMapped', notes.join('; '));
    }
    if (problems.length > 0 && problems.join() !== old?.parsed.problems.join()) {
      this.#d.log.warn({ ...fields(t), problems }, 'invalid reload annotations; workload skipped');
      void this.#event(t, 'ReloadConfigInvalid', `skipped: ${problems.join('; ')}`, 'Warning');
    }
    if (warnings.length > 0 && warnings.join() !== old?.parsed.warnings.join()) {
      this.#d.log.warn({ ...fields(t), warnings }, 'reload annotations not acted on');
      void this.#event(t, 'ReloadSkipped', `annotations not acted on: ${warnings.join('; ')}`, 'Warning');
    }
  }

  async #onBatch(b: Batch): Promise<void> {
    const { state, ledger, log } = this.#d;
    const t = state.workloads.get(b.workload);
    if (!t || !this.#d.inScope(t.rec.ref.namespace)) return;
    if (t.parsed.problems.length > 0) {
      log.info({ ...fields(t), configs: b.configs }, 'change ignored: invalid reload annotations');
      return;
    }
    const set = this.#set(t) ?? {};
    const entry = ledger.get(t.id);
    const v = verdict(set, entry?.configs, { reloadOnDelete: this.#d.cfg.reloadOnDelete });
    try {
      switch (v.kind) {
        case 'baseline':
          if (Object.keys(set).length === 0) return;
          await ledger.put(t.id, { configs: set });
          log.info(fields(t), 'baseline recorded');
          return;
        case 'rebaseline':
          await ledger.put(t.id, { ...entry, configs: v.record });
          log.info({ ...fields(t), added: v.added, removed: v.removed }, 'watched configs changed; recorded');
          return;
        case 'none':
          this.#d.metrics?.reloader.skipped('no_data_change');
          log.info(
            {
              ...fields(t),
              configs: b.configs,
              ...(v.deleted.length > 0 ? { deleted: v.deleted, reloadOnDelete: false } : {}),
            },
            'no reload needed',
          );
          return;
        case 'reload':
          this.#d.metrics?.reloader.workloadMatched(t.rec.ref.kind);
          this.#submit({
            workload: t.id,
            changed: v.changed,
            cutoffMs: effectiveCutoff(changeObservedAt(b, v.changed)),
            target: set,
            changeRV: this.#changeRV(v.changed),
          });
      }
    } catch (err) {
      log.error({ ...fields(t), err: (err as Error).message }, 'could not record the ledger');
    }
  }

  /** The newest resourceVersion among these configs (deleted ones and pseudo-configs have none). */
  #changeRV(ids: string[]): string {
    let max = '0';
    for (const id of ids) {
      const rv = this.#d.state.configs.get(id)?.resourceVersion;
      if (rv && (compareResourceVersions(rv, max) ?? 0) > 0) max = rv;
    }
    return max;
  }

  /**
   * Queues a reload, unless one for the same content is already queued, running or waiting to be
   * retried: its cutoff is earlier, and every pod created after it already has this content, so a
   * second reload would only recycle pods twice (e.g. a held sync released just after a new leader's
   * start found the same change).
   */
  #submit(a: ReloadAction): void {
    const current = this.#inFlight.get(a.workload);
    if (current && !a.resumed && same(current, a.target)) {
      this.#d.log.debug({ workload: a.workload }, 'a reload for this content is already under way');
      return;
    }
    this.#inFlight.set(a.workload, a.target);
    if (!this.#queuedAt.has(a.workload)) this.#queuedAt.set(a.workload, performance.now());
    this.#d.metrics?.reloader.queueAdded();
    // pause-period: the batch window runs from the end of the last reload, also one before a restart.
    const windowMs = this.#d.state.workloads.get(a.workload)?.parsed.policy.batchWindowMs;
    if (windowMs === undefined) {
      this.#queue.submit(a);
      return;
    }
    const last = this.#d.ledger.get(a.workload)?.reloadedAt;
    const notBefore = last ? Date.parse(last) + windowMs : undefined;
    this.#queue.submit({ ...a, minIntervalMs: windowMs, ...(notBefore ? { notBefore } : {}) });
  }

  /**
   * Holds a reload until the workload's maintenance window opens: the pending action goes to the
   * ledger (so a restarted service holds it too, with the same cutoff), a ReloadDeferred Event says
   * until when, and a timer submits it again. Changes while it is held join it: one reload.
   */
  async #hold(t: TrackedWorkload, a: ReloadAction, opensAt: number, windowText: string): Promise<void> {
    const { ledger, log } = this.#d;
    const before = this.#held.get(t.id);
    if (before) clearTimeout(before.timer);
    const action: ReloadAction = {
      ...a,
      changed: [...new Set([...(before?.action.changed ?? []), ...a.changed])].sort(),
      resumed: true,
    };
    const delay = Math.min(Math.max(0, opensAt - Date.now()), HOLD_RECHECK_MS);
    const timer = setTimeout(() => {
      if (this.#held.get(t.id)?.timer !== timer) return;
      this.#held.delete(t.id);
      this.#submit(action);
    }, delay);
    this.#held.set(t.id, { action, opensAt, timer });
    const entry = ledger.get(t.id);
    const pending = {
      cutoff: new Date(action.cutoffMs).toISOString(),
      target: action.target,
      changed: action.changed,
      startedAt: entry?.pending?.startedAt ?? new Date().toISOString(),
    };
    if (JSON.stringify(entry?.pending) !== JSON.stringify(pending)) {
      try {
        await ledger.put(t.id, {
          configs: entry?.configs ?? {},
          pending,
          ...(entry?.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}),
        });
      } catch (err) {
        log.error({ ...fields(t), err: (err as Error).message }, 'could not record the held reload');
      }
    }
    const changed = action.changed.map(display);
    const until = new Date(opensAt).toISOString();
    if (before?.opensAt === opensAt && before.action.changed.join() === action.changed.join()) return;
    log.info(
      { ...fields(t), configs: changed, until, window: windowText },
      'reload held until its window opens',
    );
    await this.#event(
      t,
      'ReloadDeferred',
      `${changed.join(', ')} changed; reload held until ${until}, when a window of ${KEYS.restartWindow}="${windowText}" opens`,
    );
  }

  /**
   * Never evicts into an outage: while a config the pods need (not optional) is missing, a replaced
   * pod could not start, so the reload is held, with a Warning Event naming the config (never its
   * data). Nothing pending is kept: the ledger still holds the digests the pods run, so the config's
   * return (a change event) finds the difference again and reloads as usual (docs/adr/0020).
   */
  async #heldForMissing(t: TrackedWorkload, a: ReloadAction): Promise<boolean> {
    const { state, ledger, log, cfg } = this.#d;
    let missing: string[];
    try {
      missing = (
        await missingNeededConfigs(t.rec.uses, {
          kc: this.#d.kc,
          cached: (c) => state.get(c) !== undefined,
          ignoreResources: cfg.ignoreResources,
          partialCache: cfg.resourceLabelSelector !== undefined,
          signal: this.#signal,
        })
      ).map((c) => `${c.kind}/${c.name}`);
    } catch (err) {
      log.warn(
        { ...fields(t), err: (err as Error).message },
        'could not tell whether the configs the pods need exist; reloading',
      );
      return false;
    }
    if (missing.length === 0) return false;
    const changed = a.changed.map(display);
    this.#d.metrics?.reloadHeld('config-missing');
    log.warn({ ...fields(t), configs: changed, missing }, 'reload held: a config the pods need is missing');
    const entry = ledger.get(t.id);
    if (entry?.pending) {
      await ledger
        .put(t.id, { configs: entry.configs, ...(entry.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}) })
        .catch((err: Error) =>
          log.warn({ ...fields(t), err: err.message }, 'could not clear the held reload in the ledger'),
        );
    }
    await this.#event(t, 'ReloadHeld', heldMessage(changed, missing), 'Warning');
    return true;
  }

  /** Runs one action and forgets its content once nothing more will run for it. */
  async #runTracked(a: ReloadAction): Promise<void> {
    try {
      await this.#run(a);
    } finally {
      const current = this.#inFlight.get(a.workload);
      if (!this.#retrying.has(a.workload) && current && same(current, a.target)) {
        this.#inFlight.delete(a.workload);
      }
    }
  }

  async #run(a: ReloadAction): Promise<void> {
    this.#running.add(a.workload);
    try {
      await this.#runOnce(a);
    } finally {
      this.#running.delete(a.workload);
    }
  }

  async #runOnce(a: ReloadAction): Promise<void> {
    const { state, ledger, log, cfg } = this.#d;
    const queuedAt = this.#queuedAt.get(a.workload);
    this.#queuedAt.delete(a.workload);
    if (queuedAt !== undefined) this.#d.metrics?.reloader.queueLatency((performance.now() - queuedAt) / 1000);
    const t = state.workloads.get(a.workload);
    if (!t) {
      await ledger.remove(a.workload).catch(() => undefined);
      return;
    }
    if (t.parsed.problems.length > 0 || !isTracked(watchedSet(t.rec, t.parsed, state, this.#d.globals))) {
      await this.#drop(t);
      return;
    }
    const windows = t.parsed.policy.windows;
    if (windows) {
      const w = windowState(windows, Date.now());
      if (!w.open) {
        await this.#hold(t, a, w.opensAt, windows.text);
        return;
      }
    }
    if (await this.#heldForMissing(t, a)) return;
    const held = this.#held.get(t.id);
    if (held) {
      // A newer action runs now; it covers the held one, whose configs it names too.
      clearTimeout(held.timer);
      this.#held.delete(t.id);
      a = { ...a, changed: [...new Set([...held.action.changed, ...a.changed])].sort() };
    }
    const strategy = t.parsed.policy.strategy;
    const changed = a.changed.map(display);
    const f = { ...fields(t), strategy, configs: changed };
    const metric = this.#d.metrics?.reloadStarted(strategy, t.rec.ref.kind, t.rec.ref.namespace);
    if (!a.resumed) {
      const seconds = Math.max(0, Date.now() - a.cutoffMs) / 1000;
      this.#d.metrics?.eventToAction(seconds);
      this.#d.metrics?.reloader.actionLatency(t.rec.ref.kind, seconds);
    }
    if (cfg.dryRun) {
      metric?.finish('skipped');
      this.#d.metrics?.reloader.skipped('dry_run');
      log.info({ ...f, cutoff: new Date(a.cutoffMs).toISOString() }, 'dry-run: would reload');
      await this.#event(
        t,
        'ReloadPlanned',
        `dry run: would ${strategy} because ${changed.join(', ')} changed`,
      );
      await ledger.put(t.id, { configs: a.target });
      return;
    }
    const previous = ledger.get(t.id);
    const cutoff = new Date(a.cutoffMs).toISOString();
    const startedAt = new Date().toISOString();
    // The strategy calls begin() before its first write: the pending entry then names the pods it
    // replaces, at no extra request. A retry after a failure replaces the same pods.
    let targets = a.targets;
    const begin = async (snapshot?: readonly string[]) => {
      targets = snapshot;
      await ledger.put(t.id, {
        configs: previous?.configs ?? {},
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
    log.info({ ...f, cutoff, resumed: a.resumed ?? false }, 'reload started');
    // The reload's own deadline: when it passes, the slot is given back and the reload re-queued.
    const deadline = new AbortController();
    const deadlineTimer = setTimeout(
      () => deadline.abort(new Error(`the reload did not finish within ${cfg.reloadDeadlineMs / 1000}s`)),
      cfg.reloadDeadlineMs,
    );
    const signal = AbortSignal.any([this.#signal, deadline.signal]);
    const webhook = this.#d.webhook;
    try {
      const result: StrategyResult = webhook
        ? await this.#notify(
            webhook,
            t,
            strategy,
            changed,
            cutoff,
            setDigest(a.target, namespaceKey(this.#d.hashKey, t.rec.ref.namespace)),
          )
        : await runStrategy(strategy, t.rec, {
            core: this.#d.core,
            apps: this.#d.apps,
            batch: this.#d.batch,
            custom: this.#d.custom,
            kc: this.#d.kc,
            begin,
            jobSpecs: this.#jobSpecs,
            log,
            signal,
            stallAfterMs: cfg.stallAfterMs,
            onStall: (why) => {
              metric?.stalled();
              this.#d.metrics?.reloadStall('blocked');
              log.warn({ ...f, why }, 'reload stalled');
              void this.#event(
                t,
                'ReloadStalled',
                `reload blocked for over ${cfg.stallAfterMs / 1000}s: ${why}`,
                'Warning',
              );
            },
            cutoffMs: a.cutoffMs,
            ...(a.targets ? { targets: a.targets } : {}),
            // Keyed per namespace, as the checksum plugin keys it (ADR 0010).
            configHash: setDigest(a.target, namespaceKey(this.#d.hashKey, t.rec.ref.namespace)),
            ...(this.#d.git ? { git: this.#d.git } : {}),
            changed,
            templateChangedSince: templateChangeCheck({
              kind: t.rec.ref.kind,
              changeRV: a.changeRV,
              watched: () => {
                const w = this.#d.state.workloads.get(a.workload);
                return w && { templateHash: w.rec.templateHash, templateRV: w.templateRV };
              },
              readAt: (rv) => readWorkloadAt(this.#d.kc, t.rec.ref, rv, signal),
              onUnknown: (why) =>
                log.warn(
                  { ...f, why },
                  'could not read the pod template at the change; pods are judged by the cutoff',
                ),
            }),
          });
      await ledger.put(t.id, { configs: a.target, reloadedAt: new Date().toISOString() });
      this.#failures.delete(t.id);
      if (result.notNeeded) {
        metric?.finish('not-needed');
        log.info({ ...f, replaced: 0, notNeeded: true }, 'reload complete');
        await this.#event(t, 'ReloadNotNeeded', `${changed.join(', ')} changed; ${result.summary}`);
        return;
      }
      metric?.finish('success', result.replaced);
      log.info({ ...f, replaced: result.replaced }, 'reload complete');
      // The cutoff is what decided only when no snapshot of pods did (ADR 0008); a CronJob or Job
      // reload runs a new Job and has no pods to judge by it.
      const batch = t.rec.ref.kind === 'CronJob' || t.rec.ref.kind === 'Job';
      const rule = targets || webhook || batch ? '' : ` (cutoff ${cutoff})`;
      await this.#event(
        result.uid ? { ...t, rec: { ...t.rec, ref: { ...t.rec.ref, uid: result.uid } } } : t,
        webhook ? 'ReloadNotified' : 'Reloaded',
        `${changed.join(', ')} changed; ${result.summary}${rule}`,
      );
    } catch (err) {
      if (this.#signal.aborted) {
        metric?.finish('interrupted');
        log.info(f, 'reload interrupted; the pending action stays in the ledger');
        return;
      }
      if (deadline.signal.aborted) {
        // Not a failure of the workload's config: something (a PDB, a rollout that never gets Ready)
        // blocks it. Give the slot back, say so every time, and try again later from the same pods.
        metric?.finish('interrupted');
        this.#d.metrics?.reloadStall('deadline');
        const n = (this.#failures.get(t.id) ?? 0) + 1;
        this.#failures.set(t.id, n);
        const retryMs = RETRY_MS[Math.min(n - 1, RETRY_MS.length - 1)] as number;
        log.warn(
          { ...f, attempt: n, deadlineMs: cfg.reloadDeadlineMs, retryInMs: retryMs },
          'reload deadline passed; slot released, re-queued',
        );
        await this.#event(
          t,
          'ReloadStalled',
          `attempt ${n} did not finish within ${cfg.reloadDeadlineMs / 1000}s; released its slot, retrying in ${retryMs / 1000}s`,
          'Warning',
        );
        this.#retry(a, targets, retryMs);
        return;
      }
      if (err instanceof ReloadWaiting) {
        // Not a failure, and nothing was written: the ledger still holds the old digests, so a restarted
        // service finds the change again; this one tries again after a while.
        metric?.finish('skipped');
        log.info({ ...f, why: err.message, retryInMs: err.retryMs }, 'reload waiting');
        await this.#event(t, 'ReloadDeferred', `${changed.join(', ')} changed; ${err.message}`);
        this.#retry(a, undefined, err.retryMs);
        return;
      }
      if (err instanceof StrategyUnsupported) {
        metric?.finish('skipped');
        this.#d.metrics?.reloader.skipped('unsupported');
        await ledger.put(t.id, {
          configs: a.target,
          ...(previous?.reloadedAt ? { reloadedAt: previous.reloadedAt } : {}),
        });
        log.info({ ...f, why: err.message }, 'reload skipped');
        await this.#event(t, 'ReloadSkipped', `${changed.join(', ')} changed; ${err.message}`);
        return;
      }
      metric?.finish('failure');
      this.#d.metrics?.reloader.error(
        err instanceof WebhookDeliveryError ? 'webhook_send' : 'update_workload',
      );
      this.#d.metrics?.reloader.retry();
      const n = (this.#failures.get(t.id) ?? 0) + 1;
      this.#failures.set(t.id, n);
      const retryMs = RETRY_MS[Math.min(n - 1, RETRY_MS.length - 1)] as number;
      log.error({ ...f, err: (err as Error).message, retryInMs: retryMs }, 'reload failed');
      await this.#event(
        t,
        'ReloadFailed',
        `${(err as Error).message}; retrying in ${retryMs / 1000}s`,
        'Warning',
      );
      this.#retry(a, targets, retryMs);
    } finally {
      clearTimeout(deadlineTimer);
    }
  }

  /** A queued reload of a workload that opted out or became invalid: forget it, and its surge pods. */
  async #drop(t: TrackedWorkload): Promise<void> {
    const { ledger, core, log, cfg } = this.#d;
    log.info(fields(t), 'reload dropped: the workload is no longer reloaded');
    try {
      const entry = ledger.get(t.id);
      if (entry?.pending) {
        await ledger.put(t.id, {
          configs: entry.configs,
          ...(entry.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}),
        });
      }
      if (t.rec.ref.kind !== 'Deployment' || cfg.dryRun) return;
      await deleteSurgePodsOf(core, t.rec.ref.namespace, t.rec.ref.uid, this.#signal, log, fields(t));
    } catch (err) {
      log.warn(
        { ...fields(t), err: (err as Error).message },
        'could not clean up a dropped reload; the sweep retries',
      );
    }
  }

  #retry(a: ReloadAction, targets: readonly string[] | undefined, retryMs: number): void {
    this.#retrying.add(a.workload);
    const timer = setTimeout(() => {
      this.#retryTimers.delete(timer);
      this.#retrying.delete(a.workload);
      this.#submit({ ...a, resumed: true, ...(targets ? { targets } : {}) });
    }, retryMs);
    this.#retryTimers.add(timer);
  }

  /** --webhook-url: the reload's details go to the webhook, and nothing in the cluster changes. */
  async #notify(
    o: ReloadWebhookOptions,
    t: TrackedWorkload,
    strategy: string,
    changed: string[],
    cutoff: string,
    configHash: string,
  ): Promise<{ replaced: number; summary: string }> {
    const r = t.rec.ref;
    const sent = await sendReloadNotice(
      o,
      {
        event: 'reload',
        workload: { kind: r.kind, namespace: r.namespace, name: r.name },
        strategy,
        changed,
        cutoff,
        configHash,
        timestamp: new Date().toISOString(),
      },
      this.#signal,
      (attempt, why) => {
        this.#d.metrics?.reloader.retry();
        this.#d.log.warn({ ...fields(t), attempt, why }, 'reload webhook failed; retrying');
      },
    );
    return {
      replaced: 0,
      summary: `sent to the webhook ${redact(o.url)} (HTTP ${sent.status}, attempt ${sent.attempts}); not restarted`,
    };
  }

  async #event(
    t: TrackedWorkload,
    reason: EventReason,
    message: string,
    type: 'Normal' | 'Warning' = 'Normal',
  ) {
    const r = t.rec.ref;
    await this.#d.events.emit(
      { apiVersion: apiVersionOf(r.kind), kind: r.kind, namespace: r.namespace, name: r.name, uid: r.uid },
      reason,
      message,
      type,
    );
  }
}

/** "ConfigMap/ns/app" → "ConfigMap/app": Events sit on the workload, so the namespace is implied. */
function display(id: string): string {
  if (id === REQUEST) return KEYS.reloadRequestedAt;
  const [kind, , ...name] = id.split('/');
  return name.length > 0 ? `${kind}/${name.join('/')}` : id;
}

function sorted(m: Record<string, string>): Array<[string, string]> {
  return Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1));
}

function same(a: Record<string, string>, b: Record<string, string>): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}
