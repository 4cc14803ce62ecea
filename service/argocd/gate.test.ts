import { describe, expect, it } from 'vitest';
import type { Change, Timers } from '../core/batcher.ts';
import type { ConfigRecord } from '../core/records.ts';
import { createLogger, silentLogger } from '../log.ts';
import { SyncGate, type SyncGateOptions } from './gate.ts';
import { type AppSync, appFromObject } from './sync-tracker.ts';

class FakeTimers implements Timers {
  t = 1_000_000;
  jobs = new Map<number, { at: number; fn: () => void }>();
  #id = 0;
  now = () => this.t;
  set = (fn: () => void, ms: number) => {
    const id = ++this.#id;
    this.jobs.set(id, { at: this.t + ms, fn });
    return id;
  };
  clear = (h: unknown) => void this.jobs.delete(h as number);
  advance(ms: number) {
    this.t += ms;
    for (const [id, j] of [...this.jobs].sort((a, b) => a[1].at - b[1].at)) {
      if (j.at <= this.t) {
        this.jobs.delete(id);
        j.fn();
      }
    }
  }
}

const TRACK = 'argocd.argoproj.io/tracking-id';

function config(name: string, app = 'shop', appNs = ''): ConfigRecord {
  const instance = appNs ? `${appNs}_${app}` : app;
  return {
    ref: { kind: 'ConfigMap', namespace: 'web', name },
    uid: name,
    resourceVersion: '1',
    annotations: app ? { [TRACK]: `${instance}:/ConfigMap:web/${name}` } : {},
    labels: {},
    digest: { all: 'x', keys: {} } as unknown as ConfigRecord['digest'],
  };
}

function appState(phase: string | undefined, startedAt = '2026-12-02T10:00:00Z', ns = 'argocd'): AppSync {
  return appFromObject({
    metadata: { name: 'shop', namespace: ns },
    spec: {},
    ...(phase ? { status: { operationState: { phase, startedAt } } } : {}),
  }) as AppSync;
}

/** The app's sync ended well, with this sync result (its revision or revisions). */
function succeeded(syncResult: Record<string, unknown>): AppSync {
  return appFromObject({
    metadata: { name: 'shop', namespace: 'argocd' },
    spec: {},
    status: { operationState: { phase: 'Succeeded', startedAt: '2026-12-02T10:00:00Z', syncResult } },
  }) as AppSync;
}

function setup(o: Partial<SyncGateOptions> = {}) {
  const timers = new FakeTimers();
  const released: Change[] = [];
  const gate = new SyncGate({
    tracking: {
      method: 'annotation+label',
      labelKey: 'app.kubernetes.io/instance',
      controlNamespace: 'argocd',
    },
    onFailedSync: 'reload',
    watched: (ns) => ns === 'argocd',
    notificationsEnabled: true,
    usersOf: (ref) => (ref.name === 'payload-only' ? [{ workload: 'Deployment/web/api' }] : []),
    log: silentLogger,
    timers,
    ...o,
  });
  gate.attach({ add: (c) => released.push(c) });
  const change = (config: string, at = timers.now()): Change => ({
    workload: 'Deployment/web/api',
    config: `ConfigMap/web/${config}`,
    observedAt: at,
  });
  return { gate, timers, released, change };
}

