// A lean, hardened list+watch of one resource path. Each object is reduced by `transform` the moment it is
// read and only the result is kept, so a Secret's data never stays in memory. The loop never gives up:
// it relists on 410 Gone, reconnects with backoff, restarts a silent watch, and relists periodically to
// catch anything a watch missed. Decisions live in watch-logic.ts, raw HTTP in watch-http.ts.
import type { ClusterAccess } from './access.ts';
import { KubeHttpError, listItems, streamLines } from './watch-http.ts';
import {
  type BackoffOptions,
  type Change,
  decide,
  diffRelist,
  type FailureMode,
  initialLoopState,
  type LoopPolicy,
  type LoopState,
  listUrl,
  type Outcome,
  objectKey,
  type RawObject,
  readWatchEvent,
  relistDelay,
  type Versioned,
  watchUrl,
} from './watch-logic.ts';

export type { FailureMode, RawMeta, RawObject, Versioned } from './watch-logic.ts';

/** One report to the failure hook. `mode` is the stable name for a metric label; `message` is for people. */
export interface WatchFailure {
  mode: FailureMode;
  /** The watched resource path, e.g. /api/v1/configmaps. */
  path: string;
  message: string;
  /** HTTP status, or the code of a watch ERROR event. */
  status?: number;
  /** What the loop does next, and after how long. */
  next?: 'list' | 'watch';
  retryInMs?: number;
  /** Failures in a row so far (0 once a watch proved healthy). */
  attempt?: number;
  /** handler-failed: the object's key. */
  key?: string;
  /** relist: why it ran ('periodic', 'gone-410', 'watch-failed', 'idle-timeout'), and what it found missing. */
  reason?: string;
  changes?: { added: number; updated: number; deleted: number };
}

/** The store and the resourceVersion it is current at; a later watch can resume from it. */
export interface WatchSnapshot<S> {
  resourceVersion: string;
  items: ReadonlyMap<string, Versioned<S>>;
}

export interface WatchOptions<S> {
  /** Collection path: /api/v1/configmaps, /api/v1/namespaces/NS/secrets, /apis/apps/v1/deployments, ... */
  path: string;
  /**
   * Reduces a raw object to what is stored; undefined means "not of interest" (and, for an object in the
   * store, a delete). Called once per object read; the raw object is dropped right after.
   */
  transform: (raw: RawObject) => S | undefined;
  /** Store key; default `namespace/name` (`name` when cluster-scoped). */
  key?: (raw: RawObject) => string;
  labelSelector?: string;
  fieldSelector?: string;
  /** LIST page size (limit/continue). Default 500; 0 lists in one request. */
  pageSize?: number;
  /** Full relist that diffs against the store. Default 10 minutes; 0 turns it off. */
  relistIntervalMs?: number;
  /** Restart a watch that delivered no event or bookmark for this long. Default 3 minutes (bookmarks come about once a minute). */
  idleTimeoutMs?: number;
  /** Server-side watch timeout. Default: random per connection in [300, 600) s, as client-go does. */
  watchTimeoutSeconds?: number;
  /** Client-side timeout per LIST page. Default 60 s. */
  listTimeoutMs?: number;
  /** Reconnect backoff. Default 1 s doubling to 30 s, with jitter. */
  backoff?: Partial<BackoffOptions>;
  /** Start from a snapshot (store and resourceVersion) instead of an initial LIST. */
  resume?: WatchSnapshot<S>;
  onAdd?: (key: string, value: S) => void;
  onUpdate?: (key: string, value: S, old: S) => void;
  onDelete?: (key: string, old: S) => void;
  /** Once, after the first full LIST (at once when resuming from a snapshot). */
  onSynced?: () => void;
  /** Every failure and recovery, by mode. Must not throw; if it does, a process warning is emitted. */
  onFailure?: (failure: WatchFailure) => void;
}

