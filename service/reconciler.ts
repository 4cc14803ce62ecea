// Turns observations into reload actions and decides what happens to them. Config and workload events
// feed the Batcher; each batch is judged against the ledger (watchedSet + verdict); a reload becomes
// an action that waits in the waiting room (engine/waiting-room.ts), which always holds the newest
// change's action per workload, while the WorkQueue holds the workload's key (fairness, the minimum
// interval). When the queue hands one over, decide() says whether it runs; runReload() executes it
// through the injected strategies and returns an Outcome; #settle() turns outcomes into waits in the
// room (a retry, a hold until a window opens). The room arms every timer after the batch and is the
// table the status reads. Every clock, timer, ledger, Event and strategy comes in through deps, so a
// test drives all of it one step at a time (docs/adr/0020, docs/design.md).

import { identities } from './catch-up.ts';
import { KEYS } from './core/annotations.ts';
import { type Batch, Batcher, type Change, realTimers, type Timers } from './core/batcher.ts';
import { SeenDuringStart } from './core/configs-before.ts';
import { ofThisObject } from './core/ledger-entry.ts';
import {
  type ConfigLookup,
  isTracked,
  REQUEST,
  recordable,
  type WatchedSet,
  watchedSet,
} from './core/plan.ts';
import type { ConfigRecord } from './core/records.ts';
import {
  type CutReason,
  compareRecency,
  isOlder,
  type Outcome,
  type Recency,
  type ReloadAction,
  retryDelayMs,
} from './core/reload-action.ts';
import { configId } from './core/types.ts';
import { type QueuedAction, WorkQueue } from './core/work-queue.ts';
import { ConfigHooks } from './engine/config-hooks.ts';
import { decide } from './engine/decide.ts';
import type { ReconcilerDeps } from './engine/deps.ts';
import { Gates } from './engine/gates.ts';
import { BatchWindows, batchVerdict, recordMissing, resumeHeld, WindowHolds } from './engine/hold.ts';
import { plannedCutoff } from './engine/planned-cutoff.ts';
import { HELD_BY_HALT } from './engine/progressive.ts';
import { dropReload, forgetGone, forgetIfGone, Recorder } from './engine/recorder.ts';
import { changeRV, emitOn, fields, reconciledTimer, reportPolicy, versionsOf } from './engine/report.ts';
import { runReload } from './engine/run-reload.ts';
import { heldAtStart, judgeAtStart, sameDigests as same } from './engine/startup.ts';
import { type ReloadStatus, StatusBook } from './engine/status.ts';
import type { RunWait, SweepView } from './engine/strategies-port.ts';
import { sweepView } from './engine/sweep-view.ts';
import { WaitingRoom } from './engine/waiting-room.ts';
import type { TrackedWorkload } from './state.ts';

export type { ReloadAction } from './core/reload-action.ts';
export type { ReconcilerDeps } from './engine/deps.ts';

