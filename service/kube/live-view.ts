// One reload's exact view of the objects it acts on (its workload, or that workload's pods), kept
// current by a single WATCH instead of a GET and a LIST on every poll. The watch opens with the
// current state (the WatchList feature: sendInitialEvents, ended by a bookmark annotated
// k8s.io/initial-events-end), so reading costs no LIST at all. Where the API server refuses
// WatchList, a LIST gives the state and the watch resumes from its resourceVersion; that choice is
// remembered for the process. A view is short-lived: it never relists periodically, and it is
// stopped when its reload ends.
import type { ClusterAccess } from './access.ts';
import { getJson, KubeHttpError, streamLines } from './watch-http.ts';
import { listUrl, type RawObject, readWatchEvent, watchUrl } from './watch-logic.ts';

export interface LiveViewOptions<T> {
  /** Collection path, e.g. /api/v1/namespaces/NS/pods. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Reduces a raw object to what the view keeps (by name). */
  transform: (raw: RawObject) => T;
  /** Stops the view when aborted. */
  signal: AbortSignal;
  /** How long the initial state may take before the attempt counts as failed. Default 30 s. */
  initialTimeoutMs?: number;
  /**
   * How the view gets the current state: 'auto' (default) uses WatchList and falls back to a LIST
   * for the rest of the process once the API server refuses it; 'list' always LISTs first.
   */
  initialState?: 'auto' | 'list';
}

export interface LiveView<T> {
  /** The objects by name, current as of the last event. Complete once `ready` resolved. */
  readonly items: ReadonlyMap<string, T>;
  /** Resolves once the view holds the complete current state (rejects only when stopped first). */
  readonly ready: Promise<void>;
  /** The last failure while the view is not watching, for a stall report; undefined when healthy. */
  readonly failing: string | undefined;
  /** Resolves at the next change of the view, after `ms`, when stopped, or when `cancel` aborts. */
  changed(ms: number, cancel?: AbortSignal): Promise<void>;
  /** Resolves once `pred` holds for the view, or false after `ms`. */
  until(pred: (items: ReadonlyMap<string, T>) => boolean, ms: number): Promise<boolean>;
  stop(): Promise<void>;
}

const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';
const WATCH_TIMEOUT_S = 290;
const BACKOFF_MS = [250, 500, 1_000, 2_000, 5_000];

