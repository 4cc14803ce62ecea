// Sync-aware batching. Implements the reconciler's ChangeGate: a change to a config that an Argo CD
// Application tracks is held while that app's sync operation runs, and every change held for the
// app is released as one batch (debounce 0) when the operation ends, so each workload reloads once
// per sync. A config no Application tracks, or whose app is not syncing, passes straight through.
//
// Two sources say when a sync runs and ends:
//  - the Application watch (observe), when the app's namespace is watched: the reliable path;
//  - notifications (notify), a hint. For a watched app it only asks for an immediate refresh; for an
//    app we cannot read (Argo CD in another cluster) that has notified us before, changes to its
//    configs are held from the moment they are seen, and the terminal notification, with its
//    resource list, releases the batch. A safety timer releases them if no notification comes.
import type { FailedSyncPolicy } from '../config/choices.ts';
import type { Change, ChangeGate, ChangeSink, HeldChange, SyncCause, Timers } from '../core/batcher.ts';
import { datingChange, realTimers } from '../core/batcher.ts';
import type { ConfigRecord } from '../core/records.ts';
import type { ConfigKind, ConfigRef } from '../core/types.ts';
import { configId } from '../core/types.ts';
import type { Logger } from '../log.ts';
import type { SyncNotification } from './notification.ts';
import { type AppSync, isTerminal, type OperationPhase, SyncTracker } from './sync-tracker.ts';
import { type AppKey, appKeyString, type TrackingOptions, trackedBy } from './tracking.ts';

/** How long changes of an unwatched app wait for a notification before they are released anyway. */
export const UNWATCHED_MAX_HOLD_MS = 10 * 60_000;
/**
 * After a notification ends an unwatched app's sync, a change to a config the notification listed,
 * and that we had not seen change, is not held for this long: it is that sync's change, seen late.
 */
export const UNWATCHED_GRACE_MS = 5_000;
/** Notification keys remembered for idempotency. */
const SEEN_LIMIT = 10_000;
/** Apps remembered as notifying, and apps with held changes, at most (webhook input feeds both). */
export const APP_LIMIT = 10_000;

export interface SyncGateOptions {
  tracking: TrackingOptions;
  onFailedSync: FailedSyncPolicy;
  /** True when the Application watch covers this namespace (its apps' syncs are seen directly). */
  watched(appNamespace: string): boolean;
  /** True when notifications can reach us (a webhook token is configured). */
  notificationsEnabled: boolean;
  /** Workloads (and their debounce override) that a change to this config concerns. */
  usersOf(ref: ConfigRef): Array<{ workload: string; debounceMs?: number }>;
  /** Reads one Application now (the watch may lag); undefined when it cannot. */
  refresh?(app: AppKey): Promise<AppSync | undefined>;
  log: Logger;
  timers?: Timers;
  unwatchedMaxHoldMs?: number;
  unwatchedGraceMs?: number;
  /** Apps held or remembered as notifying at most; default APP_LIMIT. */
  appLimit?: number;
}

interface Held {
  changes: Map<string, Change>;
  /** Unwatched apps: the safety release. */
  timer?: unknown;
  /** A failed sync under --argocd-on-failed-sync=hold kept these. */
  failedAt?: string;
}

export type NotifyResult = { outcome: 'accepted'; action: string } | { outcome: 'duplicate' };

export class SyncGate implements ChangeGate {
  readonly tracker = new SyncTracker();
  readonly #o: SyncGateOptions;
  readonly #timers: Timers;
  readonly #held = new Map<string, Held>();
  /** Apps a notification came from: key → the newest operation it named (startedAt, ms), and if it ended. */
  readonly #newestOp = new Map<string, { startedMs: number; ended: boolean }>();
  /** configId → until when a late change of it belongs to a sync a notification already ended. */
  readonly #lateUntil = new Map<string, number>();
  /** Apps a notification came from: their notifications are wired up. */
  readonly #notifying = new Set<string>();
  readonly #seen = new Set<string>();
  /** Configs whose tracking annotation we ignored, so it is logged once. */
  readonly #reported = new Set<string>();
  #sink: ChangeSink | undefined;

  constructor(o: SyncGateOptions) {
    this.#o = o;
    this.#timers = o.timers ?? { ...realTimers };
  }

  attach(sink: ChangeSink): void {
    this.#sink = sink;
  }

