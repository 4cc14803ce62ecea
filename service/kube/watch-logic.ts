// The decisions of the list+watch loop in watch.ts, as pure functions: what to do after each outcome,
// how long to back off, how to read one watch event, and what a relist changed. No I/O, no timers.

/** Every way the loop can fail or recover, named for logs and metric labels. */
export type FailureMode =
  | 'list-failed'
  | 'watch-failed'
  | 'gone-410'
  | 'idle-timeout'
  | 'relist'
  | 'reconnect'
  | 'handler-failed';

export interface BackoffOptions {
  /** Ceiling of the first retry's delay. */
  initialMs: number;
  /** No delay is longer than this. */
  maxMs: number;
}

/**
 * Exponential backoff with "equal jitter": the ceiling doubles per attempt up to maxMs, and the delay is
 * drawn from [ceiling/2, ceiling], so replicas that failed together do not retry together, yet no retry
 * comes sooner than half the ceiling.
 */
export function backoffDelay(attempt: number, o: BackoffOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(o.maxMs, o.initialMs * 2 ** Math.min(Math.max(attempt, 0), 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** The next periodic relist comes after the interval plus up to 10% jitter, so replicas drift apart. */
export function relistDelay(intervalMs: number, random: () => number = Math.random): number {
  return Math.round(intervalMs + random() * intervalMs * 0.1);
}

/** How one LIST or one WATCH connection ended. `healthy`: the watch delivered events or stayed up a while. */
export type Outcome =
  | { kind: 'listed' }
  | { kind: 'list-failed'; status?: number }
  | { kind: 'watch-ended'; healthy: boolean }
  | { kind: 'watch-failed'; status?: number; healthy: boolean }
  | { kind: 'gone'; healthy: boolean }
  | { kind: 'idle' }
  | { kind: 'relist-due'; healthy: boolean };

export interface LoopState {
  /** Failures since the last healthy watch; drives the backoff. A successful LIST alone does not reset it,
   *  so "LIST works but WATCH is forbidden" still backs off instead of relisting in a tight loop. */
  attempt: number;
  /** Watch failures since the last LIST or healthy watch; enough of them and the loop relists. */
  watchFailures: number;
  /** 410s since the last healthy watch: the first relists at once, a repeat backs off. */
  gones: number;
}

export const initialLoopState: LoopState = { attempt: 0, watchFailures: 0, gones: 0 };

export interface LoopPolicy {
  backoff: BackoffOptions;
  /** After this many watch failures in a row, relist instead of resuming from the last resourceVersion. */
  relistAfterWatchFailures: number;
}

export interface Step {
  next: 'list' | 'watch';
  delayMs: number;
  state: LoopState;
  /** What to report, if anything. A successful relist is reported by the caller, with its diff. */
  mode?: FailureMode;
}

export function decide(
  s: LoopState,
  o: Outcome,
  policy: LoopPolicy,
  random: () => number = Math.random,
): Step {
  const backoff = () => backoffDelay(s.attempt, policy.backoff, random);
  switch (o.kind) {
    case 'listed':
      return { next: 'watch', delayMs: 0, state: { ...s, watchFailures: 0 } };
    case 'list-failed':
      // A 410 here is an expired continue token: the relist starts over, after the same backoff.
      return {
        next: 'list',
        delayMs: backoff(),
        state: { ...s, attempt: s.attempt + 1 },
        mode: o.status === 410 ? 'gone-410' : 'list-failed',
      };
    case 'watch-ended':
      // The server closes every watch after timeoutSeconds; resume from the last resourceVersion.
      return o.healthy
        ? { next: 'watch', delayMs: 0, state: initialLoopState, mode: 'reconnect' }
        : { next: 'watch', delayMs: backoff(), state: { ...s, attempt: s.attempt + 1 }, mode: 'reconnect' };
    case 'watch-failed': {
      const watchFailures = o.healthy ? 1 : s.watchFailures + 1;
      const next = watchFailures >= policy.relistAfterWatchFailures ? 'list' : 'watch';
      return o.healthy
        ? { next, delayMs: 0, state: { attempt: 0, watchFailures, gones: 0 }, mode: 'watch-failed' }
        : {
            next,
            delayMs: backoff(),
            state: { ...s, attempt: s.attempt + 1, watchFailures },
            mode: 'watch-failed',
          };
    }
    case 'gone': {
      const first = o.healthy || s.gones === 0;
      const base = o.healthy ? initialLoopState : s;
      return {
        next: 'list',
        delayMs: first ? 0 : backoff(),
        state: { attempt: first ? base.attempt : s.attempt + 1, watchFailures: 0, gones: base.gones + 1 },
        mode: 'gone-410',
      };
    }
    case 'idle': {
      // A silent stream lasted idleTimeoutMs already, so reconnecting at once cannot spin.
      const watchFailures = s.watchFailures + 1;
      const next = watchFailures >= policy.relistAfterWatchFailures ? 'list' : 'watch';
      return { next, delayMs: 0, state: { ...s, watchFailures }, mode: 'idle-timeout' };
    }
    case 'relist-due':
      return { next: 'list', delayMs: 0, state: o.healthy ? initialLoopState : s };
  }
}

/** A Kubernetes object as the API server sent it: plain JSON, no model classes. */
export interface RawObject {
  apiVersion?: string;
  kind?: string;
  metadata: RawMeta;
  [field: string]: unknown;
}

export interface RawMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [field: string]: unknown;
}

/** One line of a watch stream, read. */
export type WatchEvent =
  | { kind: 'upsert'; object: RawObject }
  | { kind: 'delete'; object: RawObject }
  | { kind: 'bookmark'; resourceVersion: string }
  | { kind: 'gone'; message: string }
  | { kind: 'error'; status?: number; message: string };

function isRawObject(v: unknown): v is RawObject {
  const meta = (v as { metadata?: { name?: unknown } } | null)?.metadata;
  return typeof v === 'object' && v !== null && typeof meta?.name === 'string';
}

/** Reads a parsed watch event. Anything unexpected is an 'error', which restarts the watch. */
export function readWatchEvent(parsed: unknown): WatchEvent {
  const e = parsed as { type?: unknown; object?: unknown } | null;
  const type = e?.type;
  const object = e?.object;
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      if (!isRawObject(object)) return { kind: 'error', message: `${type} event without an object name` };
      return { kind: type === 'DELETED' ? 'delete' : 'upsert', object };
    case 'BOOKMARK': {
      const rv = (object as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata
        ?.resourceVersion;
      if (typeof rv !== 'string' || rv === '') {
        return { kind: 'error', message: 'BOOKMARK event without a resourceVersion' };
      }
      return { kind: 'bookmark', resourceVersion: rv };
    }
    case 'ERROR': {
      const st = object as { code?: unknown; reason?: unknown; message?: unknown } | undefined;
      const message = typeof st?.message === 'string' ? st.message : JSON.stringify(object);
      if (st?.code === 410 || st?.reason === 'Expired' || st?.reason === 'Gone')
        return { kind: 'gone', message };
      return typeof st?.code === 'number'
        ? { kind: 'error', status: st.code, message }
        : { kind: 'error', message };
    }
    default:
      return { kind: 'error', message: `unknown watch event type ${JSON.stringify(type)}` };
  }
}

/** `namespace/name`, or `name` for a cluster-scoped object. */
export function objectKey(raw: RawObject): string {
  const { namespace, name } = raw.metadata;
  // Joined rather than concatenated, so the store's key is a flat string, not a rope (core/types.ts).
  return namespace ? [namespace, name].join('/') : name;
}

/** A stored value and the resourceVersion of the object it came from. */
export interface Versioned<S> {
  value: S;
  resourceVersion: string;
}

export type Change<S> =
  | { type: 'add'; key: string; entry: Versioned<S> }
  | { type: 'update'; key: string; entry: Versioned<S>; old: S }
  | { type: 'delete'; key: string; old: S };

/**
 * What a full LIST says the store missed: adds and updates in list order, then deletes. An object counts as
 * changed when its resourceVersion differs (a delete and re-create under the same name also differs).
 * The store is given as its values and the resourceVersion each came from.
 */
export function diffRelist<S>(
  values: ReadonlyMap<string, S>,
  versions: ReadonlyMap<string, string>,
  listed: ReadonlyMap<string, Versioned<S>>,
): Change<S>[] {
  const changes: Change<S>[] = [];
  for (const [key, entry] of listed) {
    if (!values.has(key)) changes.push({ type: 'add', key, entry });
    else if (versions.get(key) !== entry.resourceVersion) {
      changes.push({ type: 'update', key, entry, old: values.get(key) as S });
    }
  }
  for (const [key, old] of values) {
    if (!listed.has(key)) changes.push({ type: 'delete', key, old });
  }
  return changes;
}

export interface Selectors {
  labelSelector?: string;
  fieldSelector?: string;
}

/** Path and query of one LIST page. */
export function listUrl(path: string, sel: Selectors, limit: number, continueToken?: string): string {
  const q = new URLSearchParams();
  if (sel.labelSelector) q.set('labelSelector', sel.labelSelector);
  if (sel.fieldSelector) q.set('fieldSelector', sel.fieldSelector);
  if (limit > 0) q.set('limit', String(limit));
  if (continueToken) q.set('continue', continueToken);
  const query = q.toString();
  return query ? `${path}?${query}` : path;
}

/**
 * Path and query of a WATCH from a resourceVersion, with bookmarks so the idle check sees a quiet stream
 * live. `initialEvents` asks for a WatchList instead: the current state first, then an end-of-initial-
 * events bookmark (resourceVersion must then be empty).
 */
export function watchUrl(
  path: string,
  sel: Selectors,
  resourceVersion: string,
  timeoutSeconds: number,
  initialEvents = false,
): string {
  const q = new URLSearchParams({ watch: 'true', allowWatchBookmarks: 'true' });
  if (resourceVersion) q.set('resourceVersion', resourceVersion);
  if (initialEvents) {
    q.set('sendInitialEvents', 'true');
    q.set('resourceVersionMatch', 'NotOlderThan');
  }
  if (sel.labelSelector) q.set('labelSelector', sel.labelSelector);
  if (sel.fieldSelector) q.set('fieldSelector', sel.fieldSelector);
  if (timeoutSeconds > 0) q.set('timeoutSeconds', String(timeoutSeconds));
  return `${path}?${q.toString()}`;
}
