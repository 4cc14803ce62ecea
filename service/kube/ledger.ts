// The durable ledger: per workload, the config digests last applied and any reload in progress, kept in
// N shard ConfigMaps in the service's own namespace (docs/adr/0003). Only the leader writes it. Writes are
// JSON merge patches of the changed keys only, so they never clobber other keys of the same shard.

import type { V1ConfigMap } from '@kubernetes/client-node';
import { type KeyState, newestWrite } from '../core/catch-up.ts';
import { decodeHalt, encodeHalt, type HaltRecord, haltKey, isHaltKey } from '../core/halt-record.ts';
import {
  type DecodedEntry,
  decodeEntry,
  encodeEntry,
  type LedgerEntry,
  ledgerKey,
  shardOf,
  storedBytes,
} from '../core/ledger-entry.ts';
import type { CoreApi } from './api.ts';

export const LEDGER_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'gitops-reloader',
  'app.kubernetes.io/component': 'ledger',
});
/** Set on every shard; a shard with another value was written by a format this code does not know. */
export const FORMAT_ANNOTATION = 'gitops-reloader.io/ledger-format';
export const FORMAT_VERSION = '1';
/** Set on every shard written: the fingerprint of the HMAC key its digests were made with (never the key). */
export const KEY_ANNOTATION = 'gitops-reloader.io/key-fingerprint';

/**
 * Hub mode: the served cluster a ledger shard or job record belongs to (its cluster id, a DNS label of
 * at most 53 characters). A term's start lists only its own cluster's (ADR 0043); its shards written
 * before this label existed are read by name and labelled (Ledger#labelOwn).
 */
export const CLUSTER_ID_LABEL = 'gitops-reloader.io/cluster-id';

/**
 * The label selectors that read one owner's objects of a component: those labelled for it, and those
 * written before the label existed (no owner label at all; filtered by name afterwards; the ledger reads
 * its shards from before the label by name instead). Without an owner (single-cluster mode), the
 * component's alone.
 */
export function ownedSelectors(component: string, owner: string | undefined): string[] {
  const base = `app.kubernetes.io/component=${component}`;
  return owner === undefined
    ? [base]
    : [`${base},${CLUSTER_ID_LABEL}=${owner}`, `${base},!${CLUSTER_ID_LABEL}`];
}

export const DEFAULT_PREFIX = 'gitops-reloader';
export const DEFAULT_SHARDS = 16;
/** The API server refuses a ConfigMap whose data (keys plus values) exceeds 1 MiB. */
export const CONFIGMAP_DATA_LIMIT = 1024 * 1024;
/** Below the hard limit, leaving room for keys written by a writer this instance has not seen yet. */
export const DEFAULT_SHARD_BUDGET = 1_000_000;

/** Receives what the ledger reports: skipped values, foreign shards, and in dry-run what it would write. */
export type LedgerLog = (level: 'info' | 'warn', msg: string, fields: Record<string, unknown>) => void;

export interface LedgerOptions {
  core: CoreApi;
  /** The service's own (release) namespace. */
  namespace: string;
  log: LedgerLog;
  /** Shard ConfigMaps are named `<prefix>-ledger-<n>`. Default `gitops-reloader`. */
  prefix?: string;
  /** Default 16. Changing it moves entries to new shards as they are next written; see load(). */
  shards?: number;
  /** Bytes of data (keys plus values) a shard may hold. Default 1,000,000; at most 1 MiB. */
  shardBudgetBytes?: number;
  /** Read, but never write: log each write that would happen and keep it in memory only. */
  dryRun?: boolean;
  /** The fingerprint of the current HMAC key (core/config-hash keyFingerprint), stamped on each shard written. */
  keyFingerprint?: string;
  /**
   * Hub mode: the cluster id its shards are labelled with (CLUSTER_ID_LABEL). load() then lists only
   * that cluster's labelled shards, and reads its unlabelled ones left from before the label by name
   * (labelOwn() labels them).
   */
  owner?: string;
  /**
   * Hub mode: whether any shard without the cluster label may be in the namespace (the hub asks once,
   * not every term). When it says no, load() reads nothing by name. Default: yes.
   */
  unlabelledMayExist?: () => Promise<boolean>;
}

/** The uids of a workload and of its configs (those that exist), by id; see Ledger#identifyWith. */
export type Identify = (
  workloadId: string,
  configIds: readonly string[],
) => { uid?: string; configUids: Record<string, string> } | undefined;

