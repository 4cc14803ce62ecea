import { describe, expect, it } from 'vitest';
import {
  backoffDelay,
  decide,
  diffRelist,
  initialLoopState,
  type LoopPolicy,
  type LoopState,
  listUrl,
  type Outcome,
  objectKey,
  readWatchEvent,
  relistDelay,
  type Versioned,
  watchUrl,
} from './watch-logic.ts';

const policy: LoopPolicy = { backoff: { initialMs: 1000, maxMs: 30_000 }, relistAfterWatchFailures: 3 };
const low = () => 0;
const high = () => 0.999999;

/** Runs outcomes through decide, as the loop does, and returns every step. */
function run(outcomes: Outcome[], state: LoopState = initialLoopState, random = high) {
  const steps = [];
  for (const o of outcomes) {
    const step = decide(state, o, policy, random);
    steps.push(step);
    state = step.state;
  }
  return steps;
}

describe('backoffDelay', () => {
  it('doubles the ceiling per attempt and draws from its upper half', () => {
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, policy.backoff, high))).toEqual([1000, 2000, 4000, 8000]);
    expect([0, 1, 2, 3].map((a) => backoffDelay(a, policy.backoff, low))).toEqual([500, 1000, 2000, 4000]);
  });

  it('never exceeds the cap, even after very many attempts', () => {
    for (const a of [5, 6, 50, 10_000]) {
      expect(backoffDelay(a, policy.backoff, high)).toBe(30_000);
      expect(backoffDelay(a, policy.backoff, low)).toBe(15_000);
    }
  });

  it('spreads retries of replicas that failed together', () => {
    const seen = new Set(Array.from({ length: 50 }, () => backoffDelay(4, policy.backoff)));
    expect(seen.size).toBeGreaterThan(10);
    for (const d of seen) expect(d).toBeGreaterThanOrEqual(8000);
  });
});

describe('relistDelay', () => {
  it('adds up to 10% jitter to the interval', () => {
    expect(relistDelay(600_000, low)).toBe(600_000);
    expect(relistDelay(600_000, high)).toBe(660_000);
  });
});