describe('SyncGate', () => {
  it('lets a change through when no Application tracks the config', () => {
    const { gate, change } = setup();
    expect(gate.hold(change('a'), config('a', ''))).toBe(false);
  });

  it('lets a change through when its app is not syncing', () => {
    const { gate, change } = setup();
    gate.observe(appState('Succeeded'));
    expect(gate.hold(change('a'), config('a')), 'after a sync').toBe(false);
    expect(gate.hold(change('b'), config('b', 'unknown-app')), 'unknown app').toBe(false);
  });

  it('holds changes while the app syncs and releases them as one batch with debounce 0 when it ends', () => {
    const { gate, released, change, timers } = setup();
    gate.observe(appState('Running'));
    const first = change('a');
    expect(gate.hold(first, config('a'))).toBe(true);
    timers.advance(5_000);
    expect(gate.hold(change('b'), config('b'))).toBe(true);
    expect(gate.hold(change('a'), config('a'))).toBe(true);
    expect(released).toEqual([]);
    gate.observe(appState('Succeeded'));
    expect(released.map((c) => [c.config, c.debounceMs])).toEqual([
      ['ConfigMap/web/a', 0],
      ['ConfigMap/web/b', 0],
    ]);
    // The later observation of `a` is kept: the reload's cutoff follows the last change.
    expect(released[0]?.observedAt).toBe(first.observedAt + 5_000);
  });

  it('says what it held: the workload, the config and its resourceVersion', () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger('debug', { write: (l: string) => void lines.push(JSON.parse(l)) });
    const { gate, change } = setup({ log });
    gate.observe(appState('Running'));
    expect(gate.hold(change('a'), { ...config('a'), resourceVersion: '42' })).toBe(true);
    expect(lines.filter((l) => l.msg === 'config change held until the Argo CD sync ends')).toEqual([
      expect.objectContaining({
        workload: 'Deployment/web/api',
        configs: ['ConfigMap/web/a'],
        resourceVersion: '42',
      }),
    ]);
  });

  it('lists what it holds, per workload and Application, and releases it with the sync it followed', () => {
    const { gate, released, change, timers } = setup();
    gate.observe(appState('Running'));
    gate.hold(change('a'), config('a'));
    timers.advance(1_000);
    gate.hold(change('b'), config('b'));
    expect([...gate.held()]).toEqual([
      { workload: 'Deployment/web/api', config: 'ConfigMap/web/a', app: 'argocd/shop', since: 1_000_000 },
      { workload: 'Deployment/web/api', config: 'ConfigMap/web/b', app: 'argocd/shop', since: 1_001_000 },
    ]);
    gate.observe(succeeded({ revision: 'abc123' }));
    expect([...gate.held()]).toEqual([]);
    expect(released.map((c) => c.via)).toEqual([
      { app: 'argocd/shop', revision: 'abc123' },
      { app: 'argocd/shop', revision: 'abc123' },
    ]);
  });

  it('a multi-source sync gives its revisions; a deleted Application no sync', () => {
    const multi = setup();
    multi.gate.observe(appState('Running'));
    multi.gate.hold(multi.change('a'), config('a'));
    multi.gate.observe(succeeded({ revisions: ['r1', 'r2'] }));
    expect(multi.released[0]?.via).toEqual({ app: 'argocd/shop', revision: 'r1,r2' });
    const gone = setup();
    gone.gate.observe(appState('Running'));
    gone.gate.hold(gone.change('a'), config('a'));
    gone.gate.appDeleted({ namespace: 'argocd', name: 'shop' });
    expect(gone.released).toHaveLength(1);
    expect(gone.released[0]).not.toHaveProperty('via');
  });

  it('releases after a failed sync by default, and keeps holding under --argocd-on-failed-sync=hold', () => {
    const reload = setup();
    reload.gate.observe(appState('Running'));
    reload.gate.hold(reload.change('a'), config('a'));
    reload.gate.observe(appState('Failed'));
    expect(reload.released).toHaveLength(1);

    const hold = setup({ onFailedSync: 'hold' });
    hold.gate.observe(appState('Running'));
    hold.gate.hold(hold.change('a'), config('a'));
    hold.gate.observe(appState('Error'));
    expect(hold.released).toEqual([]);
    // Changes made after the failure join the held batch; the next successful sync releases all.
    expect(hold.gate.hold(hold.change('b'), config('b'))).toBe(true);
    hold.gate.observe(appState('Running', '2026-12-02T10:10:00Z'));
    hold.gate.observe(appState('Succeeded', '2026-12-02T10:10:00Z'));
    expect(hold.released.map((c) => c.config)).toEqual(['ConfigMap/web/a', 'ConfigMap/web/b']);
  });

  describe('at the start of a new term (the hold re-derived from the Application, docs/adr/0029)', () => {
    it('holds a change found at start when the last sync failed under hold, until a sync succeeds', () => {
      // A new process: its first look at the app is the failed operation Argo CD kept in its status.
      const { gate, released, change } = setup({ onFailedSync: 'hold' });
      gate.observe(appState('Failed'));
      expect(gate.holdAtStart(change('a'), config('a'))).toBe(true);
      // A later change joins, as after a failure seen live.
      expect(gate.hold(change('b'), config('b'))).toBe(true);
      gate.observe(appState('Running', '2026-12-02T10:10:00Z'));
      expect(released).toEqual([]);
      gate.observe(appState('Failed', '2026-12-02T10:10:00Z'));
      expect(released, 'another failure keeps the hold').toEqual([]);
      gate.observe(appState('Succeeded', '2026-12-02T10:20:00Z'));
      expect(released.map((c) => [c.config, c.debounceMs])).toEqual([
        ['ConfigMap/web/a', 0],
        ['ConfigMap/web/b', 0],
      ]);
    });

    it('lets a change found at start through after a failed sync under the default policy, after a success, or for an untracked config', () => {
      const reload = setup();
      reload.gate.observe(appState('Error'));
      expect(reload.gate.holdAtStart(reload.change('a'), config('a'))).toBe(false);
      const ok = setup({ onFailedSync: 'hold' });
      ok.gate.observe(appState('Succeeded'));
      expect(ok.gate.holdAtStart(ok.change('a'), config('a'))).toBe(false);
      expect(ok.gate.holdAtStart(ok.change('b'), config('b', ''))).toBe(false);
      // An app in a namespace we do not watch: its status is not ours to read.
      const other = setup({ onFailedSync: 'hold' });
      other.gate.observe(appState('Failed', '2026-12-02T10:00:00Z', 'elsewhere'));
      expect(other.gate.holdAtStart(other.change('a'), config('a', 'shop', 'elsewhere'))).toBe(false);
    });

    it('holds a change found at start while the app syncs, and releases it when the sync ends', () => {
      const { gate, released, change } = setup();
      gate.observe(appState('Running'));
      expect(gate.holdAtStart(change('a'), config('a'))).toBe(true);
      gate.observe(appState('Succeeded'));
      expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/a']);
    });
  });

  it('releases what it held when the Application is deleted', () => {
    const { gate, released, change } = setup();
    gate.observe(appState('Running'));
    gate.hold(change('a'), config('a'));
    gate.appDeleted({ namespace: 'argocd', name: 'shop' });
    expect(released).toHaveLength(1);
  });

  it('for a watched app, a notification asks for a refresh and is idempotent', async () => {
    let refreshed = 0;
    const { gate, released, change } = setup({
      refresh: async () => {
        refreshed++;
        return appState('Succeeded');
      },
    });
    gate.observe(appState('Running'));
    gate.hold(change('a'), config('a'));
    const n = {
      app: { namespace: 'argocd', name: 'shop' },
      phase: 'Succeeded' as const,
      startedAt: '2026-12-02T10:00:00Z',
      resources: [],
    };
    expect(await gate.notify(n)).toEqual({ outcome: 'accepted', action: 'refreshed the Application' });
    expect(released).toHaveLength(1);
    expect(await gate.notify(n)).toEqual({ outcome: 'duplicate' });
    expect(refreshed).toBe(1);
  });

  describe('for an app it cannot watch', () => {
    const unwatched = (o: Partial<SyncGateOptions> = {}) => setup({ watched: () => false, ...o });
    const n = (phase: 'Succeeded' | 'Failed', resources: { name: string }[] = []) => ({
      app: { namespace: 'argocd', name: 'shop' },
      phase,
      startedAt: '2026-12-02T10:00:00Z',
      resources: resources.map((r) => ({
        group: '',
        version: 'v1',
        kind: 'ConfigMap',
        namespace: 'web',
        ...r,
      })),
    });

    /** An app that notified before (an earlier sync), long enough ago for the grace to be over. */
    const notifying = async (o: Partial<SyncGateOptions> = {}) => {
      const s = unwatched(o);
      await s.gate.notify({ ...n('Succeeded'), startedAt: '2026-12-02T09:00:00Z' });
      s.timers.advance(60_000);
      return s;
    };

    it('after detach, a terminal notification neither throws nor releases into the old sink', async () => {
      const { gate, released, change } = await notifying();
      const sink = { add: (c: Change) => released.push(c) };
      gate.attach(sink);
      expect(gate.hold(change('a'), config('a'))).toBe(true);
      gate.detach(sink);
      expect(gate.heldCount('argocd/shop')).toBe(0);
      // A replica that never led, or no longer leads: the payload's configs have nowhere to go.
      await expect(gate.notify(n('Succeeded', [{ name: 'payload-only' }]))).resolves.toMatchObject({
        outcome: 'accepted',
      });
      expect(released).toHaveLength(0);
    });

    it('a terminal notification releases the changes with its revision', async () => {
      const { gate, released, change } = await notifying();
      expect(gate.hold(change('a'), config('a'))).toBe(true);
      await gate.notify({ ...n('Succeeded'), revision: 'def456' });
      expect(released.map((c) => c.via)).toEqual([{ app: 'argocd/shop', revision: 'def456' }]);
    });

    it('does not hold the changes of an app that never notified', () => {
      const { gate, change } = unwatched();
      expect(gate.hold(change('a'), config('a'))).toBe(false);
    });

    it('holds tracked changes until the terminal notification, whose resources join the batch', async () => {
      const { gate, released, change } = await notifying();
      expect(gate.hold(change('a'), config('a'))).toBe(true);
      expect(await gate.notify(n('Succeeded', [{ name: 'a' }, { name: 'payload-only' }]))).toMatchObject({
        outcome: 'accepted',
      });
      expect(released.map((c) => c.config).sort()).toEqual(['ConfigMap/web/a', 'ConfigMap/web/payload-only']);
      expect(await gate.notify(n('Succeeded'))).toEqual({ outcome: 'duplicate' });
      expect(released).toHaveLength(2);
    });

    it('does not hold a late change of a config the notification listed (the watch lagged)', async () => {
      const { gate, change, timers } = await notifying();
      await gate.notify(n('Succeeded', [{ name: 'a' }]));
      expect(gate.hold(change('a'), config('a')), 'listed, not seen').toBe(false);
      expect(gate.hold(change('b'), config('b')), 'not listed').toBe(true);
      timers.advance(5_000);
      expect(gate.hold(change('a'), config('a')), 'after the grace').toBe(true);
    });

    it('releases held changes when no notification comes in time', async () => {
      const { gate, released, change, timers } = await notifying({ unwatchedMaxHoldMs: 10_000 });
      gate.hold(change('a'), config('a'));
      timers.advance(9_999);
      expect(released).toEqual([]);
      timers.advance(1);
      expect(released).toHaveLength(1);
    });

    it('keeps a failed sync held under hold, with no safety release', async () => {
      const { gate, released, change, timers } = await notifying({
        onFailedSync: 'hold',
        unwatchedMaxHoldMs: 10_000,
      });
      gate.hold(change('a'), config('a'));
      await gate.notify(n('Failed'));
      expect(gate.hold(change('b'), config('b'))).toBe(true);
      timers.advance(60_000);
      expect(released).toEqual([]);
    });

    describe('the end of an older sync delivered after a newer one ended (seed 6291)', () => {
      const at = (startedAt: string, phase: 'Succeeded' | 'Failed') => ({ ...n(phase), startedAt });

      it('ignores a stale Failed end after a newer Succeeded: later changes are not held for good', async () => {
        const { gate, released, change, timers } = await notifying({
          onFailedSync: 'hold',
          unwatchedMaxHoldMs: 10_000,
        });
        await gate.notify({ ...at('2026-12-02T10:00:00Z', 'Succeeded'), phase: 'Running' });
        await gate.notify({ ...at('2026-12-02T10:05:00Z', 'Succeeded'), phase: 'Running' });
        expect(await gate.notify(at('2026-12-02T10:05:00Z', 'Succeeded'))).toEqual({
          outcome: 'accepted',
          action: 'sync Succeeded',
        });
        expect(await gate.notify(at('2026-12-02T10:00:00Z', 'Failed'))).toEqual({
          outcome: 'accepted',
          action: 'ignored: a newer sync already ended',
        });
        // A later change is held as after any sync, and the safety timer still releases it: no
        // failed-sync hold (which has no timer) was set by the stale end.
        expect(gate.hold(change('a'), config('a'))).toBe(true);
        timers.advance(10_000);
        expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/a']);
      });

      it('applies an end whose startedAt is the same as or newer than the newest ended one', async () => {
        const { gate, released, change, timers } = await notifying({
          onFailedSync: 'hold',
          unwatchedMaxHoldMs: 10_000,
        });
        expect(gate.hold(change('a'), config('a'))).toBe(true);
        expect(await gate.notify(at('2026-12-02T10:05:00Z', 'Succeeded'))).toMatchObject({
          action: 'sync Succeeded',
        });
        expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/a']);
        // The same instant (spelt with an offset, so not a duplicate delivery) is not older: applied,
        // and under hold the changes after it stay held, with no safety release…
        expect(await gate.notify(at('2026-12-02T11:05:00+01:00', 'Failed'))).toMatchObject({
          action: 'sync Failed',
        });
        expect(gate.hold(change('b'), config('b'))).toBe(true);
        timers.advance(60_000);
        expect(released).toHaveLength(1);
        // …until a newer end, here a Succeeded one, releases them.
        expect(await gate.notify(at('2026-12-02T10:10:00Z', 'Succeeded'))).toMatchObject({
          action: 'sync Succeeded',
        });
        expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/a', 'ConfigMap/web/b']);
      });

      it('a late Succeeded end of an older sync does not release what a newer running sync holds', async () => {
        const { gate, released, change } = await notifying({ unwatchedMaxHoldMs: 10_000 });
        await gate.notify({ ...at('2026-12-02T10:00:00Z', 'Succeeded'), phase: 'Running' });
        await gate.notify({ ...at('2026-12-02T10:05:00Z', 'Succeeded'), phase: 'Running' });
        expect(gate.hold(change('a'), config('a'))).toBe(true);
        expect(await gate.notify(at('2026-12-02T10:00:00Z', 'Succeeded'))).toEqual({
          outcome: 'accepted',
          action: 'ignored: a newer sync already started',
        });
        expect(released).toEqual([]);
        // The newer sync's own end releases them.
        await gate.notify(at('2026-12-02T10:05:00Z', 'Succeeded'));
        expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/a']);
      });

      it('applies a newer Failed end after a Succeeded one', async () => {
        const { gate, released, change, timers } = await notifying({
          onFailedSync: 'hold',
          unwatchedMaxHoldMs: 10_000,
        });
        await gate.notify(at('2026-12-02T10:05:00Z', 'Succeeded'));
        expect(await gate.notify(at('2026-12-02T10:10:00Z', 'Failed'))).toMatchObject({
          action: 'sync Failed',
        });
        expect(gate.hold(change('a'), config('a'))).toBe(true);
        timers.advance(60_000);
        expect(released).toEqual([]);
      });
    });

    it('does not hold at all when notifications are off', () => {
      const { gate, change } = unwatched({ notificationsEnabled: false });
      expect(gate.hold(change('a'), config('a'))).toBe(false);
    });
  });
});

describe('SyncGate bounds', () => {
  it('holds changes for at most appLimit apps fed by notifications, releasing the oldest', async () => {
    const limit = 50;
    const { gate, released } = setup({
      appLimit: limit,
      watched: () => false,
      onFailedSync: 'hold',
      usersOf: () => [{ workload: 'Deployment/web/api' }],
    });
    // Failed syncs under hold keep their changes; each notification names another app.
    for (let i = 0; i <= limit; i++) {
      await gate.notify({
        app: { namespace: 'argocd', name: `app-${i}` },
        phase: 'Failed',
        startedAt: '2026-12-02T10:00:00Z',
        resources: [{ group: '', version: 'v1', kind: 'ConfigMap', namespace: 'web', name: `c${i}` }],
      });
    }
    expect(gate.heldApps).toBe(limit);
    expect(released.map((c) => c.config)).toEqual(['ConfigMap/web/c0']);
  });
});