export class LedgerError extends Error {
  override name = 'LedgerError';
  readonly shard: string | undefined;
  readonly workloads: readonly string[];
  /** HTTP status of the failed API call, if there was one. */
  readonly status: number | undefined;
  constructor(
    message: string,
    ctx: { shard?: string; workloads?: readonly string[]; status?: number; cause?: unknown },
  ) {
    super(message, { cause: ctx.cause });
    this.shard = ctx.shard;
    this.workloads = ctx.workloads ?? [];
    this.status = ctx.status;
  }
}

/** A write would take a shard over its byte budget. Nothing of that write was stored. */
export class LedgerFullError extends LedgerError {
  override name = 'LedgerFullError';
  readonly bytes: number;
  readonly budget: number;
  constructor(shard: string, workloads: readonly string[], bytes: number, budget: number) {
    super(
      `ledger shard ${shard} is full: writing ${describeIds(workloads)} would make it ${bytes} bytes, ` +
        `over its budget of ${budget}; nothing was written. Raise the shard count or the shard budget.`,
      { shard, workloads },
    );
    this.bytes = bytes;
    this.budget = budget;
  }
}

interface ShardView {
  name: string;
  exists: boolean;
  /** Why this ConfigMap is not ours to read or write, when it is not. */
  foreign: string | undefined;
  /** Data as last seen from the API server (or, in dry-run, as it would be). */
  raw: Map<string, string>;
  bytes: number;
  /** The valid entries of `raw`, by data key. */
  decoded: Map<string, { id: string; entry: LedgerEntry }>;
  /** The valid halt records of `raw` (core/halt-record.ts), by data key. */
  halts: Map<string, HaltRecord>;
  /** Serialises writes to this shard, so a response never overwrites a newer one in `raw`. */
  queue: Promise<unknown>;
  /**
   * A write failed in a way that does not say whether it was applied (a timeout, a 5xx): `raw` may be
   * older than the shard, and the next write reads the shard first. Without that, an entry written
   * from `raw` could put back what the lost response had replaced: the ledger would go back.
   */
  uncertain?: boolean;
}

/** Per data key of one shard: the new value, or null to delete the key. */
type ShardChange = Map<string, string | null>;

/** One data key to write: its home shard, its value (null: delete), and what it is, for messages. */
interface KeyWrite {
  key: string;
  home: string;
  value: string | null;
  label: string;
}

// Bounds the load's LIST responses to a few MiB each.
const LIST_PAGE = 4;
/** Shards from before the cluster label read by name at once (hub mode, the first term after an upgrade). */
const UNLABELLED_READS = 4;
const WRITE_CONCURRENCY = 4;

export class Ledger {
  readonly namespace: string;
  readonly prefix: string;
  readonly owner: string | undefined;
  readonly shards: number;
  readonly budget: number;
  readonly dryRun: boolean;
  readonly keyFingerprint: string | undefined;
  readonly #core: CoreApi;
  readonly #log: LedgerLog;
  readonly #unlabelledMayExist: () => Promise<boolean>;
  #views = new Map<string, ShardView>();
  #entries = new Map<string, LedgerEntry>();
  #loaded = false;
  /** Shards (by name) whose stored key fingerprint is another key's, as of the last load or write. */
  #otherKey = new Set<string>();
  /** Hub mode: shards of ours found without the cluster id label at the last load (labelOwn() labels them). */
  #unlabelled = new Set<string>();
  /** Shards (by name) with entries but no key fingerprint (written before fingerprints were recorded). */
  #unknownKey = new Set<string>();
  /** The newest write over our shards at the last load (ms), or undefined; see writtenAtMs(). */
  #writtenAtMs: number | undefined;
  /** Names the objects an entry is about (uids), on every entry written; see identifyWith(). */
  #identify: Identify | undefined;
  /** Writes are refused once this aborts (the leadership term that may write has ended). */
  #fence: AbortSignal | undefined;