  detach(sink: ChangeSink): void {
    if (this.#sink !== sink) return;
    this.#sink = undefined;
    for (const h of this.#held.values()) if (h.timer !== undefined) this.#timers.clear(h.timer);
    if (this.#held.size > 0) {
      this.#o.log.info(
        { apps: [...this.#held.keys()] },
        'no longer acting: held config changes are left to the next leader (it compares hashes with the ledger)',
      );
    }
    this.#held.clear();
  }

  /** True while the gate holds a change of this config for this workload (its release reloads it). */
  holding(workload: string, config: string): boolean {
    const id = `${workload}\u0000${config}`;
    for (const h of this.#held.values()) if (h.changes.has(id)) return true;
    return false;
  }

  /** The changes held now, with the Application each waits for (the status: waiting, sync-hold). */
  *held(): Iterable<HeldChange> {
    for (const [app, h] of this.#held)
      for (const c of h.changes.values())
        yield { workload: c.workload, config: c.config, app, since: c.observedAt };
  }

  /** Changes held right now, per app key (for logs and tests). */
  heldCount(key: string): number {
    return this.#held.get(key)?.changes.size ?? 0;
  }

  /** The Application that tracks this config, if any (an ignored tracking annotation is logged once). */
  #appOf(config: ConfigRecord): AppKey | undefined {
    const t = trackedBy(
      {
        group: '',
        kind: config.ref.kind,
        namespace: config.ref.namespace,
        name: config.ref.name,
        annotations: config.annotations,
        labels: config.labels,
      },
      this.#o.tracking,
    );
    if (!t.app && t.ignored) this.#reportIgnored(configId(config.ref), t.ignored);
    return t.app;
  }

  /**
   * A change a new term found at start (its digests differ from the ledger's). The hold a previous
   * term kept in memory is re-derived from the Application's status, which Argo CD keeps until its
   * next operation (docs/adr/0029): a sync that runs now holds the change as at any time, and under
   * --argocd-on-failed-sync=hold a last sync that did not succeed holds it until one does.
   */
  holdAtStart(change: Change, config: ConfigRecord): boolean {
    const app = this.#appOf(config);
    if (!app) return false;
    const key = appKeyString(app);
    const last = this.tracker.get(key)?.operation;
    if (
      this.#o.onFailedSync === 'hold' &&
      this.#o.watched(app.namespace) &&
      last &&
      isTerminal(last.phase) &&
      last.phase !== 'Succeeded' &&
      !this.#held.get(key)?.failedAt
    ) {
      const held = this.#bucket(key);
      held.failedAt = last.startedAt;
      this.#o.log.warn(
        { app: key, phase: last.phase, startedAt: last.startedAt, revision: last.revision },
        "the Application's last sync did not succeed: changes to its configs stay held until one does (--argocd-on-failed-sync=hold)",
      );
    }
    return this.hold(change, config);
  }

  hold(change: Change, config: ConfigRecord): boolean {
    const app = this.#appOf(config);
    if (!app) return false;
    const key = appKeyString(app);
    const watched = this.#o.watched(app.namespace);
    // After a failed sync under --argocd-on-failed-sync=hold, later changes join what is held.
    if (!this.#held.get(key)?.failedAt) {
      if (watched) {
        if (!this.tracker.isSyncing(key)) return false;
      } else {
        // Only an app whose notifications reach us: otherwise nothing would end the hold but the
        // safety timer, and an app nobody subscribed would reload minutes late.
        if (!this.#o.notificationsEnabled || !this.#notifying.has(key)) return false;
        if ((this.#lateUntil.get(change.config) ?? 0) > this.#timers.now()) return false;
      }
    }
    const held = this.#bucket(key);
    const id = `${change.workload}\u0000${change.config}`;
    const prev = held.changes.get(id);
    held.changes.set(id, datingChange(prev, change));
    if (!watched && held.timer === undefined && !held.failedAt) {
      held.timer = this.#timers.set(() => {
        held.timer = undefined;
        this.#o.log.warn(
          { app: key },
          'no Argo CD notification ended the sync in time; releasing held config changes',
        );
        this.#release(key, 'no notification in time', { app: key });
      }, this.#o.unwatchedMaxHoldMs ?? UNWATCHED_MAX_HOLD_MS);
    }
    this.#o.log.debug(
      {
        app: key,
        workload: change.workload,
        configs: [change.config],
        resourceVersion: config.resourceVersion,
      },
      'config change held until the Argo CD sync ends',
    );
    return true;
  }

  /** An Application as the watch (or a refresh) sees it. */
  observe(app: AppSync): void {
    const key = appKeyString(app.app);
    const t = this.tracker.observe(app);
    if (!t) return;
    if (t.kind === 'started') {
      this.#o.log.info(
        { app: key, startedAt: app.operation?.startedAt, phase: app.operation?.phase ?? 'Requested' },
        'Argo CD sync started; holding changes to its configs',
      );
      return;
    }
    this.#ended(key, t.operation.phase, t.operation.startedAt, 'Application status', revisionOf(t.operation));
  }

  /** The Application is gone: nothing will end its sync, so what was held goes now. */
  appDeleted(app: AppKey): void {
    const key = appKeyString(app);
    this.tracker.remove(key);
    this.#release(key, 'Application deleted');
  }

  /** A notification from Argo CD. Idempotent on (app, startedAt, running/ended). */
  async notify(n: SyncNotification): Promise<NotifyResult> {
    const key = appKeyString(n.app);
    const seenKey = `${key}@${n.startedAt}#${isTerminal(n.phase) ? 'end' : 'run'}`;
    if (this.#seen.has(seenKey)) return { outcome: 'duplicate' };
    this.#remember(seenKey);
    this.#notifying.delete(key);
    this.#notifying.add(key);
    if (this.#notifying.size > (this.#o.appLimit ?? APP_LIMIT)) {
      const oldest = this.#notifying.values().next().value;
      if (oldest !== undefined) this.#notifying.delete(oldest);
    }
    if (this.#o.watched(n.app.namespace) && this.#o.refresh) {
      try {
        const app = await this.#o.refresh(n.app);
        if (app) {
          this.observe(app);
          return { outcome: 'accepted', action: 'refreshed the Application' };
        }
      } catch (err) {
        this.#o.log.warn(
          { app: key, err: (err as Error).message },
          'could not read the Application; acting on the notification alone',
        );
      }
    }
    // The end of an older sync, delivered after a newer one started or ended: that sync's outcome no
    // longer decides anything. A late failure under --argocd-on-failed-sync=hold held the changes after
    // a successful sync for good (engine simulation, seed 6291); a late success released the changes
    // held for a sync still running.
    const started = Date.parse(n.startedAt);
    const newest = this.#newestOp.get(key);
    if (newest !== undefined && started < newest.startedMs) {
      if (!isTerminal(n.phase)) return { outcome: 'accepted', action: 'noted a running sync' };
      const what = newest.ended ? 'ended' : 'started';
      return { outcome: 'accepted', action: `ignored: a newer sync already ${what}` };
    }
    if (Number.isFinite(started)) this.#noteOp(key, { startedMs: started, ended: isTerminal(n.phase) });
    if (!isTerminal(n.phase)) return { outcome: 'accepted', action: 'noted a running sync' };
    const prev = this.tracker.get(key);
    if (this.#o.watched(n.app.namespace) && prev?.operation?.startedAt === n.startedAt) {
      if (isTerminal(prev.operation.phase)) return { outcome: 'accepted', action: 'sync already ended' };
    }
    this.#addFromResources(key, n);
    this.#ended(key, n.phase, n.startedAt, 'notification', revisionOf(n));
    return { outcome: 'accepted', action: `sync ${n.phase}` };
  }

  #noteOp(key: string, op: { startedMs: number; ended: boolean }): void {
    this.#newestOp.delete(key);
    this.#newestOp.set(key, op);
    if (this.#newestOp.size > (this.#o.appLimit ?? APP_LIMIT)) {
      const oldest = this.#newestOp.keys().next().value;
      if (oldest !== undefined) this.#newestOp.delete(oldest);
    }
  }

  /** Drops every timer (at shutdown). Held changes are not released: the next start compares hashes. */
  stop(): void {
    for (const h of this.#held.values()) if (h.timer !== undefined) this.#timers.clear(h.timer);
  }

  #ended(key: string, phase: OperationPhase, startedAt: string, via: string, revision?: string): void {
    const held = this.#held.get(key);
    if (phase !== 'Succeeded' && this.#o.onFailedSync === 'hold') {
      if (held) {
        held.failedAt = startedAt;
        if (held.timer !== undefined) this.#timers.clear(held.timer);
        held.timer = undefined;
      }
      this.#o.log.warn(
        { app: key, phase, startedAt, held: held?.changes.size ?? 0 },
        'Argo CD sync did not succeed; its config changes stay held (--argocd-on-failed-sync=hold)',
      );
      return;
    }
    this.#o.log.info(
      { app: key, phase, startedAt, via, held: held?.changes.size ?? 0 },
      'Argo CD sync ended',
    );
    this.#release(key, `sync ${phase}`, { app: key, ...(revision ? { revision } : {}) });
  }

  /** `cause`: the sync whose end releases the changes (a reload's cause in the status). */
  #release(key: string, reason: string, cause?: SyncCause): void {
    const held = this.#held.get(key);
    if (!held) return;
    this.#held.delete(key);
    if (held.timer !== undefined) this.#timers.clear(held.timer);
    if (held.changes.size === 0) return;
    const changes = [...held.changes.values()];
    this.#o.log.info(
      {
        app: key,
        reason,
        workloads: [...new Set(changes.map((c) => c.workload))].sort(),
        configs: [...new Set(changes.map((c) => c.config))].sort(),
      },
      'releasing config changes held for the sync as one batch',
    );
    // Nothing acts here (a standby, or a leader whose term ended): the next leader's start finds these
    // changes by comparing hashes with the ledger, so dropping them loses nothing.
    if (!this.#sink) return;
    for (const c of changes) this.#sink.add({ ...c, debounceMs: 0, ...(cause ? { via: cause } : {}) });
  }

  /** Unwatched apps: the payload's ConfigMaps and Secrets join the batch (our hashes decide). */
  #addFromResources(key: string, n: SyncNotification): void {
    const held = this.#bucket(key);
    const now = this.#timers.now();
    const seen = new Set([...held.changes.values()].map((c) => c.config));
    for (const [c, until] of this.#lateUntil) if (until <= now) this.#lateUntil.delete(c);
    for (const r of n.resources) {
      if (r.group !== '' || (r.kind !== 'ConfigMap' && r.kind !== 'Secret') || r.namespace === '') continue;
      const ref: ConfigRef = { kind: r.kind as ConfigKind, namespace: r.namespace, name: r.name };
      const config = configId(ref);
      if (!seen.has(config))
        this.#lateUntil.set(config, now + (this.#o.unwatchedGraceMs ?? UNWATCHED_GRACE_MS));
      for (const u of this.#o.usersOf(ref)) {
        const id = `${u.workload}\u0000${config}`;
        // A change we saw keeps its own observation time (the reload's cutoff); one we did not see
        // is dated now, which can only make the cutoff later (safe), never miss a pod.
        if (!held.changes.has(id)) {
          held.changes.set(id, { workload: u.workload, config, observedAt: now, debounceMs: u.debounceMs });
        }
      }
    }
  }

  #bucket(key: string): Held {
    let held = this.#held.get(key);
    if (!held) {
      // Over the cap, the app held longest is released now rather than kept without bound.
      if (this.#held.size >= (this.#o.appLimit ?? APP_LIMIT)) {
        const oldest = this.#held.keys().next().value;
        if (oldest !== undefined) this.#release(oldest, 'too many apps held at once');
      }
      held = { changes: new Map() };
      this.#held.set(key, held);
    }
    return held;
  }

  /** Apps with changes held now (bounded by APP_LIMIT). */
  get heldApps(): number {
    return this.#held.size;
  }

  #remember(k: string): void {
    this.#seen.add(k);
    if (this.#seen.size > SEEN_LIMIT) {
      const oldest = this.#seen.values().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
  }

  #reportIgnored(config: string, why: string): void {
    if (this.#reported.has(config)) return;
    this.#reported.add(config);
    if (this.#reported.size > SEEN_LIMIT) this.#reported.clear();
    this.#o.log.info({ config, why }, 'Argo CD tracking ignored; the config is treated as untracked');
  }
}

/** The revision a sync applied; a multi-source Application's revisions, one per source. */
function revisionOf(op: { revision?: string; revisions?: string[] }): string | undefined {
  return op.revision || (op.revisions && op.revisions.length > 0 ? op.revisions.join(',') : undefined);
}