describe('decide', () => {
  it('watches at once after a successful LIST', () => {
    expect(decide(initialLoopState, { kind: 'listed' }, policy)).toEqual({
      next: 'watch',
      delayMs: 0,
      state: initialLoopState,
    });
  });

  it('retries a failed LIST (403 included) with growing backoff, forever', () => {
    const steps = run(Array.from({ length: 8 }, () => ({ kind: 'list-failed', status: 403 }) as Outcome));
    expect(steps.map((s) => s.next)).toEqual(Array(8).fill('list'));
    expect(steps.map((s) => s.mode)).toEqual(Array(8).fill('list-failed'));
    expect(steps.map((s) => s.delayMs)).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it('calls an expired continue token (410 on LIST) gone-410 and lists again', () => {
    const step = decide(initialLoopState, { kind: 'list-failed', status: 410 }, policy, high);
    expect(step).toMatchObject({ next: 'list', mode: 'gone-410', delayMs: 1000 });
  });

  it('resumes the watch at once when the server ends a healthy stream', () => {
    const s: LoopState = { attempt: 4, watchFailures: 2, gones: 1 };
    expect(decide(s, { kind: 'watch-ended', healthy: true }, policy)).toEqual({
      next: 'watch',
      delayMs: 0,
      state: initialLoopState,
      mode: 'reconnect',
    });
  });

  it('backs off when streams keep ending at once', () => {
    const steps = run(Array.from({ length: 3 }, () => ({ kind: 'watch-ended', healthy: false }) as Outcome));
    expect(steps.map((s) => [s.next, s.delayMs, s.mode])).toEqual([
      ['watch', 1000, 'reconnect'],
      ['watch', 2000, 'reconnect'],
      ['watch', 4000, 'reconnect'],
    ]);
  });

  it('relists at once on 410 Gone after a healthy watch', () => {
    const step = decide({ attempt: 3, watchFailures: 1, gones: 0 }, { kind: 'gone', healthy: true }, policy);
    expect(step).toEqual({
      next: 'list',
      delayMs: 0,
      state: { attempt: 0, watchFailures: 0, gones: 1 },
      mode: 'gone-410',
    });
  });

  it('relists at once on the first 410 of a reconnect, even after a failure streak', () => {
    // The typical case: the network was down long enough that the last resourceVersion expired.
    const s: LoopState = { attempt: 7, watchFailures: 1, gones: 0 };
    expect(decide(s, { kind: 'gone', healthy: false }, policy)).toMatchObject({ next: 'list', delayMs: 0 });
  });

  it('backs off when 410 repeats without a healthy watch in between', () => {
    const steps = run([
      { kind: 'gone', healthy: false },
      { kind: 'listed' },
      { kind: 'gone', healthy: false },
      { kind: 'listed' },
      { kind: 'gone', healthy: false },
    ]);
    expect(steps.filter((s) => s.mode === 'gone-410').map((s) => s.delayMs)).toEqual([0, 1000, 2000]);
  });

  it('resumes a failed watch from its resourceVersion, then relists after 3 failures in a row', () => {
    const steps = run(
      Array.from({ length: 4 }, () => ({ kind: 'watch-failed', status: 500, healthy: false }) as Outcome),
    );
    expect(steps.map((s) => s.next)).toEqual(['watch', 'watch', 'list', 'list']);
    expect(steps.map((s) => s.delayMs)).toEqual([1000, 2000, 4000, 8000]);
    expect(steps.every((s) => s.mode === 'watch-failed')).toBe(true);
  });

  it('keeps backing off when LIST works but WATCH is forbidden, instead of relisting in a tight loop', () => {
    const cycle: Outcome[] = [
      { kind: 'listed' },
      { kind: 'watch-failed', status: 403, healthy: false },
      { kind: 'watch-failed', status: 403, healthy: false },
      { kind: 'watch-failed', status: 403, healthy: false },
    ];
    const steps = run([...cycle, ...cycle, ...cycle]);
    const delays = steps.filter((s) => s.mode === 'watch-failed').map((s) => s.delayMs);
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]);
  });

  it('reconnects at once after a healthy watch breaks, and resets the backoff', () => {
    const s: LoopState = { attempt: 5, watchFailures: 2, gones: 2 };
    expect(decide(s, { kind: 'watch-failed', healthy: true }, policy)).toEqual({
      next: 'watch',
      delayMs: 0,
      state: { attempt: 0, watchFailures: 1, gones: 0 },
      mode: 'watch-failed',
    });
  });

  it('restarts a silent watch at once, and relists when it keeps going silent', () => {
    const steps = run([{ kind: 'idle' }, { kind: 'idle' }, { kind: 'idle' }]);
    expect(steps.map((s) => [s.next, s.delayMs, s.mode])).toEqual([
      ['watch', 0, 'idle-timeout'],
      ['watch', 0, 'idle-timeout'],
      ['list', 0, 'idle-timeout'],
    ]);
  });

  it('relists when the periodic relist is due, without reporting a failure', () => {
    const step = decide(
      { attempt: 2, watchFailures: 0, gones: 0 },
      { kind: 'relist-due', healthy: true },
      policy,
    );
    expect(step).toEqual({ next: 'list', delayMs: 0, state: initialLoopState });
    expect(step.mode).toBeUndefined();
  });

  it('never stops: every outcome leads to another list or watch', () => {
    const outcomes: Outcome[] = [
      { kind: 'listed' },
      { kind: 'list-failed' },
      { kind: 'list-failed', status: 401 },
      { kind: 'watch-ended', healthy: false },
      { kind: 'watch-failed', healthy: false },
      { kind: 'gone', healthy: false },
      { kind: 'idle' },
      { kind: 'relist-due', healthy: false },
    ];
    for (let i = 0; i < 200; i++) {
      const steps = run(
        Array.from({ length: 20 }, (_, j) => outcomes[(i * 7 + j * 3) % outcomes.length] as Outcome),
      );
      for (const s of steps) {
        expect(['list', 'watch']).toContain(s.next);
        expect(s.delayMs).toBeGreaterThanOrEqual(0);
        expect(s.delayMs).toBeLessThanOrEqual(policy.backoff.maxMs);
      }
    }
  });
});

