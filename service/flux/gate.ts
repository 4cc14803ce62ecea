// Sync-aware batching for Flux. Implements the reconciler's ChangeGate: a change to a ConfigMap or
// Secret that a Kustomization's (or HelmRelease's) inventory lists is held while that applier is
// busy with a revision, and every change held for it is released as one batch (debounce 0) when
// it is done, so each workload reloads once per Flux revision. A config no inventory lists, or
// whose applier is idle, passes straight through.
//
// Authority: only the applier's own status.inventory ties a config to it. The
// kustomize.toolkit.fluxcd.io/name label a tenant can write on any object in its namespace is not
// read, so a hostile label gets the tenant nothing (docs/flux.md).
//
// "Busy" is read from the status, which Flux persists before it applies (service/flux/applier.ts):
// reconciling, waiting for its dependsOn, or a Kustomization whose source has a newer artifact than
// it last attempted (it is about to start). With --flux-depends-on-as-one, the appliers joined by
// dependsOn count as one: the changes of each are held until none of them is busy, so a revision
// that flows through a chain reloads each workload once, after the last link applied.
import type { FailedSyncPolicy } from '../config/choices.ts';
import type { Change, ChangeGate, ChangeSink, HeldChange, SyncCause, Timers } from '../core/batcher.ts';
import { datingChange, realTimers } from '../core/batcher.ts';
import { type ConfigRecord, compareResourceVersions } from '../core/records.ts';
import { configId } from '../core/types.ts';
import type { Logger } from '../log.ts';
import { type Applier, type ApplierKey, groupableDependsOn } from './applier.ts';

/** How long changes wait for a busy applier before they are released anyway (a controller down). */
export const FLUX_MAX_HOLD_MS = 10 * 60_000;
/** Beyond an applier's spec.timeout, for its controller to write the status that ends the hold. */
export const FLUX_HOLD_MARGIN_MS = 60_000;
/** Appliers with held changes, at most. */
export const FLUX_HELD_LIMIT = 10_000;

export interface FluxGateOptions {
  onFailedApply: FailedSyncPolicy;
  /** The appliers joined by dependsOn count as one change (--flux-depends-on-as-one). */
  dependsOnAsOne: boolean;
  log: Logger;
  timers?: Timers;
  maxHoldMs?: number;
  /**
   * Reads the applier from the API server now (a quorum GET) and observes it, or reports it deleted.
   * Without it, what the watches say is taken as current.
   */
  reread?: (a: Applier) => Promise<void>;
}

const older = (a: Applier, prev: Applier | undefined) =>
  a.resourceVersion !== undefined &&
  prev?.resourceVersion !== undefined &&
  (compareResourceVersions(a.resourceVersion, prev.resourceVersion) ?? 0) < 0;

/** The field managers of Flux's appliers: a config they wrote last was applied by a reconciliation. */
const FLUX_MANAGERS: ReadonlySet<string> = new Set(['kustomize-controller', 'helm-controller']);

interface Held {
  changes: Map<string, Change>;
  timer: unknown;
  /** A failed apply under --flux-on-failed-apply=hold kept these. */
  failed?: boolean;
}

export class FluxGate implements ChangeGate {
  readonly #o: FluxGateOptions;
  readonly #timers: Timers;
  readonly #appliers = new Map<ApplierKey, Applier>();
  /** Source key → the revision of its current artifact. */
  readonly #sources = new Map<string, string>();
  /** Config id → the appliers whose inventory lists it. */
  readonly #owners = new Map<string, Set<ApplierKey>>();
  readonly #held = new Map<ApplierKey, Held>();
  /** Reverse dependsOn: for each applier key, the appliers that name it (kept as they are observed). */
  readonly #dependents = new Map<ApplierKey, Set<ApplierKey>>();
  /** Appliers being read again (reread) before what they hold may go. */
  readonly #checking = new Set<ApplierKey>();
  /** Per applier: the resourceVersion its last fresh read (or failed read) left in view. */
  readonly #confirmed = new Map<ApplierKey, string | undefined>();
  #sink: ChangeSink | undefined;

  constructor(o: FluxGateOptions) {
    this.#o = o;
    this.#timers = o.timers ?? { ...realTimers };
  }

