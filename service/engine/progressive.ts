// Progressive reloads in the engine (docs/progressive-reloads.md). The reconciler asks `parks` before it
// queues a reload, and tells `ended` how a run ended; the waves themselves are core/waves.ts. The
// reloads that wait for their wave or are held by a halted change wait in the waiting room
// (engine/waiting-room.ts), which also arms its timers (gathering, settling, deadlines). This reads
// the pods' health through the StrategiesPort, and reports halts: a Warning Event on the config and
// on each workload held, a log line and metrics.

import { KEYS } from '../core/annotations.ts';
import { type HaltRecord, haltEnded, haltedWithChanged, MAX_HALTED_WITH } from '../core/halt-record.ts';
import { haltWhy } from '../core/ledger-entry.ts';
import { notJudgedAtAdmission, replacementsFailed } from '../core/pod-health.ts';
import type { ConfigRecord } from '../core/records.ts';
import type { CutReason, Outcome, ReloadAction } from '../core/reload-action.ts';
import { configId, configRefOf } from '../core/types.ts';
import { type ChangeKey, type Excused, type Halt, Waves, waveOrder } from '../core/waves.ts';
import { apiVersionOf } from '../kube/events.ts';
import type { TrackedWorkload } from '../state.ts';
import type { ReconcilerDeps } from './deps.ts';
import { display, emitOn, fields } from './report.ts';
import type { WaitingRoom } from './waiting-room.ts';

const CONFIG_KINDS = ['ConfigMap/', 'Secret/', 'SecretProviderClass/'];

/** The config changes a reload carries (a request or a new workload's first judgement carries none). */
export function changesOf(a: ReloadAction): ChangeKey[] {
  return a.changed
    .filter((c) => CONFIG_KINDS.some((k) => c.startsWith(k)))
    .map((c) => ({ config: c, digest: a.contents?.[c] ?? a.target[c] ?? DELETED }));
}

const DELETED = 'deleted';

/**
 * Whether the workload's reloads take part in the waves: it did not opt out, and its strategy is
 * `restart`, whose pods the service replaces and can judge. An `annotate` reload hands the rollout
 * to the workload's controller and a `git` reload to Argo CD's next sync: neither has replaced a pod
 * when it completes, so there is nothing to settle (docs/progressive-reloads.md).
 */
export function inWaves(t: TrackedWorkload): boolean {
  return t.parsed.policy.progressive && t.parsed.policy.strategy === 'restart';
}

export interface ProgressiveOptions {
  /** Queues a reload whose wave opened. */
  release(a: ReloadAction): void;
  /** A parked reload will not run: the reconciler forgets its content (it is no longer under way). */
  forget(a: ReloadAction): void;
  /**
   * Stops the workload's running reload, if the one running is one `carries` says (its surge pods are
   * removed; a halted one is retried, and held; a superseded one is dropped).
   */
  /** Stops the workload's running reload when it carries what `carries` says; true when it did. */
  cut(workload: string, why: CutReason, carries: (a: ReloadAction) => boolean): boolean;
  /** Whether the workload's reload runs now (an action of it is under way, not parked or queued). */
  running?(workload: string): boolean;
  /** Aborts when the term ends. */
  signal: AbortSignal;
  /** Keeps the reloads waiting for a wave or held by a halt, and arms every timer (engine/waiting-room.ts). */
  room: WaitingRoom;
}

/** Whether an action carries any of these changes, at these contents. */
const carriesAny = (changes: readonly ChangeKey[]) => (a: ReloadAction) =>
  changesOf(a).some((c) => changes.some((k) => k.config === c.config && k.digest === c.digest));

/** The reason of a reload the queue handed over that a halt now holds (Progressive.atRun). */
export const HELD_BY_HALT = 'held: a change it carries was halted since it was queued';

export class Progressive {
  readonly #d: ReconcilerDeps;
  readonly #o: ProgressiveOptions & { settleMs: number };
  readonly #waves: Waves;
  /** Per workload: its pod template when its reload last started (see #judgeStall). */
  readonly #template = new Map<string, string>();
  /** Per workload: a number that moves on each time its reload starts or settles (see #settle). */
  readonly #gen = new Map<string, number>();
  /** `workload config digest` of every halt already reported on that workload. */
  readonly #told = new Set<string>();
  #wakeAt = Number.POSITIVE_INFINITY;
  readonly #detach: (() => void) | undefined;

  /** The progressive reloads of --progressive-reloads, or undefined when it is off. */
  static of(d: ReconcilerDeps, o: ProgressiveOptions): Progressive | undefined {
    const p = d.cfg.progressive;
    return p && new Progressive(d, { ...o, ...p });
  }