  constructor(opts: LedgerOptions) {
    this.#core = opts.core;
    this.#log = opts.log;
    this.namespace = opts.namespace;
    this.prefix = opts.prefix ?? DEFAULT_PREFIX;
    this.owner = opts.owner;
    this.#unlabelledMayExist = opts.unlabelledMayExist ?? (async () => true);
    this.shards = opts.shards ?? DEFAULT_SHARDS;
    this.budget = opts.shardBudgetBytes ?? DEFAULT_SHARD_BUDGET;
    this.dryRun = opts.dryRun ?? false;
    this.keyFingerprint = opts.keyFingerprint;
    if (!Number.isSafeInteger(this.shards) || this.shards < 1 || this.shards > 1000) {
      throw new RangeError(`ledger shard count must be an integer from 1 to 1000, got ${opts.shards}`);
    }
    if (!Number.isSafeInteger(this.budget) || this.budget < 1 || this.budget > CONFIGMAP_DATA_LIMIT) {
      throw new RangeError(
        `ledger shard budget must be 1 to ${CONFIGMAP_DATA_LIMIT} bytes, got ${opts.shardBudgetBytes}`,
      );
    }
    // The longest shard name must still be a valid ConfigMap name (a DNS-1123 subdomain).
    const longest = this.shardName(this.shards - 1);
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(this.prefix) || longest.length > 253) {
      throw new RangeError(
        `ledger prefix ${JSON.stringify(this.prefix)} does not make valid ConfigMap names`,
      );
    }
  }

  /**
   * Only writes made while `signal` has not aborted reach the API server: a write queued or in progress
   * when it aborts is refused just before its request, so a leader whose term ended (demoted, stalled)
   * cannot land a merge patch over its successor's entries. Each write keeps the fence that was set
   * when it was made.
   */
  fence(signal: AbortSignal | undefined): void {
    this.#fence = signal;
  }

  shardName(shard: number): string {
    return `${this.prefix}-ledger-${shard}`;
  }

  /** The shard ConfigMap that holds (or will hold) a workload's entry. */
  shardFor(workloadId: string): string {
    return this.shardName(shardOf(workloadId, this.shards));
  }

  /**
   * Reads every shard (one LIST, paged) and replaces the in-memory copy. Creates nothing. Values that do
   * not decode, and ConfigMaps with a shard's name that are not ours, are logged and skipped. An entry
   * found outside its home shard (the shard count changed) is still returned, and moves home on its next
   * write.
   */
  async load(): Promise<Map<string, LedgerEntry>> {
    const found: V1ConfigMap[] = [];
    const labelled = this.owner !== undefined;
    // In hub mode only this cluster's labelled shards are listed (ADR 0043): a LIST of the unlabelled
    // ones would return every cluster's shards from before the label, and those of clusters no longer
    // served, at every term's start. This cluster's shards from before the label are read by name.
    const selector = ownedSelectors('ledger', this.owner)[0] as string;
    let cont: string | undefined;
    do {
      const page = await this.#core
        .listNamespacedConfigMap({
          namespace: this.namespace,
          labelSelector: selector,
          limit: LIST_PAGE,
          _continue: cont,
        })
        .catch((err: unknown) => {
          throw this.#wrap(err, `listing ledger shards in namespace ${this.namespace}`, {});
        });
      found.push(...page.items);
      cont = page.metadata?._continue || undefined;
    } while (cont);
    if (labelled && (await this.#unlabelledMayExist())) {
      const listed = new Set(found.map((cm) => cm.metadata?.name));
      const names = Array.from({ length: this.shards }, (_, i) => this.shardName(i)).filter(
        (n) => !listed.has(n),
      );
      // A few at a time; a shard never written is not there (404).
      for (let i = 0; i < names.length; i += UNLABELLED_READS) {
        const read = await Promise.all(
          names.slice(i, i + UNLABELLED_READS).map((name) =>
            this.#core.readNamespacedConfigMap({ name, namespace: this.namespace }).catch((err: unknown) => {
              if (statusOf(err) === 404) return undefined;
              throw this.#wrap(err, `reading ledger shard ${name}`, { shard: name });
            }),
          ),
        );
        for (const cm of read) if (cm) found.push(cm);
      }
    }
    this.#unlabelled = new Set();
    const otherKey = new Set<string>();
    const unknownKey = new Set<string>();
    let written: number | undefined = Number.NEGATIVE_INFINITY;
    this.#views = new Map();
    for (let i = 0; i < this.shards; i++) this.#views.set(this.shardName(i), emptyView(this.shardName(i)));
    const ours = new RegExp(`^${this.prefix.replaceAll('.', '\\.')}-ledger-(0|[1-9][0-9]*)$`);
    for (const cm of found) {
      const name = cm.metadata?.name ?? '';
      if (!ours.test(name)) continue; // another release's ledger in the same namespace
      const view = this.#views.get(name) ?? emptyView(name);
      this.#views.set(name, view);
      view.exists = true;
      view.foreign = foreignReason(cm);
      if (labelled && !view.foreign && cm.metadata?.labels?.[CLUSTER_ID_LABEL] === undefined) {
        this.#unlabelled.add(name);
      }
      const fp = cm.metadata?.annotations?.[KEY_ANNOTATION];
      if (
        !view.foreign &&
        fp !== undefined &&
        this.keyFingerprint !== undefined &&
        fp !== this.keyFingerprint
      )
        otherKey.add(name);
      if (view.foreign) {
        this.#log('warn', 'ledger shard skipped', { shard: name, reason: view.foreign });
        continue;
      }
      this.#ingest(view, new Map(Object.entries(cm.data ?? {})));
      // One shard without write times (managedFields cleared) leaves the newest write unknown.
      const at = cm.metadata ? newestWrite(cm.metadata) : undefined;
      written = at === undefined || written === undefined ? undefined : Math.max(written, at);
      if (fp === undefined && this.keyFingerprint !== undefined && view.decoded.size > 0)
        unknownKey.add(name);
    }
    this.#entries = new Map();
    for (const view of this.#views.values()) {
      for (const { id } of view.decoded.values()) this.#resolve(id);
    }
    for (const [id] of this.#entries) {
      const home = this.shardFor(id);
      if (!this.#views.get(home)?.decoded.has(ledgerKey(id))) {
        this.#log('info', 'ledger entry is outside its home shard; it moves on its next write', {
          workload: id,
          shard: home,
        });
      }
    }
    this.#otherKey = otherKey;
    this.#unknownKey = unknownKey;
    // No shard of ours: the service never wrote (a first install; no manifest creates shards).
    this.#writtenAtMs = written !== undefined && Number.isFinite(written) ? written : undefined;
    this.#loaded = true;
    return new Map(this.#entries);
  }

  /**
   * True when, at the last load, a shard recorded another HMAC key than ours: its digests cannot be
   * compared with ours (every one would differ), so the caller re-baselines instead of reloading.
   * Shards written before fingerprints were recorded say nothing either way.
   */
  keyChanged(): boolean {
    return this.#otherKey.size > 0;
  }

  /**
   * How the loaded digests relate to our key (core/catch-up.ts KeyState): `other` when a shard names
   * another key, `unknown` when a shard with entries names none (written before fingerprints were
   * recorded: its digests may or may not be ours), else `same`.
   */
  keyState(): KeyState {
    if (this.#otherKey.size > 0) return 'other';
    return this.#unknownKey.size > 0 ? 'unknown' : 'same';
  }

  /**
   * The newest write of the ledger as of the last load (ms, whole seconds: the newest managedFields time
   * over its shards), or undefined when no shard exists (the service never wrote: a first install) or a
   * shard has no write times. A shard emptied (its last workload deleted) still counts: it was written. The start-up catch-up tells by it a workload created while the service was down
   * (core/catch-up.ts createdWhileDown).
   */
  writtenAtMs(): number | undefined {
    return this.#writtenAtMs;
  }

  /**
   * Every entry written from now on carries what `identify` says about its workload and configs (their
   * uids), so that a later start can tell a new object of an old name (docs/catch-up.md). What it does
   * not know is left as the entry has it.
   */
  identifyWith(identify: Identify | undefined): void {
    this.#identify = identify;
  }

  /**
   * Hub mode: labels with our cluster id every shard of ours found without it (written before the label
   * existed), so later loads find it by the label alone. Leader-only, fenced like every ledger write.
   */
  async labelOwn(): Promise<void> {
    const fence = this.#fence;
    for (const name of [...this.#unlabelled]) {
      if (this.dryRun || this.owner === undefined) break;
      if (fence?.aborted)
        throw new LedgerError(`not labelling ledger shard ${name}: no longer the leader`, {});
      try {
        await this.#core.patchNamespacedConfigMap(
          {
            name,
            namespace: this.namespace,
            body: { metadata: { labels: { [CLUSTER_ID_LABEL]: this.owner } } },
          },
          fenced(fence),
        );
      } catch (err) {
        if (statusOf(err) !== 404) throw this.#wrap(err, `labelling ledger shard ${name}`, { shard: name });
      }
      this.#unlabelled.delete(name);
    }
  }

  /** Stamps our key's fingerprint on every shard that names another key or none (after a re-baseline). */
  async stampKey(): Promise<void> {
    const fence = this.#fence;
    for (const name of [...this.#otherKey, ...this.#unknownKey]) {
      if (this.dryRun) {
        this.#otherKey.delete(name);
        this.#unknownKey.delete(name);
        continue;
      }
      if (fence?.aborted)
        throw new LedgerError(`not stamping ledger shard ${name}: no longer the leader`, {});
      try {
        await this.#core.patchNamespacedConfigMap(
          {
            name,
            namespace: this.namespace,
            body: { metadata: { annotations: { [KEY_ANNOTATION]: this.keyFingerprint } } },
          },
          fenced(fence),
        );
      } catch (err) {
        if (statusOf(err) !== 404) throw this.#wrap(err, `stamping ledger shard ${name}`, { shard: name });
      }
      this.#otherKey.delete(name);
      this.#unknownKey.delete(name);
    }
  }

  /** The in-memory entry for a workload (as loaded and since written). Entries are frozen. */
  get(workloadId: string): LedgerEntry | undefined {
    return this.#entries.get(workloadId);
  }

  /** A copy of the whole in-memory ledger. */
  entries(): Map<string, LedgerEntry> {
    return new Map(this.#entries);
  }

  async put(workloadId: string, entry: LedgerEntry): Promise<void> {
    await this.#write(new Map([[workloadId, entry]]));
  }

  async remove(workloadId: string): Promise<void> {
    await this.#write(new Map([[workloadId, null]]));
  }

  /** Writes many entries with at most one request per shard touched. Unchanged entries cost nothing. */
  async putMany(entries: Iterable<readonly [string, LedgerEntry]>): Promise<void> {
    await this.#write(new Map(entries));
  }

  /** Removes many entries (workloads that no longer exist) with at most one request per shard. */
  async removeMany(workloadIds: Iterable<string>): Promise<void> {
    await this.#write(new Map([...workloadIds].map((id) => [id, null])));
  }

  /**
   * The halt records (core/halt-record.ts), one per config, as loaded and since written. They live
   * under keys of their own, beside the workload entries: no write of an entry touches them.
   */
  halts(): HaltRecord[] {
    const byKey = new Map<string, HaltRecord>();
    for (const view of this.#views.values())
      for (const [key, h] of view.halts)
        if (!byKey.has(key) || view.name === this.#homeOf(key)) byKey.set(key, h);
    return [...byKey.values()];
  }

  /** Records a halt of a config's change (replacing the config's earlier one, if any). */
  async putHalt(h: HaltRecord): Promise<void> {
    const key = haltKey(h.config);
    let value: string;
    try {
      value = encodeHalt(h);
    } catch (err) {
      throw this.#wrap(err, `encoding the halt record of ${h.config}`, { workloads: [h.config] });
    }
    await this.#writeKeys([{ key, home: this.#homeOf(key), value, label: `halt of ${h.config}` }]);
  }

  /** Removes a config's halt record (the halt ended: resumed, superseded, or the config deleted). */
  async removeHalt(config: string): Promise<void> {
    const key = haltKey(config);
    await this.#writeKeys([{ key, home: this.#homeOf(key), value: null, label: `halt of ${config}` }]);
  }

  /** The shard a halt record's key lives in: chosen by its key, as a workload's by its id. */
  #homeOf(key: string): string {
    return this.shardName(shardOf(key, this.shards));
  }

  #identified(id: string, entry: LedgerEntry): LedgerEntry {
    const known = this.#identify?.(id, Object.keys(entry.configs));
    if (!known) return entry;
    const { configUids: before, ...rest } = entry;
    const configUids = { ...before, ...known.configUids };
    for (const c of Object.keys(configUids)) if (!Object.hasOwn(entry.configs, c)) delete configUids[c];
    return {
      ...rest,
      ...(known.uid ? { uid: known.uid } : {}),
      ...(Object.keys(configUids).length > 0 ? { configUids } : {}),
    };
  }

  async #write(changes: Map<string, LedgerEntry | null>): Promise<void> {
    // An entry that cannot be encoded fails alone: the other entries of the call are still written.
    const failures: unknown[] = [];
    const writes: KeyWrite[] = [];
    for (const [id, entry] of changes) {
      const home = this.shardFor(id);
      let value: string | null = null;
      if (entry !== null) {
        try {
          value = encodeEntry(id, this.#identified(id, entry));
        } catch (err) {
          failures.push(
            this.#wrap(err, `encoding the ledger entry of ${id}`, { workloads: [id], shard: home }),
          );
          continue;
        }
      }
      writes.push({ key: ledgerKey(id), home, value, label: id });
    }
    await this.#writeKeys(writes, failures);
  }

  async #writeKeys(writes: readonly KeyWrite[], failures: unknown[] = []): Promise<void> {
    if (!this.#loaded)
      throw new LedgerError(
        `the ledger in namespace ${this.namespace} must be loaded before it is written`,
        {},
      );
    // Group per shard: the value goes to its home shard, and any copy in another shard (left there when
    // the shard count changed) is deleted in the same pass.
    const perShard = new Map<string, { change: ShardChange; ids: Map<string, string> }>();
    const add = (shard: string, key: string, value: string | null, id: string) => {
      let group = perShard.get(shard);
      if (!group) {
        group = { change: new Map(), ids: new Map() };
        perShard.set(shard, group);
      }
      group.change.set(key, value);
      group.ids.set(key, id);
    };
    for (const { key, home, value, label } of writes) {
      add(home, key, value, label);
      for (const view of this.#views.values()) {
        if (view.name !== home && view.raw.has(key)) add(view.name, key, null, label);
      }
    }

    // Check every budget before writing anything, so a full shard fails the whole call up front.
    // #writeShard checks again under the shard's queue, where it is authoritative.
    for (const [shard, { change, ids }] of perShard)
      this.#checkBudget(this.#view(shard), change, [...ids.values()]);

    const fence = this.#fence;
    const jobs = [...perShard].map(
      ([shard, { change, ids }]) =>
        () =>
          this.#enqueue(shard, change, ids, fence),
    );
    const run = async () => {
      for (let job = jobs.shift(); job; job = jobs.shift()) {
        await job().catch((err: unknown) => failures.push(err));
      }
    };
    await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, jobs.length) }, run));
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) {
      throw new LedgerError(
        `${failures.length} ledger writes failed (${perShard.size} shards written to): ` +
          failures.map((f) => (f instanceof Error ? f.message : String(f))).join('; '),
        { cause: new AggregateError(failures) },
      );
    }
  }

  #view(name: string): ShardView {
    let view = this.#views.get(name);
    if (!view) {
      view = emptyView(name);
      this.#views.set(name, view);
    }
    return view;
  }

  #enqueue(
    shard: string,
    change: ShardChange,
    ids: Map<string, string>,
    fence: AbortSignal | undefined,
  ): Promise<void> {
    const view = this.#view(shard);
    const done = view.queue.then(() => this.#writeShard(view, change, ids, fence));
    view.queue = done.catch(() => undefined);
    return done;
  }

  /** The shard's data size after `change`, or throws LedgerFullError. Also refuses foreign shards. */
  #checkBudget(view: ShardView, change: ShardChange, ids: string[]): number {
    if (view.foreign) {
      throw new LedgerError(
        `ledger shard ${view.name} is not a gitops-reloader ledger (${view.foreign}); refusing to write ${describeIds(ids)}`,
        { shard: view.name, workloads: ids },
      );
    }
    let bytes = view.bytes;
    for (const [key, value] of change) {
      const old = view.raw.get(key);
      if (old !== undefined) bytes -= storedBytes(key, old);
      if (value !== null) bytes += storedBytes(key, value);
    }
    // A write that does not grow the shard is allowed even over budget, so a full shard can still shrink.
    if (bytes > this.budget && bytes > view.bytes)
      throw new LedgerFullError(view.name, ids, bytes, this.budget);
    return bytes;
  }

  async #writeShard(
    view: ShardView,
    wanted: ShardChange,
    labels: Map<string, string>,
    fence: AbortSignal | undefined,
  ): Promise<void> {
    const wantedIds = [...labels.values()];
    if (view.uncertain && !this.dryRun) {
      // The last write's outcome is unknown and the shard could not be read since: read it now. If an
      // entry being written changed meanwhile (the lost write was applied), the caller made it from an
      // older entry: refuse, so that it reads again and the ledger never goes back.
      const before = [...wanted.keys()].map((k) => view.raw.get(k));
      await this.#reread(view, wantedIds);
      if ([...wanted.keys()].some((k, i) => view.raw.get(k) !== before[i]))
        throw new LedgerError(
          `ledger shard ${view.name} changed since ${describeIds(wantedIds)} was read (a write whose response was lost was applied); not written, read it again`,
          { shard: view.name, workloads: wantedIds },
        );
    }
    // Only what differs from the shard as last seen goes out.
    const change: ShardChange = new Map();
    for (const [key, value] of wanted) {
      if (value === null ? view.raw.has(key) : view.raw.get(key) !== value) change.set(key, value);
    }
    if (change.size === 0) return;
    const ids = [...labels].filter(([key]) => change.has(key)).map(([, id]) => id);
    const bytes = this.#checkBudget(view, change, ids);
    const data = Object.fromEntries(change);

    if (this.dryRun) {
      this.#log('info', 'ledger dry-run: would write shard', {
        shard: view.name,
        namespace: this.namespace,
        workloads: ids,
        bytes,
        data,
      });
      const next = new Map(view.raw);
      for (const [key, value] of change) value === null ? next.delete(key) : next.set(key, value);
      this.#apply(view, next);
      return;
    }

    const metadata = {
      labels: { ...LEDGER_LABELS, ...(this.owner === undefined ? {} : { [CLUSTER_ID_LABEL]: this.owner }) },
      annotations: {
        [FORMAT_ANNOTATION]: FORMAT_VERSION,
        ...(this.keyFingerprint ? { [KEY_ANNOTATION]: this.keyFingerprint } : {}),
      },
    };
    const sets = Object.fromEntries([...change].filter(([, v]) => v !== null)) as Record<string, string>;
    // At most: patch → 404 → create → 409 → patch. More means someone keeps deleting the shard.
    for (let attempt = 1; ; attempt++) {
      if (!view.exists && Object.keys(sets).length === 0) {
        // Only deletions, from a shard that is not there: nothing to do.
        this.#apply(view, new Map());
        return;
      }
      const verb = view.exists ? 'patching' : 'creating';
      if (fence?.aborted) {
        throw new LedgerError(
          `not ${verb} ledger shard ${view.name} for ${describeIds(ids)}: this replica is no longer the leader`,
          { shard: view.name, workloads: ids, cause: fence.reason },
        );
      }
      try {
        const cm = view.exists
          ? // A JSON merge patch: CoreApi patches are merge patches.
            await this.#core.patchNamespacedConfigMap(
              { name: view.name, namespace: this.namespace, body: { metadata, data } },
              fenced(fence),
            )
          : await this.#core.createNamespacedConfigMap(
              { namespace: this.namespace, body: { metadata: { name: view.name, ...metadata }, data: sets } },
              fenced(fence),
            );
        view.exists = true;
        this.#otherKey.delete(view.name);
        this.#unknownKey.delete(view.name);
        this.#apply(view, new Map(Object.entries(cm.data ?? {})));
        return;
      } catch (err) {
        const status = statusOf(err);
        if (attempt < 4 && view.exists && status === 404) {
          view.exists = false;
          continue;
        }
        if (attempt < 4 && !view.exists && status === 409) {
          view.exists = true;
          continue;
        }
        // No status, or a server error: the request may have been applied all the same. Read the
        // shard now, so that what the caller reads next (and writes from) is what the shard holds.
        if (status === undefined || status >= 500) {
          view.uncertain = true;
          await this.#reread(view, ids).catch(() => undefined);
        }
        throw this.#wrap(err, `${verb} ledger shard ${view.name} for ${describeIds(ids)}`, {
          shard: view.name,
          workloads: ids,
        });
      }
    }
  }

  /** Reads a shard whose last write may or may not have been applied, so the next one starts from it. */
  async #reread(view: ShardView, ids: string[]): Promise<void> {
    try {
      const cm = await this.#core.readNamespacedConfigMap({ name: view.name, namespace: this.namespace });
      view.exists = true;
      this.#apply(view, new Map(Object.entries(cm.data ?? {})));
    } catch (err) {
      if (statusOf(err) !== 404)
        throw this.#wrap(err, `reading ledger shard ${view.name} before writing ${describeIds(ids)}`, {
          shard: view.name,
          workloads: ids,
        });
      view.exists = false;
      this.#apply(view, new Map());
    }
    view.uncertain = false;
  }

  /** Replaces a shard's data with what the API server returned, and updates the entries it affects. */
  #apply(view: ShardView, next: Map<string, string>): void {
    const before = view.decoded;
    const touched = new Set<string>();
    for (const [key, { id }] of before) if (next.get(key) !== view.raw.get(key)) touched.add(id);
    this.#ingest(view, next);
    for (const [key, d] of view.decoded) if (before.get(key) !== d) touched.add(d.id);
    for (const id of touched) this.#resolve(id);
  }

  /** Sets a shard's data, decoding only values that changed and logging each one that does not decode. */
  #ingest(view: ShardView, next: Map<string, string>): void {
    const decoded = new Map<string, { id: string; entry: LedgerEntry }>();
    const halts = new Map<string, HaltRecord>();
    for (const [key, value] of next) {
      if (isHaltKey(key)) {
        const known = view.raw.get(key) === value ? view.halts.get(key) : undefined;
        if (known) halts.set(key, known);
        else if (view.raw.get(key) !== value) {
          const h = decodeHalt(key, value);
          if (h.ok) halts.set(key, h.halt);
          else this.#log('warn', 'ledger halt record skipped', { shard: view.name, key, reason: h.reason });
        }
        continue;
      }
      if (view.raw.get(key) === value) {
        // Unchanged: keep the earlier result; a bad value was reported when it was first seen.
        const known = view.decoded.get(key);
        if (known) decoded.set(key, known);
        continue;
      }
      const d: DecodedEntry = decodeEntry(key, value);
      if (d.ok) decoded.set(key, { id: d.id, entry: d.entry });
      else this.#log('warn', 'ledger value skipped', { shard: view.name, key, reason: d.reason });
    }
    view.raw = next;
    view.bytes = [...next].reduce((n, [k, v]) => n + storedBytes(k, v), 0);
    view.decoded = decoded;
    view.halts = halts;
  }

  /** Where a workload's entry comes from: its home shard, else any other shard holding its key. */
  #resolve(id: string): void {
    const key = ledgerKey(id);
    let found = this.#views.get(this.shardFor(id))?.decoded.get(key);
    if (!found) {
      for (const view of this.#views.values()) {
        found = view.decoded.get(key);
        if (found) break;
      }
    }
    // decodeEntry checks that a key is the one ledgerKey gives for the id, so `found.id` is `id`.
    if (found) this.#entries.set(id, found.entry);
    else this.#entries.delete(id);
  }

  #wrap(err: unknown, doing: string, ctx: { shard?: string; workloads?: readonly string[] }): LedgerError {
    if (err instanceof LedgerError) return err;
    const status = statusOf(err);
    const detail = apiMessage(err);
    return new LedgerError(
      `${doing} in namespace ${this.namespace} failed${status ? ` (HTTP ${status})` : ''}: ${detail}`,
      { ...ctx, status, cause: err },
    );
  }
}