describe('readWatchEvent', () => {
  const cm = { kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', resourceVersion: '7' } };

  it('reads ADDED and MODIFIED as upserts and DELETED as a delete', () => {
    expect(readWatchEvent({ type: 'ADDED', object: cm })).toEqual({ kind: 'upsert', object: cm });
    expect(readWatchEvent({ type: 'MODIFIED', object: cm })).toEqual({ kind: 'upsert', object: cm });
    expect(readWatchEvent({ type: 'DELETED', object: cm })).toEqual({ kind: 'delete', object: cm });
  });

  it('reads a BOOKMARK as its resourceVersion only', () => {
    const bookmark = { type: 'BOOKMARK', object: { kind: 'ConfigMap', metadata: { resourceVersion: '42' } } };
    expect(readWatchEvent(bookmark)).toEqual({ kind: 'bookmark', resourceVersion: '42' });
  });

  it('reads an ERROR with code 410 as gone, as the API server sends it for a too-old resourceVersion', () => {
    // Verbatim from kube-apiserver v1.36 for a watch from resourceVersion=1 after the watch cache rolled over.
    const line =
      '{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (1601)","reason":"Expired","code":410}}';
    expect(readWatchEvent(JSON.parse(line))).toEqual({
      kind: 'gone',
      message: 'too old resource version: 1 (1601)',
    });
  });

  it('reads other ERROR events as errors with their code', () => {
    const e = { type: 'ERROR', object: { kind: 'Status', code: 500, message: 'internal error' } };
    expect(readWatchEvent(e)).toEqual({ kind: 'error', status: 500, message: 'internal error' });
  });

  it('calls anything malformed an error, so the watch restarts instead of corrupting the store', () => {
    expect(readWatchEvent({ type: 'ADDED', object: { metadata: {} } }).kind).toBe('error');
    expect(readWatchEvent({ type: 'BOOKMARK', object: {} }).kind).toBe('error');
    expect(readWatchEvent({ type: 'WHAT', object: cm }).kind).toBe('error');
    expect(readWatchEvent(null).kind).toBe('error');
    expect(readWatchEvent('text').kind).toBe('error');
  });
});

describe('objectKey', () => {
  it('is namespace/name, or name for a cluster-scoped object', () => {
    expect(objectKey({ metadata: { name: 'a', namespace: 'ns' } })).toBe('ns/a');
    expect(objectKey({ metadata: { name: 'node-1' } })).toBe('node-1');
  });
});

describe('diffRelist', () => {
  const v = (value: string, resourceVersion: string): Versioned<string> => ({ value, resourceVersion });
  const store = (entries: [string, Versioned<string>][]) => ({
    values: new Map(entries.map(([k, e]) => [k, e.value])),
    versions: new Map(entries.map(([k, e]) => [k, e.resourceVersion])),
  });

  it('emits an add for each object of a first LIST, in list order', () => {
    const { values, versions } = store([]);
    const listed = new Map([
      ['ns/b', v('B', '2')],
      ['ns/a', v('A', '1')],
    ]);
    expect(diffRelist(values, versions, listed)).toEqual([
      { type: 'add', key: 'ns/b', entry: v('B', '2') },
      { type: 'add', key: 'ns/a', entry: v('A', '1') },
    ]);
  });

  it('emits what the store missed: add, update with the old value, delete; nothing for unchanged', () => {
    const { values, versions } = store([
      ['ns/same', v('S', '10')],
      ['ns/changed', v('old', '11')],
      ['ns/gone', v('G', '12')],
    ]);
    const listed = new Map([
      ['ns/same', v('S', '10')],
      ['ns/changed', v('new', '20')],
      ['ns/new', v('N', '21')],
    ]);
    expect(diffRelist(values, versions, listed)).toEqual([
      { type: 'update', key: 'ns/changed', entry: v('new', '20'), old: 'old' },
      { type: 'add', key: 'ns/new', entry: v('N', '21') },
      { type: 'delete', key: 'ns/gone', old: 'G' },
    ]);
  });

  it('emits nothing when the store is current', () => {
    const entries: [string, Versioned<string>][] = [
      ['a', v('A', '1')],
      ['b', v('B', '2')],
    ];
    const { values, versions } = store(entries);
    expect(diffRelist(values, versions, new Map(entries))).toEqual([]);
  });

  it('emits a delete for every object when the LIST comes back empty', () => {
    const { values, versions } = store([
      ['a', v('A', '1')],
      ['b', v('B', '2')],
    ]);
    expect(diffRelist(values, versions, new Map()).map((c) => [c.type, c.key])).toEqual([
      ['delete', 'a'],
      ['delete', 'b'],
    ]);
  });
});

describe('listUrl and watchUrl', () => {
  const sel = { labelSelector: 'app in (a,b)', fieldSelector: 'metadata.name!=x' };

  it('pages a LIST with limit and continue and encodes selectors', () => {
    expect(listUrl('/api/v1/configmaps', {}, 0)).toBe('/api/v1/configmaps');
    const u = new URL(`http://h${listUrl('/api/v1/configmaps', sel, 500, 'tok=')}`);
    expect(u.pathname).toBe('/api/v1/configmaps');
    expect(Object.fromEntries(u.searchParams)).toEqual({
      labelSelector: 'app in (a,b)',
      fieldSelector: 'metadata.name!=x',
      limit: '500',
      continue: 'tok=',
    });
  });

  it('watches from a resourceVersion with bookmarks and a server-side timeout', () => {
    const u = new URL(`http://h${watchUrl('/apis/argoproj.io/v1alpha1/rollouts', sel, '123', 300)}`);
    expect(u.pathname).toBe('/apis/argoproj.io/v1alpha1/rollouts');
    expect(Object.fromEntries(u.searchParams)).toEqual({
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: '123',
      labelSelector: 'app in (a,b)',
      fieldSelector: 'metadata.name!=x',
      timeoutSeconds: '300',
    });
  });
});