export interface Watch<S> {
  /** Current values by key. Read-only: the watch owns it. */
  readonly store: ReadonlyMap<string, S>;
  readonly synced: boolean;
  /** The resourceVersion the store is current at (from the last LIST, event or bookmark). */
  readonly resourceVersion: string | undefined;
  snapshot(): WatchSnapshot<S>;
  /** Aborts any request, timer or backoff; resolves when nothing is left running. Idempotent. */
  stop(): Promise<void>;
}

export const watchDefaults = {
  pageSize: 500,
  relistIntervalMs: 10 * 60_000,
  idleTimeoutMs: 3 * 60_000,
  listTimeoutMs: 60_000,
  backoff: { initialMs: 1_000, maxMs: 30_000 },
  relistAfterWatchFailures: 3,
  /** A watch that stayed up this long counts as healthy even if the resource was quiet. */
  healthyAfterMs: 10_000,
} as const;

/** An outcome plus what the failure report needs. */
interface Result {
  outcome: Outcome;
  message: string;
  status?: number;
}

const STOPPED = 'stopped';

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function statusOf(err: unknown): number | undefined {
  return err instanceof KubeHttpError ? err.status : undefined;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

const relistReasons: Partial<Record<Outcome['kind'], string>> = {
  'relist-due': 'periodic',
  gone: 'gone-410',
  'watch-failed': 'watch-failed',
  idle: 'idle-timeout',
};

function validate<S>(o: WatchOptions<S>): void {
  if (!o.path.startsWith('/') || o.path.includes('?')) {
    throw new Error(`watch path must be an API path without a query, got ${JSON.stringify(o.path)}`);
  }
  const nonNegative: [string, number | undefined][] = [
    ['pageSize', o.pageSize],
    ['relistIntervalMs', o.relistIntervalMs],
    ['watchTimeoutSeconds', o.watchTimeoutSeconds],
  ];
  const positive: [string, number | undefined][] = [
    ['idleTimeoutMs', o.idleTimeoutMs],
    ['listTimeoutMs', o.listTimeoutMs],
    ['backoff.initialMs', o.backoff?.initialMs],
    ['backoff.maxMs', o.backoff?.maxMs],
  ];
  if (o.resume && !o.resume.resourceVersion) {
    // Without one, the server would replay current objects as ADDED and never say what was deleted.
    throw new Error('watch resume needs the resourceVersion the snapshot is current at');
  }
  for (const [name, v] of nonNegative) {
    if (v !== undefined && !(Number.isFinite(v) && v >= 0))
      throw new Error(`watch ${name} must be >= 0, got ${v}`);
  }
  for (const [name, v] of positive) {
    if (v !== undefined && !(Number.isFinite(v) && v > 0))
      throw new Error(`watch ${name} must be > 0, got ${v}`);
  }
}

/** Starts listing and watching at once. Throws only for invalid options; runtime failures are reported. */
export function startWatch<S>(kc: ClusterAccess, o: WatchOptions<S>): Watch<S> {
  validate(o);
  const pageSize = o.pageSize ?? watchDefaults.pageSize;
  const relistIntervalMs = o.relistIntervalMs ?? watchDefaults.relistIntervalMs;
  const idleTimeoutMs = o.idleTimeoutMs ?? watchDefaults.idleTimeoutMs;
  const listTimeoutMs = o.listTimeoutMs ?? watchDefaults.listTimeoutMs;
  const policy: LoopPolicy = {
    backoff: { ...watchDefaults.backoff, ...o.backoff },
    relistAfterWatchFailures: watchDefaults.relistAfterWatchFailures,
  };
  const selectors = { labelSelector: o.labelSelector, fieldSelector: o.fieldSelector };
  const keyOf = o.key ?? objectKey;

  const store = new Map<string, S>();
  const versions = new Map<string, string>();
  let resourceVersion: string | undefined;
  let synced = false;
  let nextRelistAt = Number.POSITIVE_INFINITY;
  const stopper = new AbortController();

  const report = (f: Omit<WatchFailure, 'path'>) => {
    if (!o.onFailure) return;
    try {
      o.onFailure({ path: o.path, ...f });
    } catch (err) {
      process.emitWarning(`watch ${o.path}: the onFailure hook threw: ${describe(err)}`);
    }
  };

  /** Runs a user function; a throw is reported as handler-failed and leaves the store as it was. */
  const guarded = <T>(
    what: string,
    key: string | undefined,
    fn: () => T,
  ): { ok: true; value: T } | { ok: false } => {
    try {
      return { ok: true, value: fn() };
    } catch (err) {
      report({
        mode: 'handler-failed',
        key,
        message: `${what} threw for ${key ?? 'an object'}: ${describe(err)}`,
      });
      return { ok: false };
    }
  };

  /** Sets or removes one key and calls the matching handler. */
  const apply = (key: string, entry: Versioned<S> | undefined) => {
    const had = store.has(key);
    const old = store.get(key) as S;
    if (!entry) {
      if (!had) return;
      store.delete(key);
      versions.delete(key);
      if (o.onDelete) guarded('onDelete', key, () => o.onDelete?.(key, old));
      return;
    }
    store.set(key, entry.value);
    versions.set(key, entry.resourceVersion);
    if (had) {
      if (o.onUpdate) guarded('onUpdate', key, () => o.onUpdate?.(key, entry.value, old));
    } else if (o.onAdd) guarded('onAdd', key, () => o.onAdd?.(key, entry.value));
  };

  /** Key and reduced entry of a raw object; undefined value = not of interest. Not ok = user code threw. */
  const reduce = (
    raw: RawObject,
  ): { ok: true; key: string; entry?: Versioned<S> } | { ok: false; key?: string } => {
    const k = guarded('key', raw.metadata.name, () => keyOf(raw));
    if (!k.ok) return { ok: false };
    const t = guarded('transform', k.value, () => o.transform(raw));
    if (!t.ok) return { ok: false, key: k.value };
    if (t.value === undefined) return { ok: true, key: k.value };
    return {
      ok: true,
      key: k.value,
      entry: { value: t.value, resourceVersion: raw.metadata.resourceVersion ?? '' },
    };
  };

  async function list(reason: string): Promise<Result | typeof STOPPED> {
    const listed = new Map<string, Versioned<S>>();
    let listRv = '';
    let cont: string | undefined;
    try {
      do {
        // Item by item as the answer arrives: a page of 1 MiB Secrets is never held whole.
        let kind: string | undefined;
        let apiVersion: string | undefined;
        let headRead = false;
        const page = await listItems(
          kc,
          listUrl(o.path, selectors, pageSize, cont),
          stopper.signal,
          listTimeoutMs,
          (item, head) => {
            if (!headRead) {
              // List items carry no kind/apiVersion; set them so transform sees what a watch event would show.
              headRead = true;
              const h = head();
              const k = /"kind"\s*:\s*"([^"]*)"/.exec(h)?.[1];
              kind = k?.endsWith('List') ? k.slice(0, -4) : undefined;
              apiVersion = /"apiVersion"\s*:\s*"([^"]*)"/.exec(h)?.[1];
            }
            const raw = item as RawObject;
            if (typeof raw?.metadata?.name !== 'string') return; // the API server never lists an unnamed object
            raw.kind ??= kind;
            raw.apiVersion ??= apiVersion;
            const r = reduce(raw);
            if (r.ok && r.entry) listed.set(r.key, r.entry);
            else if (!r.ok && r.key !== undefined && store.has(r.key)) {
              // transform threw: keep what we had rather than report a delete that did not happen.
              listed.set(r.key, { value: store.get(r.key) as S, resourceVersion: versions.get(r.key) ?? '' });
            }
          },
        );
        if (!Array.isArray((page as { items?: unknown }).items)) {
          throw new Error(`LIST ${o.path}: the answer is not a list`);
        }
        listRv = page.metadata?.resourceVersion ?? listRv;
        cont = page.metadata?.continue || undefined;
      } while (cont);
    } catch (err) {
      if (stopper.signal.aborted) return STOPPED;
      return {
        outcome: { kind: 'list-failed', status: statusOf(err) },
        status: statusOf(err),
        message: describe(err),
      };
    }
    const changes: Change<S>[] = diffRelist(store, versions, listed);
    const counts = { added: 0, updated: 0, deleted: 0 };
    for (const c of changes) {
      if (c.type === 'delete') {
        counts.deleted++;
        apply(c.key, undefined);
      } else {
        counts[c.type === 'add' ? 'added' : 'updated']++;
        apply(c.key, c.entry);
      }
    }
    resourceVersion = listRv;
    nextRelistAt =
      relistIntervalMs > 0 ? Date.now() + relistDelay(relistIntervalMs) : Number.POSITIVE_INFINITY;
    if (!synced) {
      synced = true;
      if (o.onSynced) guarded('onSynced', undefined, () => o.onSynced?.());
    } else {
      const missed = changes.length > 0 ? `; the store had missed ${changes.length} change(s)` : '';
      report({
        mode: 'relist',
        reason,
        changes: counts,
        message: `relisted ${listed.size} object(s) (${reason})${missed}`,
      });
    }
    return { outcome: { kind: 'listed' }, message: 'listed' };
  }

  async function watchOnce(): Promise<Result | typeof STOPPED> {
    const local = new AbortController();
    const signal = AbortSignal.any([stopper.signal, local.signal]);
    // Set from callbacks; a holder so the compiler does not narrow it to its initial value.
    const why: {
      cause?: { kind: 'idle' | 'relist-due' | 'gone' } | { kind: 'error'; status?: number; message: string };
      message?: string;
    } = {};
    const end = (cause: NonNullable<typeof why.cause>, message?: string) => {
      if (why.cause) return;
      why.cause = cause;
      why.message = message;
      local.abort();
    };
    const started = Date.now();
    let events = 0;
    const idle = setTimeout(() => end({ kind: 'idle' }), idleTimeoutMs);
    const relist = Number.isFinite(nextRelistAt)
      ? setTimeout(() => end({ kind: 'relist-due' }), Math.max(0, nextRelistAt - Date.now()))
      : undefined;
    const from = resourceVersion ?? '';
    const onLine = (line: string) => {
      // A handler may have called stop(); the rest of the chunk must not reach the handlers.
      if (why.cause || stopper.signal.aborted) return;
      idle.refresh();
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        end({ kind: 'error', message: `invalid JSON in the watch stream: ${line.slice(0, 120)}` });
        return;
      }
      const ev = readWatchEvent(parsed);
      switch (ev.kind) {
        case 'upsert':
        case 'delete': {
          events++;
          const r = reduce(ev.object);
          if (r.ok) apply(r.key, ev.kind === 'delete' ? undefined : r.entry);
          if (ev.object.metadata.resourceVersion) resourceVersion = ev.object.metadata.resourceVersion;
          return;
        }
        case 'bookmark':
          events++;
          resourceVersion = ev.resourceVersion;
          return;
        case 'gone':
          end({ kind: 'gone' }, ev.message);
          return;
        case 'error':
          end(ev, ev.message);
          return;
      }
    };
    const timeoutSeconds = o.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300);
    let error: unknown;
    let ended = false;
    try {
      await streamLines(kc, watchUrl(o.path, selectors, from, timeoutSeconds), signal, onLine);
      ended = true;
    } catch (err) {
      error = err;
    } finally {
      clearTimeout(idle);
      clearTimeout(relist);
    }
    if (stopper.signal.aborted) return STOPPED;
    const healthy = events > 0 || Date.now() - started >= watchDefaults.healthyAfterMs;
    const cause = why.cause;
    if (cause?.kind === 'gone' || (!cause && statusOf(error) === 410)) {
      const message = why.message ?? describe(error);
      return { outcome: { kind: 'gone', healthy }, status: 410, message: `watch from ${from}: ${message}` };
    }
    if (cause?.kind === 'error') {
      return {
        outcome: { kind: 'watch-failed', status: cause.status, healthy },
        status: cause.status,
        message: cause.message,
      };
    }
    if (cause?.kind === 'idle') {
      return { outcome: { kind: 'idle' }, message: `no event or bookmark for ${idleTimeoutMs} ms` };
    }
    if (cause?.kind === 'relist-due')
      return { outcome: { kind: 'relist-due', healthy }, message: 'relist due' };
    if (ended) {
      return {
        outcome: { kind: 'watch-ended', healthy },
        message: `the server ended the watch after ${Date.now() - started} ms and ${events} event(s)`,
      };
    }
    const status = statusOf(error);
    return { outcome: { kind: 'watch-failed', status, healthy }, status, message: describe(error) };
  }

  async function run(): Promise<void> {
    let next: 'list' | 'watch' = 'list';
    let delayMs = 0;
    let state: LoopState = initialLoopState;
    let relistReason = 'initial';
    if (o.resume) {
      for (const [key, entry] of o.resume.items) {
        store.set(key, entry.value);
        versions.set(key, entry.resourceVersion);
      }
      resourceVersion = o.resume.resourceVersion;
      nextRelistAt =
        relistIntervalMs > 0 ? Date.now() + relistDelay(relistIntervalMs) : Number.POSITIVE_INFINITY;
      synced = true;
      if (o.onSynced) guarded('onSynced', undefined, () => o.onSynced?.());
      next = 'watch';
    }
    while (!stopper.signal.aborted) {
      if (delayMs > 0) await sleep(delayMs, stopper.signal);
      if (stopper.signal.aborted) break;
      let result: Result | typeof STOPPED;
      try {
        result = next === 'list' ? await list(relistReason) : await watchOnce();
      } catch (err) {
        // A bug in this file must not end the watch for good: treat it as a failure of this step.
        const message = `unexpected error: ${describe(err)}`;
        result =
          next === 'list'
            ? { outcome: { kind: 'list-failed' }, message }
            : { outcome: { kind: 'watch-failed', healthy: false }, message };
      }
      if (result === STOPPED || stopper.signal.aborted) break;
      const step = decide(state, result.outcome, policy);
      if (step.next === 'list' && next === 'watch') {
        relistReason = relistReasons[result.outcome.kind] ?? result.outcome.kind;
      }
      if (step.mode) {
        report({
          mode: step.mode,
          message: result.message,
          status: result.status,
          next: step.next,
          retryInMs: step.delayMs,
          attempt: step.state.attempt,
        });
      }
      state = step.state;
      next = step.next;
      delayMs = step.delayMs;
    }
  }

  const done = run();

  return {
    store,
    get synced() {
      return synced;
    },
    get resourceVersion() {
      return resourceVersion;
    },
    snapshot() {
      const items = new Map<string, Versioned<S>>();
      for (const [key, value] of store) items.set(key, { value, resourceVersion: versions.get(key) ?? '' });
      return { resourceVersion: resourceVersion ?? '', items };
    },
    stop() {
      stopper.abort(new Error(`watch ${o.path} stopped`));
      return done;
    },
  };
}

/**
 * The same watch options, with `beat` called at every event and listing (a sign of progress, for
 * liveness: http.ts WatchProgress) before the handler runs.
 */
export function withBeats<S>(beat: () => void, o: WatchOptions<S>): WatchOptions<S> {
  return {
    ...o,
    onAdd: (k, v) => {
      beat();
      o.onAdd?.(k, v);
    },
    onUpdate: (k, v, old) => {
      beat();
      o.onUpdate?.(k, v, old);
    },
    onDelete: (k, old) => {
      beat();
      o.onDelete?.(k, old);
    },
    onSynced: () => {
      beat();
      o.onSynced?.();
    },
  };
}