function emptyView(name: string): ShardView {
  return {
    name,
    exists: false,
    foreign: undefined,
    raw: new Map(),
    bytes: 0,
    decoded: new Map(),
    halts: new Map(),
    queue: Promise.resolve(),
  };
}

function foreignReason(cm: V1ConfigMap): string | undefined {
  const labels = cm.metadata?.labels ?? {};
  for (const [k, v] of Object.entries(LEDGER_LABELS)) {
    if (labels[k] !== v)
      return `label ${k} is ${JSON.stringify(labels[k] ?? null)}, not ${JSON.stringify(v)}`;
  }
  const format = cm.metadata?.annotations?.[FORMAT_ANNOTATION];
  if (format !== undefined && format !== FORMAT_VERSION) {
    return `ledger format ${JSON.stringify(format)} is not ${FORMAT_VERSION}`;
  }
  if (cm.binaryData && Object.keys(cm.binaryData).length > 0) return 'it has binaryData';
  return undefined;
}

function describeIds(ids: readonly string[]): string {
  if (ids.length === 0) return 'no workloads';
  if (ids.length <= 3) return ids.join(', ');
  return `${ids.slice(0, 3).join(', ')} and ${ids.length - 3} more`;
}

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

// client-node's ApiException message embeds the whole response; the Status `message` is the useful part.
function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown } | null)?.body;
  if (typeof body === 'string') {
    try {
      const parsed = JSON.parse(body) as { message?: unknown };
      if (typeof parsed.message === 'string') return parsed.message;
    } catch {
      // not a Status object: fall through to the error's own message
    }
  }
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') {
    return (body as { message: string }).message;
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * The write's fence as request options: a write still waiting for its turn (the service's write
 * rate limit) when the term ends is dropped instead of landing late.
 */
function fenced(fence: AbortSignal | undefined): { signal: AbortSignal } | undefined {
  return fence ? { signal: fence } : undefined;
}