  attach(sink: ChangeSink): void {
    this.#sink = sink;
  }

  detach(sink: ChangeSink): void {
    if (this.#sink !== sink) return;
    this.#sink = undefined;
    for (const h of this.#held.values()) this.#timers.clear(h.timer);
    if (this.#held.size > 0)
      this.#o.log.info(
        { appliers: [...this.#held.keys()] },
        'no longer acting: held config changes are left to the next leader (it compares hashes with the ledger)',
      );
    this.#held.clear();
  }

  stop(): void {
    for (const h of this.#held.values()) this.#timers.clear(h.timer);
  }

  /** The applier whose inventory lists this config (the first by key when two claim it). */
  ownerOf(config: string): Applier | undefined {
    const keys = this.#owners.get(config);
    if (!keys || keys.size === 0) return undefined;
    const first = [...keys].sort()[0] as string;
    return this.#appliers.get(first);
  }

  hold(change: Change, config: ConfigRecord): boolean {
    const owner = this.ownerOf(configId(config.ref));
    if (!owner) return false;
    const idle = !this.#held.get(owner.key)?.failed && !this.#busy(owner);
    // Flux wrote it, yet its applier looks idle: the applier's watch may lag behind the config's (a
    // relist, a loaded API server), and the reconciliation that wrote it may still be applying. Held
    // until a fresh read says whether it is (docs/flux.md, "The gate under adversity").
    const unseen = idle && this.#o.reread !== undefined && FLUX_MANAGERS.has(config.writer ?? '');
    if (idle && !unseen) return false;
    this.#add(owner.key, change);
    this.#o.log.debug(
      {
        applier: owner.key,
        workload: change.workload,
        configs: [change.config],
        resourceVersion: config.resourceVersion,
      },
      'config change held until the Flux reconciliation ends',
    );
    if (unseen) this.#check(owner, 'Flux wrote a config of an applier that looks idle; reading it again');
    return true;
  }

  /**
   * A change a new term's start found. Flux keeps what decides the hold in its status, so it is
   * re-derived as at any time; under --flux-on-failed-apply=hold a failed applier holds it too.
   */
  holdAtStart(change: Change, config: ConfigRecord): boolean {
    const owner = this.ownerOf(configId(config.ref));
    if (!owner) return false;
    if (this.#o.onFailedApply === 'hold' && this.#failed(owner)) {
      this.#add(owner.key, change).failed = true;
      return true;
    }
    return this.hold(change, config);
  }

  holding(workload: string, config: string): boolean {
    const id = `${workload}\u0000${config}`;
    for (const h of this.#held.values()) if (h.changes.has(id)) return true;
    return false;
  }

  *held(): Iterable<HeldChange> {
    for (const [applier, h] of this.#held)
      for (const c of h.changes.values())
        yield { workload: c.workload, config: c.config, app: applier, since: c.observedAt };
  }

  heldCount(key: ApplierKey): number {
    return this.#held.get(key)?.changes.size ?? 0;
  }

  /** A Kustomization or HelmRelease as the watch sees it. */
  observe(a: Applier): void {
    const prev = this.#appliers.get(a.key);
    // A lagging watch can deliver a state older than a fresh read (reread, a notification): kept out.
    if (older(a, prev)) {
      this.#o.log.debug(
        { applier: a.key, rv: a.resourceVersion },
        'Flux applier event older than what is known',
      );
      return;
    }
    if (prev) for (const c of prev.configs) if (!a.configs.has(c)) this.#unindex(c, a.key);
    if (prev) this.#unlinkDependsOn(prev);
    const { trusted, foreign } = groupableDependsOn(a);
    for (const d of trusted) {
      const set = this.#dependents.get(d) ?? new Set<ApplierKey>();
      set.add(a.key);
      this.#dependents.set(d, set);
    }
    if (this.#o.dependsOnAsOne && foreign.length > 0) {
      const before = prev ? groupableDependsOn(prev).foreign.join() : '';
      if (foreign.join() !== before) {
        this.#o.log.info(
          { applier: a.key, dependsOn: foreign },
          'dependsOn in another namespace is not grouped (--flux-depends-on-as-one groups one namespace only)',
        );
      }
    }
    for (const c of a.configs) {
      const set = this.#owners.get(c) ?? new Set<ApplierKey>();
      set.add(a.key);
      this.#owners.set(c, set);
    }
    this.#appliers.set(a.key, a);
    this.#o.log.debug(
      { applier: a.key, phase: a.phase, attempted: a.lastAttemptedRevision, applied: a.lastAppliedRevision },
      'Flux applier observed',
    );
    if (a.phase === 'progressing' && prev?.phase !== 'progressing')
      this.#o.log.info(
        // Its source's newest artifact is what it works on; lastAttemptedRevision moves a write later.
        { applier: a.key, revision: (a.source && this.#sources.get(a.source)) || a.lastAttemptedRevision },
        'Flux reconciliation started; holding changes to its configs',
      );
    this.#evaluate();
  }

  /** A source (GitRepository, OCIRepository, Bucket) and the revision of its current artifact. */
  observeSource(key: string, revision: string | undefined): void {
    if (revision === undefined) this.#sources.delete(key);
    else this.#sources.set(key, revision);
    this.#o.log.debug({ source: key, revision }, 'Flux source observed');
    this.#evaluate();
  }

  sourceDeleted(key: string): void {
    this.#sources.delete(key);
    this.#evaluate();
  }

  /** The applier is gone: nothing will end its reconciliation, so what was held goes now. */
  applierDeleted(key: ApplierKey): void {
    const prev = this.#appliers.get(key);
    if (prev) for (const c of prev.configs) this.#unindex(c, key);
    if (prev) this.#unlinkDependsOn(prev);
    this.#appliers.delete(key);
    this.#release(key, 'applier deleted');
    this.#evaluate();
  }

  /**
   * Reads the applier again (`why` is logged); what it holds goes once the fresh status says it is
   * done. A failed read leaves the watch's view in charge.
   */
  #check(a: Applier, why: string): void {
    const reread = this.#o.reread;
    if (!reread || this.#checking.has(a.key)) return;
    this.#checking.add(a.key);
    this.#o.log.debug({ applier: a.key }, why);
    reread(a)
      .catch((err: Error) =>
        this.#o.log.warn(
          { applier: a.key, err: err.message },
          'could not read the Flux applier again; its config changes go as the watch says',
        ),
      )
      .then(() => {
        this.#checking.delete(a.key);
        this.#confirmed.set(a.key, this.#appliers.get(a.key)?.resourceVersion);
        this.#evaluate();
      });
  }

  #unlinkDependsOn(a: Applier): void {
    for (const d of a.dependsOn) {
      const set = this.#dependents.get(d);
      set?.delete(a.key);
      if (set?.size === 0) this.#dependents.delete(d);
    }
  }

  #unindex(config: string, key: ApplierKey): void {
    const set = this.#owners.get(config);
    set?.delete(key);
    if (set?.size === 0) this.#owners.delete(config);
  }

  #add(key: ApplierKey, change: Change): Held {
    let held = this.#held.get(key);
    if (!held) {
      if (this.#held.size >= FLUX_HELD_LIMIT) {
        const oldest = this.#held.keys().next().value;
        if (oldest !== undefined) this.#release(oldest, 'too many appliers held at once');
      }
      const afterMs = this.#holdCapMs(key);
      const timer = this.#timers.set(() => {
        this.#o.log.warn(
          { applier: key, afterMs },
          'the Flux reconciliation did not end in time; releasing held config changes',
        );
        this.#release(key, 'no end in time');
      }, afterMs);
      held = { changes: new Map(), timer };
      this.#held.set(key, held);
    }
    const id = `${change.workload}\u0000${change.config}`;
    held.changes.set(id, datingChange(held.changes.get(id), change));
    return held;
  }

  /**
   * How long changes wait for the applier (its group): the cap, or longer when a member's
   * reconciliation may run longer (spec.timeout), with a minute to write its status (issue 35).
   */
  #holdCapMs(key: ApplierKey): number {
    const cap = this.#o.maxHoldMs ?? FLUX_MAX_HOLD_MS;
    const a = this.#appliers.get(key);
    const longest = Math.max(0, ...(a ? this.#group(a) : []).map((m) => m.timeoutMs ?? 0));
    return Math.max(cap, longest > 0 ? longest + FLUX_HOLD_MARGIN_MS : 0);
  }

  /** The appliers counted with this one: itself, or its dependsOn component. */
  #group(a: Applier): Applier[] {
    if (!this.#o.dependsOnAsOne) return [a];
    const seen = new Set<ApplierKey>([a.key]);
    const todo = [a.key];
    // Edges both ways: what it depends on, and what depends on it (the reverse index).
    while (todo.length > 0) {
      const k = todo.pop() as ApplierKey;
      const own = this.#appliers.get(k);
      const next = [...(own ? groupableDependsOn(own).trusted : []), ...(this.#dependents.get(k) ?? [])];
      for (const n of next) {
        if (seen.has(n) || !this.#appliers.has(n)) continue;
        seen.add(n);
        todo.push(n);
      }
    }
    return [...seen].map((k) => this.#appliers.get(k) as Applier);
  }

  /** Whether this applier alone has a revision in hand it has not finished. */
  #busyAlone(a: Applier): boolean {
    if (a.suspended) return false;
    if (a.phase === 'progressing' || a.phase === 'waiting') return true;
    // Ready, or failed, with a newer artifact than it last attempted: it starts on it next (a failed
    // one at its retry), so what it holds goes with that revision, not now (test/sim/flux-sim.ts).
    const rev = a.source ? this.#sources.get(a.source) : undefined;
    return (
      rev !== undefined && (a.phase === 'ready' || a.phase === 'failed') && a.lastAttemptedRevision !== rev
    );
  }

  #busy(a: Applier): boolean {
    return this.#group(a).some((m) => this.#busyAlone(m));
  }

  #failed(a: Applier): boolean {
    return this.#group(a).some((m) => !m.suspended && m.phase === 'failed');
  }

  /** Releases every held applier whose group is done, all in one pass (one batch per workload). */
  #evaluate(): void {
    for (const [key, held] of [...this.#held]) {
      const a = this.#appliers.get(key);
      if (!a || this.#checking.has(key)) continue;
      if (this.#busy(a)) continue;
      if (this.#failed(a)) {
        if (this.#o.onFailedApply === 'hold') {
          if (!held.failed) {
            held.failed = true;
            this.#timers.clear(held.timer);
            this.#o.log.warn(
              { applier: key, revision: a.lastAttemptedRevision, held: held.changes.size },
              'Flux apply did not succeed; its config changes stay held until it does (--flux-on-failed-apply=hold)',
            );
          }
          continue;
        }
      }
      // What the watch says may lag (a relist, a loaded API server): a fresh read confirms the end first.
      if (this.#o.reread && (!this.#confirmed.has(key) || this.#confirmed.get(key) !== a.resourceVersion)) {
        this.#check(a, 'a Flux reconciliation looks ended; confirming with a fresh read');
        continue;
      }
      this.#o.log.info(
        { applier: key, phase: a.phase, revision: a.lastAppliedRevision, held: held.changes.size },
        'Flux reconciliation ended',
      );
      // The revision it ended with: applied when Ready, attempted when it failed.
      // A HelmRelease records only the attempted one (its chart version).
      const revision =
        a.phase === 'ready' ? (a.lastAppliedRevision ?? a.lastAttemptedRevision) : a.lastAttemptedRevision;
      this.#release(key, `reconciliation ${a.phase}`, { app: key, ...(revision ? { revision } : {}) });
    }
  }

  #release(key: ApplierKey, reason: string, cause?: SyncCause): void {
    const held = this.#held.get(key);
    this.#confirmed.delete(key);
    if (!held) return;
    this.#held.delete(key);
    this.#timers.clear(held.timer);
    if (held.changes.size === 0) return;
    const changes = [...held.changes.values()];
    this.#o.log.info(
      {
        applier: key,
        reason,
        workloads: [...new Set(changes.map((c) => c.workload))].sort(),
        configs: [...new Set(changes.map((c) => c.config))].sort(),
      },
      'releasing config changes held for the Flux reconciliation as one batch',
    );
    if (!this.#sink) return;
    for (const c of changes) this.#sink.add({ ...c, debounceMs: 0, ...(cause ? { via: cause } : {}) });
  }
}