  constructor(
    d: ReconcilerDeps,
    o: ProgressiveOptions & { firstWave: number; settleMs: number; gatherMs: number },
  ) {
    this.#d = d;
    this.#o = o;
    this.#waves = new Waves({ firstWave: o.firstWave, gatherMs: o.gatherMs });
    this.#detach = d.metrics?.progressiveFrom(() => {
      const held = [...this.parked()].filter((p) => p.halted).length;
      return { halted: this.#waves.halts().length, wave: o.room.count('wave') - held, halt: held };
    });
  }

  /**
   * Holds again the changes a previous term halted, as the ledger's halt records say (and, from
   * before ADR 0042, a halt kept on a workload's entry, which moves to a record of its own). A halt
   * whose config changed or was deleted meanwhile has ended: its record is removed.
   */
  restore(): void {
    const records = new Map(this.#d.ledger.halts().map((h) => [h.config, h]));
    for (const [workload, e] of this.#d.ledger.entries()) {
      const h = e.halt;
      if (!h) continue;
      const { halt: _legacy, ...rest } = e;
      const moved: HaltRecord = { ...h, workload, ...this.#uidOf(h.config) };
      if (!records.has(h.config)) {
        records.set(h.config, moved);
        this.#keep(this.#d.ledger.putHalt(moved), `the halt of ${h.config}`);
      }
      this.#keep(this.#d.ledger.put(workload, rest), `the entry of ${workload} without its old halt`);
    }
    for (const h of records.values()) {
      const c = this.#d.state.configs.get(h.config);
      const ended = haltEnded(h, c && { digest: c.digest.all, ...(c.uid ? { uid: c.uid } : {}) });
      const withChanged = haltedWithChanged(h, (id) => this.#d.state.configs.get(id)?.digest.all);
      if (!ended && withChanged) {
        this.#d.log.info(
          { config: display(h.config), wave: h.wave, haltedAt: h.at, with: display(withChanged) },
          'progressive reload halt ended: a change halted with it changed while the service was down',
        );
        this.#keep(this.#d.ledger.removeHalt(h.config), `the end of the halt of ${h.config}`);
        continue;
      }
      if (ended) {
        this.#d.log.info(
          { config: display(h.config), wave: h.wave, haltedAt: h.at, ended },
          ended === 'deleted'
            ? 'progressive reload halt ended: the config was deleted while the service was down'
            : 'progressive reload halt ended: the config changed while the service was down',
        );
        this.#keep(this.#d.ledger.removeHalt(h.config), `the end of the halt of ${h.config}`);
        continue;
      }
      this.#waves.restore(
        {
          config: h.config,
          digest: h.digest,
          wave: h.wave,
          workload: h.workload,
          why: h.why,
          atMs: Date.parse(h.at),
          ...(h.with ? { with: h.with } : {}),
        },
        Date.parse(h.cutoff),
      );
      this.#d.log.info(
        { workload: h.workload, config: display(h.config), wave: h.wave, haltedAt: h.at },
        'progressive reload halt restored from the ledger: nothing more starts for this change',
      );
    }
  }

  /** The config's uid as the cache holds it, for its halt record. */
  #uidOf(config: string): { uid?: string } {
    const uid = this.#d.state.configs.get(config)?.uid;
    return uid ? { uid } : {};
  }

  /** Logs a ledger write about a halt that failed (it is retried by the next halt, resume or start). */
  #keep(write: Promise<void>, what: string): void {
    void write.catch((err: Error) =>
      this.#d.log.error({ err: err.message }, `could not record ${what} in the ledger`),
    );
  }

  /** The halt ended (resumed, superseded, the config deleted): its record goes. */
  #endHalt(h: Halt): void {
    this.#keep(this.#d.ledger.removeHalt(h.config), `that the halt of ${h.config} ended`);
  }

  /**
   * The config's gitops-reloader.io/progressive-resume annotation got a new value: its halted change
   * continues. Whoever may edit the config may resume it; it reaches no other config's change.
   */
  resume(config: ConfigRecord): void {
    const id = configId(config.ref);
    const halt = this.#waves.resume(id);
    if (!halt) return;
    for (const key of [...this.#told]) if (key.endsWith(` ${id} ${halt.digest}`)) this.#told.delete(key);
    this.#endHalt(halt);
    this.#d.log.info({ config: display(id), wave: halt.wave }, 'progressive reload resumed');
    const r = config.ref;
    void this.#d.events.emit(
      {
        apiVersion: apiVersionOf(r.kind),
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
        ...(config.uid ? { uid: config.uid } : {}),
      },
      'ReloadResumed',
      `the halted change (wave ${halt.wave}, ${halt.why}) continues: ${KEYS.progressiveResume} was set`,
    );
    this.#reoffer();
  }

  /**
   * The reload to queue now, or undefined when it must wait: for its wave, or because a halt holds it
   * (then it is kept, and queued through `release` when its wave opens).
   */
  admit(planned: ReloadAction): ReloadAction | undefined {
    const a = this.#stamp(planned);
    const t = this.#d.state.workloads.get(a.workload);
    const changes = changesOf(a);
    if (!t || !inWaves(t) || changes.length === 0) return a;
    // Planned for content the config no longer has (a retry after a revert or a newer change): the
    // workload's batch for the config's content now plans what is needed, and a revert needs nothing.
    const gone = changes.find(
      (c) => c.digest !== (this.#d.state.configs.get(c.config)?.digest.all ?? DELETED),
    );
    if (gone) {
      this.#unpark(a.workload);
      this.#o.forget(a);
      this.#notRun(a, gone.config);
      return undefined;
    }
    // Judge only what the change does: a workload whose pods are already unhealthy, or whose own
    // rollout runs, cannot be judged for it (core/pod-health.ts notJudgedAtAdmission).
    const now = this.#o.room.now();
    const admitted = this.#waves.admittedAt(a.workload, changes);
    const member = admitted !== undefined;
    // A member's pods may be unhealthy by this engine's own doing (its reload for them was cut when
    // another config changed): a change joining it is judged with them, not excused by that.
    const notJudged = member ? undefined : notJudgedAtAdmission({ kind: t.rec.ref.kind, ...t.rec });
    const o = this.#waves.offer(
      {
        workload: a.workload,
        changes,
        cutoffMs: a.cutoffMs,
        expected: (c) => this.#expected(c),
        ...(notJudged !== undefined ? { notJudged } : {}),
      },
      now,
    );
    switch (o.kind) {
      case 'run': {
        this.#unpark(a.workload);
        // A retry of a member keeps the template its first admission saw: an own rollout begun since
        // (stuck on another change's bad content) says nothing of the changes it was admitted for.
        if (!member || !this.#template.has(a.workload)) this.#template.set(a.workload, t.rec.templateHash);
        if (!this.#waves.judging(a.workload, changes)) {
          // Not judged for this change: a settle due for an older one goes on (it is not replaced).
          this.#tellExcused(t, changes);
          return a;
        }
        // Its pods still settling for other changes are replaced now: not judged for those.
        const given = this.#waves.unsettle(
          a.workload,
          changes,
          'a reload for another change replaced its pods before they settled',
          now,
        );
        if (given.length > 0) {
          this.#d.log.info(
            { ...fields(t), configs: given.map(display) },
            'progressive reload: a reload for another change replaces the pods settling for these; not judged for them',
          );
          this.#reoffer();
        }
        const gen = this.#bump(a.workload);
        // Its new pods are those created since its first admission, whichever attempt made them.
        const since = this.#waves.admittedAt(a.workload, changes) ?? now;
        this.#watchRun(a, gen, since, this.#o.settleMs);
        return a;
      }
      case 'wait':
        this.#park(a);
        // A member (a retry that now carries another change, waiting for that one's wave to open,
        // not for a gathering) keeps its deadline, so it never holds its first change's wave for
        // ever (a canary failing fast, parked behind another change's canary: execution simulation).
        if (admitted !== undefined && o.until === undefined) this.#deadline(a, admitted);
        if (o.until !== undefined) this.#wake(o.until);
        return undefined;
      case 'halted':
        this.#park(a);
        this.#tellHeld(t, o.halt);
        return undefined;
      case 'stale':
        // A newer change of the config has its own progression: this older reload is covered by it.
        this.#unpark(a.workload);
        this.#o.forget(a);
        this.#d.log.info(
          { ...fields(t), config: display(o.config) },
          'reload superseded by a newer change; not run',
        );
        return undefined;
    }
  }

  /**
   * The queue hands over a reload admitted earlier: a change it carries may have been halted since
   * (a retry queued behind --min-reload-interval while another workload failed the wave). Then it is
   * kept as a reload the halt holds, not run (engine simulation seed 196 with broken contents).
   * Returns the reload to run, or undefined.
   */
  atRun(a: ReloadAction): ReloadAction | undefined {
    const t = this.#d.state.workloads.get(a.workload);
    if (!t || !inWaves(t)) return a;
    const halt = this.#waves.haltOf(changesOf(a));
    if (!halt) return a;
    this.#park(a);
    this.#tellHeld(t, halt);
    return undefined;
  }

  /**
   * A parked member at its deadline (counted from its first admission), if it is still parked: it
   * made no progress for the changes it was admitted for while it waited for another change's wave,
   * and what its pods show now is not theirs alone. Not judged for them: it holds none of their
   * waves, and the next workload takes its place.
   */
  #deadline(a: ReloadAction, admittedMs: number): void {
    const at = admittedMs + this.#d.cfg.reloadDeadlineMs;
    this.#later(
      () => {
        const parked = this.#o.room.waitingOf(a.workload, 'wave');
        if (!parked || this.#o.running?.(a.workload)) return;
        if (this.#waves.admittedAt(a.workload, changesOf(parked)) !== admittedMs) return;
        const t = this.#d.state.workloads.get(a.workload);
        const why = 'parked behind another change past its deadline: not judged for this one';
        const configs = this.#waves.exempt(a.workload, why, this.#o.room.now());
        if (!t || configs.length === 0) return;
        this.#d.log.info(
          { ...fields(t), configs: configs.map(display) },
          'progressive reload: it waited for another change past its deadline; not judged for the changes it was admitted for, and it holds no wave',
        );
        this.#reoffer();
      },
      Math.max(0, at - this.#o.room.now()),
    );
  }

  /** The workloads in the waves a config's change may concern (those that read it and take part). */
  #expected(config: string): number {
    // A deleted config has no record: its reference comes from its id.
    return this.#d.state.affectedBy(configRefOf(config)).filter((w) => {
      const t = this.#d.state.workloads.get(w);
      return t !== undefined && inWaves(t);
    }).length;
  }

  /** The content of each config the action changes, as the caches hold it now (when it is planned). */
  #stamp(a: ReloadAction): ReloadAction {
    const missing = a.changed.filter(
      (c) => a.contents?.[c] === undefined && CONFIG_KINDS.some((k) => c.startsWith(k)),
    );
    if (missing.length === 0) return a;
    const contents = { ...a.contents };
    for (const c of missing) contents[c] = this.#d.state.configs.get(c)?.digest.all ?? DELETED;
    return { ...a, contents };
  }

  /**
   * A config's data changed (or it was deleted): a progression of other content is over. A reload held
   * or waiting for that content will not run (its workload's next batch plans what is needed now, and
   * a revert to the content its pods run needs none), and a halt of it is lifted.
   */
  configChanged(config: string, digest: string | undefined): void {
    const now = digest ?? DELETED;
    const at = this.#o.room.now();
    const { halt: lifted, running, settling, alsoLifted } = this.#waves.supersede(config, now, at);
    // A workload settling after a reload that carried the superseded content: its pods read it, so
    // they are not judged for the other changes that reload carried (engine simulation seed 2894 with
    // broken contents: a good change halted by pods that read a bad content since replaced).
    for (const w of settling) {
      const given = this.#waves.unsettle(
        w,
        [],
        `its pods read ${display(config)} as it was before a newer change`,
        at,
      );
      if (given.length === 0) continue;
      this.#bump(w);
      const t = this.#d.state.workloads.get(w);
      if (t)
        this.#d.log.info(
          { ...fields(t), configs: given.map(display), config: display(config) },
          'progressive reload: its pods read a content since replaced; not judged for the other changes its reload carried',
        );
    }
    // A reload of content no longer current stops now and gives back its slot: the newer change's
    // reload of the same workload must not wait for it (nor be judged by it).
    const cut: string[] = [];
    for (const w of running) {
      const stopped = this.#o.cut(w, { kind: 'superseded', config }, (a) => {
        const c = changesOf(a).find((k) => k.config === config);
        return c !== undefined && c.digest !== now;
      });
      if (stopped) cut.push(w);
    }
    // So does a reload of another change of a workload that reads this config: the pods it creates
    // from now on read the new content, and would be judged for the other change (a good change was
    // halted by the pods of a bad change of another config written mid-reload: execution simulation).
    // The workload's next batch plans one reload with both. (A deletion is no new content: pods do
    // not start without a config they need, and its return with the same data changes nothing.)
    for (const w of digest === undefined ? [] : this.#d.state.affectedBy(configRefOf(config))) {
      const t = this.#d.state.workloads.get(w);
      if (!t || !inWaves(t)) continue;
      const stopped = this.#o.cut(w, { kind: 'superseded', config }, (a) => {
        const had = a.contents?.[config] ?? a.target[config];
        return had !== undefined && had !== now;
      });
      if (stopped) cut.push(w);
    }
    // The pods those reloads created read this config's older content: they say nothing of the other
    // changes the reloads carried, which are judged by the pods created from now on (a good change was
    // halted by the pods of a cut reload that read a bad content since fixed: engine simulation seed
    // 642 with broken contents).
    for (const w of cut) {
      this.#bump(w);
      this.#waves.rejudgeFrom(w, at);
    }
    for (const a of this.#o.room.waiting('wave')) {
      const c = changesOf(a).find((k) => k.config === config);
      if (!c || c.digest === now) continue;
      this.#unpark(a.workload);
      this.#waves.forget(a.workload);
      this.#o.forget(a);
      this.#notRun(a, config);
    }
    if (lifted) {
      this.#endHalt(lifted);
      this.#d.log.info(
        { config: display(config), wave: lifted.wave },
        'progressive reload halt lifted: the config changed since',
      );
    }
    // Changes halted with this one (the same failed reload): which of them failed cannot be told, so
    // they go on in their waves, judged by the next workloads (docs/adr/0045).
    for (const h of alsoLifted) {
      this.#endHalt(h);
      this.#d.log.info(
        { config: display(h.config), wave: h.wave, with: display(config) },
        'progressive reload halt lifted: it was halted with a change of another config, which changed since',
      );
    }
    if (alsoLifted.length > 0 || settling.length > 0) this.#reoffer();
  }

  #notRun(a: ReloadAction, config: string): void {
    const [kind, namespace, ...name] = a.workload.split('/');
    this.#d.log.info(
      { workload: `${kind}/${name.join('/')}`, namespace, config: display(config) },
      'reload not run: the config changed since it was planned',
    );
  }

  /** How a queued reload's run ended (or what was decided instead of running it). */
  ended(a: ReloadAction, o: Outcome): void {
    if (!this.#d.state.workloads.has(a.workload)) this.#gone(a.workload);
    switch (o.kind) {
      case 'done':
        if (this.#waves.completed(a.workload, a.cutoffMs)) this.#settle(a, this.#o.settleMs);
        break;
      case 'retry': {
        // Only a reload that made no progress fails its wave: an API error is retried, as it would be
        // without waves, and says nothing about the config.
        if (o.stalled) {
          this.#judgeStall(a);
          return;
        }
        const t = this.#d.state.workloads.get(a.workload);
        if (o.waiting) {
          // It waits for something that passes by itself (a CronJob's Job under Forbid, for hours):
          // nothing was written, nothing can be judged, and it must not hold everyone else's reload.
          if (t && this.#waves.excuse(a.workload)) {
            this.#d.log.info(
              fields(t),
              'progressive reload: it waits for something else; not judged now, and it holds no wave',
            );
            this.#reoffer();
          }
          return;
        }
        // Every member has a deadline across its retries: one that fails fast for ever (a quota that
        // refuses its new pods) is judged as one that made no progress.
        const since = this.#waves.admittedAt(a.workload, changesOf(a));
        if (o.failed && since !== undefined && this.#o.room.now() - since >= this.#d.cfg.reloadDeadlineMs)
          this.#judgeStall(a);
        return;
      }
      case 'dropped':
        // A newer action of the workload carries on its place in the wave; one held by a halt keeps it.
        if (o.reason.startsWith('superseded by a newer change') || o.reason === HELD_BY_HALT) return;
        this.#waves.forget(a.workload);
        break;
      case 'hold':
      case 'config-missing':
        this.#waves.forget(a.workload);
        break;
      case 'interrupted':
        return;
    }
    this.#reoffer();
  }

  /** The reloads waiting in the room for their wave, or held by a halt. */
  *parked(): Iterable<{ action: ReloadAction; halted: boolean }> {
    for (const action of this.#o.room.waiting('wave')) yield { action, halted: this.halted(action) };
  }

  /** Whether a halted change holds this reload (derived, not kept: a halt lifted frees it at once). */
  halted(a: ReloadAction): boolean {
    return this.#waves.haltOf(changesOf(a)) !== undefined;
  }

  halts(): Halt[] {
    return this.#waves.halts();
  }

  /** The workloads excused at admission from the changes under way, and why. */
  excused(): Excused[] {
    return this.#waves.excused();
  }

  /** Says once per change that the workload is not judged for it, and why. */
  #tellExcused(t: TrackedWorkload, changes: readonly ChangeKey[]): void {
    for (const e of this.#waves.excused()) {
      if (e.workload !== t.id || !changes.some((c) => c.config === e.config)) continue;
      const digest = changes.find((c) => c.config === e.config)?.digest;
      const key = `${t.id} ${e.config} ${digest} excused`;
      if (this.#told.has(key)) continue;
      this.#told.add(key);
      this.#d.log.info(
        { ...fields(t), config: display(e.config), why: e.why },
        'progressive reload: not judged for this change; the next workload takes its place in the wave',
      );
    }
  }

  /**
   * Judges a running reload's new pods as they come, not only at its end: one that restarted, or that
   * runs and is not Ready within the settle time, fails the change now (with the Warning naming the
   * config), and the reload stops and gives back its slot. Without this a canary waits for a pod that
   * will never be Ready until --reload-deadline, and a fix written meanwhile waits behind it.
   */
  #watchRun(a: ReloadAction, gen: number, sinceMs: number, afterMs: number): void {
    const changes = changesOf(a);
    const still = () => this.#gen.get(a.workload) === gen && this.#waves.judging(a.workload, changes);
    this.#later(() => {
      const t = this.#d.state.workloads.get(a.workload);
      if (!still() || !t) return;
      // Its owner's own rollout replaces pods meanwhile: its pods say nothing of the config.
      if (t.rec.templateHash !== this.#template.get(a.workload)) return;
      this.#d.strategies.pods(t, this.#o.signal).then(
        (pods) => {
          if (!still() || pods === undefined) return;
          const now = this.#o.room.now();
          const v = replacementsFailed(pods, sinceMs, now, this.#o.settleMs);
          if (v.failed) {
            const why = `its new pods were not healthy within the settle time (${this.#o.settleMs / 1000}s): ${v.failed.why}`;
            this.#fail(a, why, v.failed.pods);
            this.#o.cut(a.workload, { kind: 'halted', why }, carriesAny(changes));
            return;
          }
          const next = v.againAt ?? now + Math.min(this.#o.settleMs, 5_000);
          this.#watchRun(a, gen, sinceMs, Math.max(250, next - now));
        },
        (err: Error) => {
          if (!still()) return;
          this.#d.log.warn(
            { ...fields(t), err: err.message },
            'could not read the pods of a running reload; asking again',
          );
          this.#watchRun(a, gen, sinceMs, Math.max(1_000, Math.min(this.#o.settleMs, 5_000)));
        },
      );
    }, afterMs);
  }

  stop(): void {
    this.#detach?.();
  }

  /** Forgets what it kept of a workload that is gone (its memory stays bounded by live workloads). */
  #gone(workload: string): void {
    this.#gen.delete(workload);
    this.#template.delete(workload);
    for (const key of this.#told) if (key.startsWith(`${workload} `)) this.#told.delete(key);
  }

  #bump(workload: string): number {
    const next = (this.#gen.get(workload) ?? 0) + 1;
    this.#gen.set(workload, next);
    return next;
  }

  /** The reload waits in the room for its wave, or for a halt of a change it carries to end. */
  #park(a: ReloadAction): void {
    this.#o.room.wait(a, 'wave');
  }

  #unpark(workload: string): void {
    this.#o.room.leave(workload, 'wave');
  }

  /** A wait of the waves (gathering, settling, a deadline), armed in the room (cleared with the term). */
  #later(fn: () => void, ms: number): void {
    this.#o.room.arm(() => {
      if (!this.#o.signal.aborted) fn();
    }, ms);
  }

  /** Offers the parked reloads again at `at` (a change's gathering ends). */
  #wake(at: number): void {
    if (at >= this.#wakeAt) return;
    this.#wakeAt = at;
    this.#later(
      () => {
        if (this.#wakeAt === at) this.#wakeAt = Number.POSITIVE_INFINITY;
        this.#reoffer();
      },
      Math.max(0, at - this.#o.room.now()),
    );
  }

  /** Offers every parked reload again, in wave order; those admitted are queued. */
  #reoffer(): void {
    const order = this.#o.room
      .waiting('wave')
      .map((a) => ({
        a,
        workload: a.workload,
        priority: this.#d.state.workloads.get(a.workload)?.parsed.policy.priority ?? 0,
      }))
      .sort(waveOrder);
    for (const { a } of order) {
      if (!this.#d.state.workloads.has(a.workload)) {
        // Gone: queued all the same, so the engine's own rules decide, as for any reload of a gone
        // workload: its entry is forgotten, or a new object of its name is judged afresh (dropped
        // here, a workload deleted and created again while its reload ran lost its change: engine
        // simulation seed 5875 with --progressive-reloads).
        this.#unpark(a.workload);
        this.#waves.forget(a.workload);
        this.#o.release(a);
        continue;
      }
      const go = this.admit(a);
      if (go) this.#o.release(go);
    }
  }

  /**
   * Judges the workload's pods once they had `afterMs` to settle. A restart of a replacement fails
   * the wave at once. Pods not Ready may still be starting (a StatefulSet's reload completes at its
   * last eviction, before the pod comes back: execution simulation seed 104): they fail the wave only
   * when still not Ready --reload-deadline after the settle time, and are read again until then.
   */
  #settle(a: ReloadAction, afterMs: number, completedMs = this.#o.room.now()): void {
    // Only while nothing started for the workload since: a newer change's reload of it has its own
    // settle (an older timer judged it mid-reload for the newer one: execution simulation seed 28).
    const gen = this.#bump(a.workload);
    const current = () => this.#gen.get(a.workload) === gen;
    const template = this.#d.state.workloads.get(a.workload)?.rec.templateHash;
    this.#later(() => {
      if (!current()) return;
      const t = this.#d.state.workloads.get(a.workload);
      if (!t) {
        this.#waves.forget(a.workload);
        this.#gone(a.workload);
        return this.#reoffer();
      }
      if (t.rec.templateHash !== template) {
        // Its owner changed the pod template meanwhile: its own rollout replaces the pods, and a pod
        // of it not Ready yet says nothing of the config (execution simulation seed 73). The settle
        // starts again, over the rollout's pods.
        this.#d.log.info(
          fields(t),
          'progressive reload: its pod template changed while it settled; settling again',
        );
        return this.#settle(a, this.#o.settleMs);
      }
      this.#d.strategies.health(t, a.cutoffMs, this.#o.signal).then(
        (h) => {
          if (!current()) return;
          if (h === undefined) {
            const done = this.#waves.passed(a.workload, a.cutoffMs);
            this.#d.log.info(fields(t), 'progressive reload: the workload settled healthy');
            for (const c of done)
              this.#d.log.info(
                { config: display(c.config) },
                'progressive reload: the change reached every workload that reads it',
              );
            return this.#reoffer();
          }
          const giveUpAt = completedMs + this.#o.settleMs + this.#d.cfg.reloadDeadlineMs;
          const left = giveUpAt - this.#o.room.now();
          if (!h.restarted && left > 0) return this.#settle(a, Math.min(left, 5_000), completedMs);
          this.#fail(a, `its pods did not stay healthy for ${this.#o.settleMs / 1000}s: ${h.why}`, h.pods);
        },
        (err: Error) => {
          // Asked again only for the settle still due (a newer one's would be lost to this one:
          // execution simulation seed 1687).
          if (!current()) return;
          this.#d.log.warn(
            { ...fields(t), err: err.message },
            'could not read the pods’ health; asking again',
          );
          this.#settle(a, Math.max(1_000, this.#o.settleMs), completedMs);
        },
      );
    }, afterMs);
  }

  /**
   * The reload made no progress for --reload-deadline. A replacement that is not Ready (or restarts)
   * fails the wave: the config is what is wrong. With every pod healthy, something else holds it (a
   * PodDisruptionBudget, a slow node): not the config, and it goes on with its retry.
   */
  #judgeStall(a: ReloadAction): void {
    const t = this.#d.state.workloads.get(a.workload);
    if (!t) return;
    // Its owner changed the pod template since the reload started: the reload waits for that
    // rollout, whose pods starting say nothing of the config (execution simulation seed 637).
    if (!this.#waves.judging(a.workload, changesOf(a))) {
      this.#d.log.info(
        fields(t),
        'progressive reload: no progress, but it is not judged for this change; it holds no wave',
      );
      return;
    }
    const rollout = t.rec.templateHash !== this.#template.get(a.workload);
    this.#d.strategies.health(t, a.cutoffMs, this.#o.signal).then(
      (h) => {
        if (h !== undefined && !rollout)
          return this.#fail(a, `its reload made no progress for --reload-deadline: ${h.why}`, h.pods);
        // Something else holds it: it must not hold every other workload of the change (another
        // tenant's PodDisruptionBudget would stop everyone's reload). The next one takes its place.
        this.#d.log.info(
          fields(t),
          rollout
            ? 'progressive reload: no progress while its own template rollout runs; not a failed wave, and it holds no wave'
            : 'progressive reload: no progress, but its pods are healthy; not a failed wave, and it holds no wave',
        );
        if (this.#waves.excuse(a.workload)) this.#reoffer();
      },
      (err: Error) =>
        this.#d.log.warn(
          { ...fields(t), err: (err as Error).message },
          'could not read the pods’ health after a stall',
        ),
    );
  }

  /** A wave failed at this workload: halt the changes it carries, and say so. */
  #fail(a: ReloadAction, why: string, pods: readonly string[]): void {
    const t = this.#d.state.workloads.get(a.workload);
    const halts = this.#waves.failed(a.workload, changesOf(a), why, this.#o.room.now(), pods);
    if (!t || halts.length === 0) return;
    // Its surge pods never became Ready: remove them. Its old pods that were not replaced stay.
    void this.#d.strategies
      .dropSurgePods(t, this.#o.signal)
      .catch((err: Error) =>
        this.#d.log.warn({ ...fields(t), err: err.message }, 'could not remove surge pods'),
      );
    for (const h of halts) {
      void this.#reportHalt(t, h);
      void this.#record(a, h);
    }
    // Nothing more of a halted change reaches a workload: the other reloads carrying it that still
    // run (a member excused at admission, or of a later wave) stop too, and their retries are held.
    const halted = halts.map((h) => ({ config: h.config, digest: h.digest }));
    const at = `its change was halted at ${a.workload}`;
    for (const w of this.#waves.membersOf(halted))
      if (w !== a.workload) this.#o.cut(w, { kind: 'halted', why: at }, carriesAny(halted));
  }

  /**
   * Records the halt of each change the failed reload carried, keyed by the change (its config), not
   * on the workload's entry, which any later write of it would rewrite: a restart or a new leader
   * holds every one of them (docs/adr/0042).
   */
  async #record(a: ReloadAction, h: Halt): Promise<void> {
    const record: HaltRecord = {
      config: h.config,
      ...this.#uidOf(h.config),
      digest: h.digest,
      cutoff: new Date(a.cutoffMs).toISOString(),
      wave: h.wave,
      workload: a.workload,
      why: haltWhy(h.why),
      at: new Date(h.atMs).toISOString(),
      ...(h.with ? { with: h.with.slice(0, MAX_HALTED_WITH) } : {}),
    };
    try {
      await this.#d.ledger.putHalt(record);
    } catch (err) {
      this.#d.log.error(
        { workload: a.workload, config: display(h.config), err: (err as Error).message },
        'could not record the halt; a restart would start the change again from its first wave',
      );
    }
  }

  async #reportHalt(t: TrackedWorkload, h: Halt): Promise<void> {
    const d = this.#d;
    d.metrics?.progressiveHalted();
    const config = display(h.config);
    const held = this.#o.room.waiting('wave').filter((a) => a.changed.includes(h.config)).length;
    d.log.warn(
      { ...fields(t), config, wave: h.wave, why: h.why, held },
      'progressive reload halted: nothing more starts for this change',
    );
    const { kind, namespace, name } = configRefOf(h.config);
    const uid = d.state.configs.get(h.config)?.uid;
    const message =
      `change halted at wave ${h.wave}: ${t.rec.ref.kind}/${t.rec.ref.name} ${h.why}. ` +
      `Nothing more starts for it; ${held} workload(s) held. A new change of ${config} starts again from the first wave`;
    await d.events.emit(
      { apiVersion: apiVersionOf(kind), kind, namespace, name, ...(uid ? { uid } : {}) },
      'ReloadHalted',
      message,
      'Warning',
    );
    await emitOn(d.events)(
      t,
      'ReloadHalted',
      `the change of ${config} failed at this workload (wave ${h.wave}): ${h.why}; its surge pods are removed, its old pods stay`,
      'Warning',
    );
    for (const a of this.#o.room.waiting('wave')) {
      const w = d.state.workloads.get(a.workload);
      if (w && a.changed.includes(h.config)) this.#tellHeld(w, h);
    }
  }

  /** Says once per halt that the workload's reload is held by it (a Warning Event unless it failed it). */
  #tellHeld(t: TrackedWorkload, h: Halt): void {
    const key = `${t.id} ${h.config} ${h.digest}`;
    if (this.#told.has(key)) return;
    this.#told.add(key);
    this.#d.log.info(
      { ...fields(t), config: display(h.config), wave: h.wave },
      'reload held: its change was halted by a failed wave',
    );
    if (t.id === h.workload) return;
    const failed = h.workload.split('/');
    void emitOn(this.#d.events)(
      t,
      'ReloadHalted',
      `held: the change of ${display(h.config)} was halted at wave ${h.wave} (${failed[0]}/${failed[2]} ${h.why})`,
      'Warning',
    );
  }
}