export class Reconciler {
  readonly #d: ReconcilerDeps;
  readonly #timers: Timers;
  readonly #batcher: Batcher;
  /** Workload keys only: the action queued waits in the room (`enqueue`, `take`). */
  readonly #queue: WorkQueue<QueuedAction>;
  readonly #recorder: Recorder;
  readonly #windows: BatchWindows;
  readonly #event: ReturnType<typeof emitOn>;
  readonly #abort = new AbortController();
  /** Aborts when this reconciler stops or its leadership term ends, whichever comes first. */
  readonly #signal: AbortSignal;
  /** Every planned reload waiting after the batch (retries, windows, the brake, waves) and every timer of it. */
  readonly #room: WaitingRoom;
  /** Per workload: the content (target digests) of the reload queued, running or waiting for a retry. */
  readonly #inFlight = new Map<string, Record<string, string>>();
  /** Per workload: the recency of the newest action submitted in this term (a retry never beats it). */
  readonly #newest = new Map<string, Recency>();
  /** Workloads whose baseline the ledger refused: the digests it was for, until one is recorded. */
  readonly #refused = new Map<string, Record<string, string>>();
  /**
   * Workloads this term saw created: their pods read what the configs held then, so a ledger entry
   * about an older object of the name (its removal refused when that one was deleted) says nothing of
   * them. One found at a term's start is judged by the catch-up instead, old entry and pods together.
   */
  readonly #createdHere = new Set<string>();
  readonly #holds: WindowHolds;
  readonly #running = new Set<string>();
  /** Per workload running a reload: its action, and what stops it early (progressive reloads). */
  readonly #cuts = new Map<string, { action: ReloadAction; ctl: AbortController }>();
  /** Ledger ids removed at start as gone (out of scope, or deleted): their surge pods may still be ours. */
  #formerlyReloaded: readonly string[] = [];
  #live = false;
  /** Changes seen while start() judges the world; replayed once it is done, so none is lost. */
  #starting = false;
  readonly #buffered: Array<() => void> = [];
  /** What was written while start() judges: the configs a first-seen workload's baseline reads. */
  readonly #seenDuringStart = new SeenDuringStart();
  /** When each workload's queued action was first submitted (reloader_workqueue_latency_seconds). */
  readonly #queuedAt = new Map<string, number>();
  #detachDepth: (() => void) | undefined;
  /** The brake and the progressive reloads' waves (docs/progressive-reloads.md). */
  readonly #gates: Gates;
  readonly #hooks: ConfigHooks;
  readonly #book: StatusBook;