/** Whether the API server serves WatchList; learnt on first use, for the life of the process. */
let watchListServed: boolean | undefined;

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function openLiveView<T>(kc: ClusterAccess, o: LiveViewOptions<T>): LiveView<T> {
  const items = new Map<string, T>();
  const stopper = new AbortController();
  const signal = AbortSignal.any([o.signal, stopper.signal]);
  const waiters = new Set<() => void>();
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  let failing: string | undefined;
  let markReady: () => void = () => undefined;
  let markStopped: (err: unknown) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    markStopped = reject;
  });
  ready.catch(() => undefined);
  let isReady = false;
  const becameReady = () => {
    if (isReady) return;
    isReady = true;
    markReady();
  };

  /** Applies one watch line; returns what the loop should do about it. */
  const apply = (
    line: string,
    collecting: Map<string, T> | undefined,
  ): { rv?: string; initialEnd?: boolean; gone?: boolean; error?: string } => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return { error: `invalid JSON in the watch stream: ${line.slice(0, 120)}` };
    }
    const ev = readWatchEvent(parsed);
    switch (ev.kind) {
      case 'upsert':
      case 'delete': {
        const target = collecting ?? items;
        if (ev.kind === 'delete') target.delete(ev.object.metadata.name);
        else target.set(ev.object.metadata.name, o.transform(ev.object));
        if (!collecting) notify();
        return { rv: ev.object.metadata.resourceVersion };
      }
      case 'bookmark': {
        const annotations = (parsed as { object?: { metadata?: { annotations?: Record<string, string> } } })
          .object?.metadata?.annotations;
        return { rv: ev.resourceVersion, initialEnd: annotations?.[INITIAL_EVENTS_END] === 'true' };
      }
      case 'gone':
        return { gone: true };
      case 'error':
        return { error: ev.message };
    }
  };

  async function loop(): Promise<void> {
    let rv = '';
    let failures = 0;
    while (!signal.aborted) {
      const local = new AbortController();
      const attempt = AbortSignal.any([signal, local.signal]);
      let cause: string | undefined;
      let gone = false;
      try {
        if (!rv && (watchListServed === false || o.initialState === 'list')) {
          const list = (await getJson(kc, listUrl(o.path, o, 0), attempt, o.initialTimeoutMs ?? 30_000)) as {
            metadata?: { resourceVersion?: string };
            items?: RawObject[];
          };
          items.clear();
          for (const raw of list.items ?? []) items.set(raw.metadata.name, o.transform(raw));
          rv = list.metadata?.resourceVersion ?? '';
          becameReady();
          notify();
        }
        // No resourceVersion yet: a WatchList that opens with the current state.
        let collecting: Map<string, T> | undefined = rv ? undefined : new Map<string, T>();
        const initialTimer = collecting
          ? setTimeout(() => {
              // An API server that ignores sendInitialEvents streams the objects but never the
              // end-of-initial-events bookmark: if WatchList never worked here, LIST from now on.
              if (watchListServed === undefined) watchListServed = false;
              local.abort(new Error('the initial state did not arrive in time'));
            }, o.initialTimeoutMs ?? 30_000)
          : undefined;
        const url = watchUrl(o.path, o, rv, WATCH_TIMEOUT_S, !rv);
        try {
          await streamLines(kc, url, attempt, (line) => {
            if (cause || gone) return;
            const r = apply(line, collecting);
            // While the initial state streams in, rv is not usable: a broken stream must start over.
            if (r.rv && (!collecting || r.initialEnd)) rv = r.rv;
            if (r.error) {
              cause = r.error;
              local.abort();
            } else if (r.gone) {
              gone = true;
              local.abort();
            } else if (r.initialEnd && collecting) {
              items.clear();
              for (const [k, v] of collecting) items.set(k, v);
              collecting = undefined;
              clearTimeout(initialTimer);
              watchListServed = true;
              failures = 0;
              failing = undefined;
              becameReady();
              notify();
            }
          });
          // The server ended the watch: resume from rv, or start over, after a backoff, if it ended
          // before the initial state was complete.
          if (collecting) {
            rv = '';
            cause = 'the watch ended before the initial state was complete';
          } else failures = 0;
        } finally {
          clearTimeout(initialTimer);
        }
      } catch (err) {
        if (signal.aborted) break;
        const status = err instanceof KubeHttpError ? err.status : undefined;
        if (!rv && watchListServed === undefined && (status === 400 || status === 422)) {
          // An API server without WatchList rejects sendInitialEvents: LIST from now on.
          watchListServed = false;
          continue;
        }
        cause ??= message(attempt.aborted && !local.signal.aborted ? attempt.reason : err);
      }
      if (signal.aborted) break;
      if (gone) {
        rv = '';
        continue;
      }
      if (cause) {
        failing = `${o.path}: ${cause}`;
        const delay = BACKOFF_MS[Math.min(failures, BACKOFF_MS.length - 1)] as number;
        failures++;
        // After repeated failures, start over from the current state in case rv was the problem.
        if (failures >= 3) rv = '';
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, delay);
          function done() {
            clearTimeout(t);
            signal.removeEventListener('abort', done);
            resolve();
          }
          signal.addEventListener('abort', done, { once: true });
        });
      }
    }
    markStopped(signal.reason ?? new Error('view stopped'));
    notify();
  }

  const done = loop();

  return {
    items,
    ready,
    get failing() {
      return failing;
    },
    changed(ms, cancel) {
      return new Promise<void>((resolve) => {
        if (signal.aborted || cancel?.aborted) {
          resolve();
          return;
        }
        const t = setTimeout(finish, ms);
        function finish() {
          clearTimeout(t);
          waiters.delete(finish);
          signal.removeEventListener('abort', finish);
          cancel?.removeEventListener('abort', finish);
          resolve();
        }
        waiters.add(finish);
        signal.addEventListener('abort', finish, { once: true });
        cancel?.addEventListener('abort', finish, { once: true });
      });
    },
    async until(pred, ms) {
      const deadline = Date.now() + ms;
      while (!pred(items)) {
        const left = deadline - Date.now();
        if (left <= 0 || signal.aborted) return false;
        await this.changed(left);
      }
      return true;
    },
    stop() {
      stopper.abort(new Error(`view ${o.path} stopped`));
      return done;
    },
  };
}