  constructor(d: ReconcilerDeps) {
    this.#d = d;
    this.#timers = d.timers ?? realTimers;
    this.#signal = d.term ? AbortSignal.any([d.term, this.#abort.signal]) : this.#abort.signal;
    this.#recorder = new Recorder(d.ledger, { reloadOnDelete: d.cfg.reloadOnDelete });
    this.#event = emitOn(d.events);
    this.#room = new WaitingRoom(this.#timers);
    this.#holds = new WindowHolds(d, this.#room, (a) => this.#submit(a));
    this.#windows = new BatchWindows(d, () => this.#timers.now());
    d.ledger.fence(this.#signal);
    d.ledger.identifyWith(identities(d.state));
    this.#batcher = new Batcher({
      debounceMs: d.cfg.debounceMs,
      maxWaitMs: d.cfg.maxDebounceWaitMs,
      ...(d.timers ? { timers: d.timers } : {}),
      onBatch: (b) => this.#onBatch(b),
    });
    d.gate?.attach(this.#batcher);
    this.#queue = new WorkQueue<QueuedAction>({
      maxConcurrent: d.cfg.maxConcurrentReloads,
      minIntervalMs: d.cfg.minReloadIntervalMs,
      run: (k) => {
        const a = this.#room.take(k.workload);
        return a ? this.#runTracked(a) : Promise.resolve();
      },
      ...(d.timers ? { timers: d.timers } : {}),
      // Fair across namespaces: one tenant's stuck reloads never hold every slot.
      groupOf: (w) => w.split('/')[1] ?? '',
    });
    this.#detachDepth = d.metrics?.reloader.queueDepthFrom(() => this.#queue.waiting);
    const forget = (a: ReloadAction) => this.#forgetContent(a.workload, a.target);
    const cut = (workload: string, why: CutReason, carries: (a: ReloadAction) => boolean) => {
      const r = this.#cuts.get(workload);
      if (!r || r.ctl.signal.aborted || !carries(r.action)) return false;
      r.ctl.abort(why);
      return true;
    };
    this.#gates = new Gates(d, {
      release: (a) => this.#enqueue(a),
      forget,
      cut,
      running: (w) => this.#running.has(w),
      signal: this.#signal,
      room: this.#room,
    });
    this.#hooks = new ConfigHooks(d, this.#gates.progressive);
    this.#book = new StatusBook({
      now: () => this.#timers.now(),
      applied: (w) => d.ledger.get(w)?.configs,
      current: (c) => d.state.configs.get(c)?.digest,
    });
  }

  /** Judges every known workload against the ledger once the caches are synced (invariant I6). */
  async start(): Promise<void> {
    const { state, ledger } = this.#d;
    this.#starting = true;
    await judgeAtStart(this.#d, {
      set: (t) => this.#set(t),
      firstSeen: (t) => this.#firstSeen(t),
      reportPolicy: (t) => reportPolicy(this.#d, t),
      changeRV: (ids) => changeRV(this.#d.state, ids),
      submit: (a) => this.#submit(a),
      heldByGate: (t, changed, observedAt) => heldAtStart(this.#d, t, changed, observedAt),
      loaded: () => this.#gates.restore(),
    });
    const gone = [...ledger.entries().keys()].filter((id) => !state.workloads.has(id));
    if (gone.length > 0) await ledger.removeMany(gone);
    this.#formerlyReloaded = gone;
    // After that: a Job the sweep creates again is new, baselined, not the gone one's pending reload.
    await this.#sweep();
    if (this.#signal.aborted) return; // stopped (leadership lost) while starting
    this.#live = true;
    this.#starting = false;
    this.#seenDuringStart.clear();
    for (const replay of this.#buffered.splice(0)) replay();
    this.#armSweep();
  }

  /** The periodic surge-pod sweep, on the injected timers like every other wait. */
  #armSweep(): void {
    const timer = this.#room.arm(() => {
      if (!this.#live) return;
      this.#sweep()
        .catch((err: Error) =>
          this.#d.log.warn({ err: err.message }, 'surge-pod sweep failed; the next one retries'),
        )
        .finally(() => this.#live && this.#armSweep());
    }, this.#d.cfg.surgeSweepIntervalMs);
    (timer as { unref?: () => void }).unref?.();
  }

  /** Surge pods, cut Job reloads (docs/adr/0025, 0026), then gone workloads' entries (read by the sweep). */
  #sweep(): Promise<void> {
    return this.#d.strategies
      .sweep(this.#view(), this.#signal)
      .then(() => forgetGone(this.#d, this.#running));
  }

  /** What the sweep asks about the reloads this reconciler knows. */
  #view(): SweepView {
    return sweepView(this.#d, this.#running, this.#formerlyReloaded);
  }

  /**
   * A ConfigMap or Secret was added, changed or deleted after the initial sync. `observedAt` is when
   * the watch showed it; default now.
   */
  configChanged(
    old: ConfigRecord | undefined,
    now: ConfigRecord | undefined,
    observedAt: number = this.#timers.now(),
  ): void {
    const rec = (now ?? old) as ConfigRecord;
    // Every change seen gets one line naming it (config, resourceVersion) and what was decided, so a
    // test (or a person) can tell "looked and decided not to reload" from "not looked at yet".
    const seen = () => ({
      config: configId(rec.ref),
      namespace: rec.ref.namespace,
      resourceVersion: rec.resourceVersion,
    });
    if (!this.#live) {
      // Replayed once the term has started, as seen now: a cutoff from the replay would make the pods
      // created while the term started (a slow start-up sweep) look old, and replace them again (I3).
      if (this.#starting) {
        this.#seenDuringStart.config(old);
        this.#buffered.push(() => this.configChanged(old, now, observedAt));
        this.#d.log.debug(seen(), 'config change seen while the term starts; judged once it has');
      }
      return;
    }
    const m = this.#d.metrics?.reloader;
    const done = reconciledTimer(this.#d, old, now);
    if (!this.#d.inScope(rec.ref.namespace)) {
      m?.skipped('ignored_or_not_selected');
      this.#d.log.debug(seen(), 'config change ignored: its namespace is not in scope');
      return;
    }
    if (old && now && old.digest.all === now.digest.all && same(old.annotations, now.annotations)) {
      m?.skipped('no_data_change');
      this.#d.log.debug(seen(), 'config change needs no reload: its data and annotations are unchanged');
      done('skipped');
      return;
    }
    try {
      const id = configId(rec.ref);
      const affected = this.#d.state.affectedBy(rec.ref);
      // With affected 0 this line is the decision: no workload reloads on this config.
      this.#d.log.debug({ ...seen(), affected: affected.length }, 'config changed');
      if (affected.length === 0) m?.skipped('no_match');
      const metadataOnly = old !== undefined && now !== undefined && old.digest.all === now.digest.all;
      this.#hooks.changed(old, now, metadataOnly);
      this.#book.sawConfig(old, now);
      for (const w of affected) {
        const t = this.#d.state.workloads.get(w);
        if (t) m?.workloadsScanned(t.rec.ref.kind);
        const debounceMs = t?.parsed.policy.debounceMs;
        const change: Change = { workload: w, config: id, observedAt, debounceMs, metadataOnly };
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
      if (this.#starting) {
        this.#seenDuringStart.workload(now.id, !old);
        this.#buffered.push(() => this.workloadChanged(old, now));
      }
      return;
    }
    if (!this.#d.inScope(now.rec.ref.namespace)) return;
    reportPolicy(this.#d, now, old);
    // A held reload looks at its (maybe edited) window again.
    if (!same(now.rec.annotations, old?.rec.annotations ?? {})) this.#holds.release(now.id, true);
    const req = now.rec.annotations[KEYS.reloadRequestedAt];
    if (req && req !== old?.rec.annotations[KEYS.reloadRequestedAt]) {
      this.#batcher.add({ workload: now.id, config: REQUEST, observedAt: this.#timers.now(), debounceMs: 0 });
    }
    if (!old && !this.#running.has(now.id)) {
      // A new workload: record its baseline so its first config change is recognised. (One that
      // appears while its reload runs is that reload's doing, a recreated Job: the reload records it.)
      this.#createdHere.add(now.id);
      this.#judgeAfresh(now.id);
    }
  }

  async workloadDeleted(id: string): Promise<void> {
    this.#room.succeeded(id);
    // A Job whose reload was cut mid-wait (deadline) is created again as soon as the old one is gone.
    if (this.#live && id.startsWith('Job/') && this.#d.ledger.get(id)?.pending && !this.#running.has(id)) {
      void this.#d.strategies.resumeJobs(this.#view(), this.#signal);
    }
    this.#refused.delete(id);
    this.#createdHere.delete(id);
    if (!this.#running.has(id) && !this.#room.retrying(id)) {
      this.#newest.delete(id);
      this.#recorder.forget(id);
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
    this.#seenDuringStart.clear();
    this.#batcher.clear();
    this.#d.gate?.detach(this.#batcher);
    this.#room.clear();
    this.#createdHere.clear();
    this.#gates.stop();
    this.#abort.abort(new Error('the service is stopping'));
    await this.#queue.stop();
  }

  #set(t: TrackedWorkload): Record<string, string> | undefined {
    return this.#watched(t).digests;
  }

  /**
   * The set a start baselines: the configs as it first saw them (core/configs-before.ts); undefined
   * when that is set(t), which has reported the workload's problems already (nothing was written
   * during the start, the workload was not tracked then, or it was created during the start: its
   * pods come after the writes before it).
   */
  #firstSeen(t: TrackedWorkload): Record<string, string> | undefined {
    const configs = this.#seenDuringStart.lookup(t.id, this.#d.state);
    if (!configs) return undefined;
    const s = this.#watchedSet(t, configs);
    return isTracked(s) ? s.digests : undefined;
  }

  /** The workload's watched set over `configs` (default: as they are now), against what it applied. */
  #watchedSet(t: TrackedWorkload, configs: ConfigLookup = this.#d.state): WatchedSet {
    const applied = this.#d.ledger.get(t.id)?.configs ?? this.#refused.get(t.id);
    return watchedSet(t.rec, t.parsed, configs, this.#d.globals, applied);
  }

  /** The watched set (undefined digests: not tracked), and the named configs it holds unreferenced. */
  #watched(t: TrackedWorkload): { digests: Record<string, string> | undefined; unreferenced: string[] } {
    const s = this.#watchedSet(t);
    for (const p of s.problems) void this.#event(t, 'ReloadConfigInvalid', p, 'Warning');
    return { digests: isTracked(s) ? s.digests : undefined, unreferenced: s.unreferenced };
  }

  async #onBatch(b: Batch): Promise<void> {
    const { state, ledger, log } = this.#d;
    const t = state.workloads.get(b.workload);
    // What each line below decided is about these changes: the configs and the versions judged.
    const changes = { configs: b.configs, resourceVersions: versionsOf(state, b.configs) };
    if (!t || !this.#d.inScope(t.rec.ref.namespace)) {
      log.debug({ workload: b.workload, ...changes }, 'change ignored: the workload is gone or not in scope');
      return;
    }
    if (t.parsed.problems.length > 0) {
      log.info({ ...fields(t), ...changes }, 'change ignored: invalid reload annotations');
      return;
    }
    const watched = this.#watched(t);
    const set = watched.digests ?? {};
    // An entry about an older object of this name (its removal was refused when that one was deleted)
    // says nothing of one created while this term watched: it is judged as new, and its baseline
    // replaces that entry (simulation seed 24741).
    const recorded = this.#createdHere.has(t.id)
      ? ofThisObject(ledger.get(t.id), t.rec.ref.uid)
      : ledger.get(t.id);
    // A baseline the ledger refused still says what the pods read: a change since is one (seed 12045).
    const refused = recorded ? undefined : this.#refused.get(t.id);
    const entry = recorded ?? (refused && { configs: refused });
    // --reload-on-create: a named config the template does not use, whose event made this batch, is
    // a change when it first appears (Reloader's create handler); otherwise it is recorded.
    const created = this.#d.cfg.reloadOnCreate
      ? watched.unreferenced.filter((c) => b.configs.includes(c))
      : [];
    const v = batchVerdict(this.#d, t.id, set, entry?.configs, created);
    try {
      switch (v.kind) {
        case 'baseline':
          if (Object.keys(set).length === 0) {
            log.debug({ ...fields(t), ...changes }, 'no reload: the workload reloads on none of its configs');
            return;
          }
          this.#refused.set(t.id, set);
          await ledger.put(t.id, { configs: set });
          this.#refused.delete(t.id);
          log.info({ ...fields(t), ...changes }, 'baseline recorded');
          return;
        case 'rebaseline':
          await ledger.put(t.id, { ...entry, configs: v.record });
          this.#refused.delete(t.id);
          log.info(
            { ...fields(t), ...changes, added: v.added, removed: v.removed },
            'watched configs changed; recorded',
          );
          return;
        case 'none':
          if (refused) await ledger.put(t.id, { configs: refused }).then(() => this.#refused.delete(t.id));
          this.#d.metrics?.reloader.skipped('no_data_change');
          log.info(
            { ...fields(t), ...changes, ...(v.deleted.length > 0 ? { deleted: v.deleted } : {}) },
            'no reload needed',
          );
          return;
        case 'reload':
          this.#d.metrics?.reloader.workloadMatched(t.rec.ref.kind);
          this.#submit({
            workload: t.id,
            changed: v.changed,
            cutoffMs: plannedCutoff(this.#d, b, v.changed, this.#newest.get(t.id)?.cutoffMs),
            target: set,
            changeRV: changeRV(this.#d.state, v.changed),
            // The same content as a held pending reload: that one goes on, with its pod snapshot.
            ...(this.#inFlight.has(t.id) ? {} : resumeHeld(entry, set)),
            ...(b.via ? { via: b.via } : {}),
          });
      }
    } catch (err) {
      // Unrecorded, a later change of a config it adds would pass for new and reload nothing: retry.
      log.error({ ...fields(t), err: (err as Error).message }, 'could not record the ledger; retrying');
      this.#room.arm(() => this.#live && this.#judgeAfresh(t.id), retryDelayMs(1));
    }
  }

  /**
   * Queues a reload, unless one for the same content is already queued, running or waiting to be
   * retried: its cutoff is earlier, and every pod created after it already has this content, so a
   * second reload would only recycle pods twice (e.g. a held sync released just after a new leader's
   * start found the same change). The same content is what either would record: a config deleted, or
   * deleted and created again with the data last applied, differs in digest but not in what the pods
   * run, and its event must not plan a second reload with a cutoff taken from it (simulation seeds
   * 749, 1895).
   */
  #submit(planned: ReloadAction): void {
    const w = this.#d.state.workloads.get(planned.workload)?.rec.ref;
    const a = planned.uid || !w?.uid || w.kind === 'Job' ? planned : { ...planned, uid: w.uid };
    const current = this.#inFlight.get(a.workload);
    if (current && !a.resumed && this.#sameContent(a.workload, current, a.target)) {
      this.#d.log.debug(
        { workload: a.workload, configs: a.changed, changeRV: a.changeRV },
        'a reload for this content is already under way',
      );
      return;
    }
    const newest = this.#newest.get(a.workload);
    if (!newest || compareRecency(a, newest) >= 0) {
      this.#newest.set(a.workload, { cutoffMs: a.cutoffMs, changeRV: a.changeRV });
      this.#inFlight.set(a.workload, a.target);
    }
    if (!this.#queuedAt.has(a.workload)) this.#queuedAt.set(a.workload, performance.now());
    this.#d.metrics?.reloader.queueAdded();
    const go = this.#gates.admit(a);
    if (go) this.#enqueue(go);
  }

  #enqueue(a: ReloadAction): void {
    this.#queue.submit(this.#room.enqueue(this.#windows.apply(a)));
  }

  /** Whether two targets record the same thing against the workload's ledger entry (see recordable). */
  #sameContent(workload: string, x: Record<string, string>, y: Record<string, string>): boolean {
    const applied = this.#d.ledger.get(workload)?.configs;
    const opts = { reloadOnDelete: this.#d.cfg.reloadOnDelete };
    return same(recordable(x, applied, opts), recordable(y, applied, opts));
  }

  /** Runs one action and forgets its content once nothing more will run for it. */
  async #runTracked(a: ReloadAction): Promise<void> {
    this.#running.add(a.workload);
    this.#windows.started(a.workload);
    this.#book.started(a);
    // Only this run's own retry keeps its content in flight: an older action's retry timer (it will
    // find itself superseded) must not, or this content would count as under way forever.
    let outcome: Outcome = { kind: 'interrupted' };
    try {
      outcome = await this.#step(a);
      this.#gates.ended(a, outcome);
      await this.#settle(a, outcome);
    } finally {
      this.#book.ended(a, outcome);
      const retried = outcome.kind === 'retry';
      this.#running.delete(a.workload);
      if (!retried) this.#forgetContent(a.workload, a.target);
      await forgetIfGone(this.#d, a.workload);
    }
  }

  /**
   * What the engine does now: reloads running, waiting and why, halts, the last done (engine/status.ts).
   * Three sources: the waiting room's table, and before the batch the batcher and the sync gates.
   */
  status(): ReloadStatus {
    return this.#book.status({
      room: this.#room.table(),
      debouncing: this.#batcher.open(),
      syncHeld: this.#d.gate?.held?.() ?? [],
    });
  }

  /** A batch that judges the workload against the ledger, as for a new one (no config named). */
  #judgeAfresh(workload: string): void {
    this.#batcher.add({ workload, config: 'workload', observedAt: this.#timers.now(), debounceMs: 0 });
  }

  #forgetContent(workload: string, target: Record<string, string>): void {
    const current = this.#inFlight.get(workload);
    if (current && same(current, target)) this.#inFlight.delete(workload);
  }

  /** Decides what the action the queue handed over does, and runs it when it runs. */
  async #step(a: ReloadAction): Promise<Outcome> {
    const { state, ledger } = this.#d;
    const queuedAt = this.#queuedAt.get(a.workload);
    this.#queuedAt.delete(a.workload);
    if (queuedAt !== undefined) this.#d.metrics?.reloader.queueLatency((performance.now() - queuedAt) / 1000);
    const t = state.workloads.get(a.workload);
    // A halt since it was queued keeps it (it waits with the halt's other reloads).
    if (!this.#gates.atRun(a)) return { kind: 'dropped', reason: HELD_BY_HALT };
    const held = this.#holds.action(a.workload);
    const d = decide({
      workload: t,
      tracked:
        t !== undefined &&
        isTracked(watchedSet(t.rec, t.parsed, state, this.#d.globals, ledger.get(a.workload)?.configs)),
      action: a,
      newest: this.#newest.get(a.workload),
      recorded: this.#recorder.recorded(a.workload),
      ...(held ? { held } : {}),
      now: this.#timers.now(),
    });
    switch (d.kind) {
      case 'forget':
        await ledger.remove(a.workload).catch(() => undefined);
        return { kind: 'dropped', reason: 'the workload is gone' };
      case 'drop':
        await dropReload(this.#d, t as TrackedWorkload, this.#signal);
        return { kind: 'dropped', reason: 'the workload is no longer reloaded' };
      case 'superseded': {
        const at = {
          ...fields(t as TrackedWorkload),
          configs: a.changed,
          changeRV: a.changeRV,
          cutoff: new Date(a.cutoffMs).toISOString(),
        };
        this.#d.log.info(at, `reload superseded by ${d.by}; not run`);
        if (d.by === 'a new object of the same name') {
          // Judged on its own, like any new workload: its first batch found this one in flight.
          this.#inFlight.delete(a.workload);
          this.#judgeAfresh(a.workload);
        }
        return { kind: 'dropped', reason: `superseded by ${d.by}` };
      }
      case 'hold':
        return { kind: 'hold', until: d.until, action: a, windowText: d.windowText };
      case 'run': {
        this.#holds.release(a.workload);
        const failures = this.#room.failures(a.workload);
        const run = { d: this.#d, recorder: this.#recorder, signal: this.#signal, failures };
        const onWait = (why: RunWait, on: boolean) => this.#book.waiting(a.workload, why, on);
        const ctl = new AbortController();
        this.#cuts.set(a.workload, { action: d.action, ctl });
        try {
          return await runReload({ ...run, onWait, cut: ctl.signal }, t as TrackedWorkload, d.action);
        } finally {
          this.#cuts.delete(a.workload);
        }
      }
    }
  }

  /** The one place where how a run ended becomes a timer (a retry, a hold until a window opens) or a record. */
  async #settle(a: ReloadAction, o: Outcome): Promise<void> {
    switch (o.kind) {
      case 'done':
        this.#room.succeeded(a.workload);
        return;
      case 'retry':
        this.#room.retry(a.workload, o.afterMs, o.failed, () => {
          // A newer change was submitted meanwhile: it covers this one, whose target is older.
          if (isOlder(o.action, this.#newest.get(a.workload)))
            return this.#forgetContent(a.workload, a.target);
          this.#submit({ ...o.action, resumed: true, ...(o.targets ? { targets: o.targets } : {}) });
        });
        return;
      case 'hold': {
        const t = this.#d.state.workloads.get(a.workload);
        return t && this.#holds.hold(t, o.action, o.until, o.windowText);
      }
      case 'config-missing':
        // No timer: the config's return is a change event, judged against the ledger (docs/adr/0024).
        return recordMissing(this.#d, o.action, o.missing);
      case 'dropped':
      case 'interrupted':
        return;
    }
  }
}
