import { describe, expect, it } from 'vitest';
import { fakeTimers } from '../../test/support/fake-timers.ts';
import type { Change } from '../core/batcher.ts';
import type { ConfigRecord } from '../core/records.ts';
import { createLogger, silentLogger } from '../log.ts';
import {
  type Applier,
  applierFromObject,
  configOfInventoryId,
  groupableDependsOn,
  phaseOf,
} from './applier.ts';
import { FluxGate, type FluxGateOptions } from './gate.ts';

const NS = 'shop';
const rev = (n: number) => `main@sha1:${String(n).repeat(40).slice(0, 40)}`;

function config(name: string, kind: 'ConfigMap' | 'Secret' = 'ConfigMap', labels = {}): ConfigRecord {
  return {
    ref: { kind, namespace: NS, name },
    uid: name,
    resourceVersion: '1',
    annotations: {},
    labels,
    digest: { all: 'x', keys: {} } as unknown as ConfigRecord['digest'],
  };
}

const change = (config: string, observedAt = 1, workload = 'Deployment/shop/web'): Change => ({
  workload,
  config,
  observedAt,
});

type Phase = 'progressing' | 'ready' | 'failed' | 'waiting';

/** A Kustomization as kustomize-controller writes its status in each phase. */
function kustomization(
  name: string,
  phase: Phase,
  o: {
    configs?: string[];
    dependsOn?: string[];
    attempted?: number;
    applied?: number;
    suspend?: boolean;
    rv?: number;
  } = {},
): Applier {
  const conditions = {
    progressing: [
      { type: 'Reconciling', status: 'True', reason: 'Progressing' },
      { type: 'Ready', status: 'Unknown', reason: 'Progressing' },
    ],
    ready: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded' }],
    failed: [
      { type: 'Reconciling', status: 'True', reason: 'ProgressingWithRetry' },
      { type: 'Ready', status: 'False', reason: 'ReconciliationFailed' },
    ],
    waiting: [{ type: 'Ready', status: 'False', reason: 'DependencyNotReady' }],
  }[phase];
  return applierFromObject('Kustomization', {
    metadata: { name, namespace: NS, generation: 1, ...(o.rv ? { resourceVersion: String(o.rv) } : {}) },
    spec: {
      sourceRef: { kind: 'GitRepository', name: 'repo' },
      ...(o.dependsOn ? { dependsOn: o.dependsOn.map((d) => ({ name: d })) } : {}),
      ...(o.suspend ? { suspend: true } : {}),
    },
    status: {
      observedGeneration: 1,
      conditions,
      lastAttemptedRevision: rev(o.attempted ?? 1),
      lastAppliedRevision: rev(o.applied ?? 1),
      inventory: {
        entries: (o.configs ?? []).map((c) => ({ id: `${NS}_${c}__ConfigMap`, v: 'v1' })),
      },
    },
  }) as Applier;
}

function world(o: Partial<FluxGateOptions> = {}) {
  const t = fakeTimers();
  const gate = new FluxGate({
    onFailedApply: 'reload',
    dependsOnAsOne: false,
    log: silentLogger,
    timers: t.timers,
    ...o,
  });
  const released: Change[] = [];
  gate.attach({ add: (c) => released.push(c) });
  return { gate, released, t };
}

describe('reading a Flux applier', () => {
  it('reads the phase from the conditions kustomize-controller writes', () => {
    expect(kustomization('k', 'progressing').phase).toBe('progressing');
    expect(kustomization('k', 'ready').phase).toBe('ready');
    expect(kustomization('k', 'failed').phase).toBe('failed');
    expect(kustomization('k', 'waiting').phase).toBe('waiting');
    // A spec change the controller has not looked at yet.
    expect(
      phaseOf({
        metadata: { generation: 2 },
        status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True' }] },
      }),
    ).toBe('progressing');
    // The end of a reconciliation as its first write leaves it: Ready, Reconciling gone, but
    // lastAppliedRevision not yet moved to the revision it attempted.
    expect(
      phaseOf({
        status: {
          conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded' }],
          lastAttemptedRevision: rev(2),
          lastAppliedRevision: rev(1),
        },
      }),
    ).toBe('progressing');
    // Just created: no conditions yet.
    expect(phaseOf({ metadata: {} })).toBe('progressing');
    expect(phaseOf({ status: { conditions: [{ type: 'Stalled', status: 'True' }] } })).toBe('failed');
  });

  it('takes only core ConfigMaps and Secrets from the inventory, as config ids', () => {
    expect(configOfInventoryId('shop_a__ConfigMap')).toBe('ConfigMap/shop/a');
    expect(configOfInventoryId('shop_s__Secret')).toBe('Secret/shop/s');
    expect(configOfInventoryId('shop_web_apps_Deployment')).toBeUndefined();
    expect(configOfInventoryId('shop_a_example.com_ConfigMap')).toBeUndefined();
    expect(configOfInventoryId('_ns__Namespace')).toBeUndefined();
    expect(configOfInventoryId('garbage')).toBeUndefined();
    const k = kustomization('k', 'ready', { configs: ['a'] });
    expect([...k.configs]).toEqual(['ConfigMap/shop/a']);
    expect(k.dependsOn).toEqual([]);
    expect(kustomization('k', 'ready', { dependsOn: ['base'] }).dependsOn).toEqual([
      'Kustomization/shop/base',
    ]);
    expect(k.source).toBe('GitRepository/shop/repo');
  });

  it('keys nothing without a name or namespace', () => {
    expect(applierFromObject('Kustomization', { metadata: { name: 'x' } })).toBeUndefined();
    expect(applierFromObject('Kustomization', null)).toBeUndefined();
  });
});

describe('the Flux gate', () => {
  it('holds a change of a config a reconciling Kustomization lists, and releases it once it is Ready', () => {
    const { gate, released } = world();
    gate.observe(kustomization('app', 'progressing', { configs: ['a', 'b'], attempted: 2 }));
    expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
    expect(gate.hold(change('ConfigMap/shop/b'), config('b'))).toBe(true);
    expect(gate.holding('Deployment/shop/web', 'ConfigMap/shop/a')).toBe(true);
    expect([...gate.held()].map((h) => h.app)).toEqual(['Kustomization/shop/app', 'Kustomization/shop/app']);
    expect(released).toEqual([]);
    gate.observe(kustomization('app', 'ready', { configs: ['a', 'b'], attempted: 2, applied: 2 }));
    expect(released.map((c) => c.config)).toEqual(['ConfigMap/shop/a', 'ConfigMap/shop/b']);
    expect(released.every((c) => c.debounceMs === 0)).toBe(true);
    expect(released[0]?.via).toEqual({ app: 'Kustomization/shop/app', revision: rev(2) });
    expect(gate.holding('Deployment/shop/web', 'ConfigMap/shop/a')).toBe(false);
  });

  it('says what it held: the workload, the config and its resourceVersion', () => {
    const lines: Array<Record<string, unknown>> = [];
    const log = createLogger('debug', { write: (l: string) => void lines.push(JSON.parse(l)) });
    const { gate } = world({ log });
    gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2 }));
    expect(gate.hold(change('ConfigMap/shop/a'), { ...config('a'), resourceVersion: '42' })).toBe(true);
    expect(lines.filter((l) => l.msg === 'config change held until the Flux reconciliation ends')).toEqual([
      expect.objectContaining({
        applier: 'Kustomization/shop/app',
        workload: 'Deployment/shop/web',
        configs: ['ConfigMap/shop/a'],
        resourceVersion: '42',
      }),
    ]);
  });

  it('does not release at the first of the two writes that end a reconciliation (Ready before lastAppliedRevision)', () => {
    const { gate, released } = world();
    gate.observeSource('GitRepository/shop/repo', rev(2));
    gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2, applied: 1 }));
    expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
    gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 1 }));
    expect(released).toEqual([]);
    gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 }));
    expect(released).toHaveLength(1);
  });

  it('lets through a change of a config no inventory lists, or whose Kustomization is idle', () => {
    const { gate } = world();
    gate.observe(kustomization('app', 'progressing', { configs: ['a'] }));
    expect(gate.hold(change('ConfigMap/shop/z'), config('z'))).toBe(false);
    gate.observe(kustomization('app', 'ready', { configs: ['a'] }));
    expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(false);
  });

  it("ignores a tenant's kustomize.toolkit.fluxcd.io labels: only the inventory ties a config to a Kustomization", () => {
    const { gate } = world();
    gate.observe(kustomization('other-tenant', 'progressing', { configs: ['theirs'] }));
    const forged = config('mine', 'ConfigMap', {
      'kustomize.toolkit.fluxcd.io/name': 'other-tenant',
      'kustomize.toolkit.fluxcd.io/namespace': NS,
    });
    expect(gate.hold(change('ConfigMap/shop/mine'), forged)).toBe(false);
    expect(gate.ownerOf('ConfigMap/shop/mine')).toBeUndefined();
  });

  it('holds while the source has a newer artifact than the Kustomization last attempted (about to start)', () => {
    const { gate, released } = world();
    gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 1, applied: 1 }));
    gate.observeSource('GitRepository/shop/repo', rev(2));
    expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
    gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2, applied: 1 }));
    expect(released).toEqual([]);
    gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 }));
    expect(released).toHaveLength(1);
  });

  it('a suspended Kustomization holds nothing, whatever its source says', () => {
    const { gate } = world();
    gate.observeSource('GitRepository/shop/repo', rev(2));
    gate.observe(kustomization('app', 'ready', { configs: ['a'], suspend: true }));
    expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(false);
  });

  describe('a dependsOn chain', () => {
    const chain = (configsPhase: Phase, appPhase: Phase, attempted: [number, number]) => [
      kustomization('configs', configsPhase, {
        configs: ['a'],
        attempted: attempted[0],
        applied: attempted[0],
      }),
      kustomization('app', appPhase, {
        configs: ['c'],
        dependsOn: ['configs'],
        attempted: attempted[1],
        applied: attempted[1],
      }),
    ];

    it('with --flux-depends-on-as-one, holds the first link’s changes until the last link applied the revision, then releases both at once', () => {
      const { gate, released } = world({ dependsOnAsOne: true });
      gate.observeSource('GitRepository/shop/repo', rev(2));
      for (const k of chain('progressing', 'ready', [2, 1])) gate.observe(k);
      expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
      // configs is Ready at 2; app has not attempted 2 yet: still one change in flight.
      for (const k of chain('ready', 'waiting', [2, 1])) gate.observe(k);
      expect(released).toEqual([]);
      for (const k of chain('ready', 'progressing', [2, 2])) gate.observe(k);
      expect(gate.hold(change('ConfigMap/shop/c'), config('c'))).toBe(true);
      expect(released).toEqual([]);
      for (const k of chain('ready', 'ready', [2, 2])) gate.observe(k);
      expect(released.map((c) => c.config).sort()).toEqual(['ConfigMap/shop/a', 'ConfigMap/shop/c']);
    });

    it('with it, a Kustomization that stops depending (its dependsOn edited, or it is deleted) no longer holds the other', () => {
      for (const unlink of ['edited', 'deleted'] as const) {
        const { gate, released } = world({ dependsOnAsOne: true });
        gate.observeSource('GitRepository/shop/repo', rev(2));
        for (const k of chain('ready', 'progressing', [2, 2])) gate.observe(k);
        expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
        // app still reconciles, but no longer depends on configs: configs's change goes.
        if (unlink === 'edited') {
          gate.observe(kustomization('app', 'progressing', { configs: ['c'], attempted: 2, applied: 1 }));
        } else {
          gate.applierDeleted('Kustomization/shop/app');
        }
        expect(
          released.map((c) => c.config),
          unlink,
        ).toEqual(['ConfigMap/shop/a']);
      }
    });

    it("with it, a Kustomization in another namespace that names this one in its dependsOn does not join its group (a tenant cannot hold another team's reloads)", () => {
      const { gate, released } = world({ dependsOnAsOne: true });
      gate.observeSource('GitRepository/shop/repo', rev(2));
      gate.observe(kustomization('configs', 'ready', { configs: ['a'], attempted: 2, applied: 2 }));
      // The tenant's Kustomization, in its own namespace, depends on the victim's and never finishes.
      gate.observe(
        applierFromObject('Kustomization', {
          metadata: { name: 'evil', namespace: 'tenant', generation: 1 },
          spec: {
            sourceRef: { kind: 'GitRepository', name: 'r' },
            dependsOn: [{ name: 'configs', namespace: NS }],
          },
          status: {
            observedGeneration: 1,
            conditions: [
              { type: 'Reconciling', status: 'True', reason: 'Progressing' },
              { type: 'Ready', status: 'Unknown' },
            ],
          },
        }) as Applier,
      );
      // The victim's change is not held for the tenant's reconciliation.
      expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(false);
      expect(released).toEqual([]);
    });

    it('groupableDependsOn keeps the dependencies in the applier’s own namespace only', () => {
      const a = applierFromObject('Kustomization', {
        metadata: { name: 'app', namespace: 'team-a' },
        spec: {
          dependsOn: [{ name: 'x' }, { name: 'y', namespace: 'team-a' }, { name: 'z', namespace: 'team-b' }],
        },
      }) as Applier;
      expect(groupableDependsOn(a)).toEqual({
        trusted: ['Kustomization/team-a/x', 'Kustomization/team-a/y'],
        foreign: ['Kustomization/team-b/z'],
      });
    });

    it('without it, each Kustomization releases its own changes when it is done', () => {
      const { gate, released } = world();
      gate.observeSource('GitRepository/shop/repo', rev(2));
      for (const k of chain('progressing', 'ready', [2, 1])) gate.observe(k);
      expect(gate.hold(change('ConfigMap/shop/a'), config('a'))).toBe(true);
      for (const k of chain('ready', 'waiting', [2, 1])) gate.observe(k);
      expect(released.map((c) => c.config)).toEqual(['ConfigMap/shop/a']);
    });
  });

  describe('a config Flux wrote while its Kustomization looks idle (its watch lags the config watch)', () => {
    const byFlux = (name: string) => ({ ...config(name), writer: 'kustomize-controller' });
    /** A gate whose fresh reads answer with `answer()` (the API server's current object). */
    function checked(answer: () => Applier | Error) {
      const reads: string[] = [];
      let done: Promise<void> = Promise.resolve();
      const w = world({
        reread: (a) => {
          reads.push(a.key);
          done = (async () => {
            await Promise.resolve();
            const x = answer();
            if (x instanceof Error) throw x;
            w.gate.observe(x);
          })();
          return done;
        },
      });
      return { ...w, reads, settled: () => done.then(() => Promise.resolve()).catch(() => undefined) };
    }

    it('holds it, reads the Kustomization again, and keeps holding while the fresh status says it reconciles', async () => {
      let now = kustomization('app', 'progressing', { configs: ['a'], attempted: 2 });
      const { gate, released, reads, settled } = checked(() => now);
      gate.observeSource('GitRepository/shop/repo', rev(1));
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 1, applied: 1 }));
      expect(gate.hold(change('ConfigMap/shop/a'), byFlux('a'))).toBe(true);
      // Another event before the read answers releases nothing.
      gate.observeSource('GitRepository/shop/repo', rev(1));
      expect(released).toEqual([]);
      await settled();
      expect(reads).toEqual(['Kustomization/shop/app']);
      expect(released).toEqual([]);
      // The lagging watches catch up: the new artifact, then the end of the reconciliation.
      gate.observeSource('GitRepository/shop/repo', rev(2));
      expect(released).toEqual([]);
      now = kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 });
      gate.observe(now);
      expect(released.map((c) => [c.config, c.via?.revision])).toEqual([['ConfigMap/shop/a', rev(2)]]);
    });

    it('releases it once the fresh read says the Kustomization is done (the config watch was the late one)', async () => {
      const ready = kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 });
      const { gate, released, settled } = checked(() => ready);
      gate.observe(ready);
      expect(gate.hold(change('ConfigMap/shop/a'), byFlux('a'))).toBe(true);
      await settled();
      expect(released.map((c) => c.config)).toEqual(['ConfigMap/shop/a']);
    });

    it('releases it when the read fails (as the watch says), and never holds a person’s edit', async () => {
      const { gate, released, reads, settled } = checked(() => new Error('connection refused'));
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 }));
      expect(gate.hold(change('ConfigMap/shop/a'), { ...config('a'), writer: 'kubectl-edit' })).toBe(false);
      expect(reads).toEqual([]);
      expect(gate.hold(change('ConfigMap/shop/a'), byFlux('a'))).toBe(true);
      await settled();
      await Promise.resolve();
      expect(released.map((c) => c.config)).toEqual(['ConfigMap/shop/a']);
    });

    it('ignores a watch event older than a fresh read (the lagging watch catching up)', () => {
      const { gate, released } = world();
      gate.observeSource('GitRepository/shop/repo', rev(2));
      gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2, rv: 20 }));
      expect(gate.hold(change('ConfigMap/shop/a'), byFlux('a'))).toBe(true);
      // The watch delivers the Ready of the reconciliation before (rv 10) after the read of rv 20.
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2, rv: 10 }));
      expect(released).toEqual([]);
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2, rv: 30 }));
      expect(released.map((c) => c.config)).toEqual(['ConfigMap/shop/a']);
    });

    it('without a way to read again, takes the watch as current', () => {
      const { gate } = world();
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 2, applied: 2 }));
      expect(gate.hold(change('ConfigMap/shop/a'), byFlux('a'))).toBe(false);
    });
  });

  describe('a failed reconciliation', () => {
    it('releases what it held under --flux-on-failed-apply=reload', () => {
      const { gate, released } = world();
      gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2 }));
      gate.hold(change('ConfigMap/shop/a'), config('a'));
      gate.observe(kustomization('app', 'failed', { configs: ['a'], attempted: 2, applied: 1 }));
      expect(released).toHaveLength(1);
    });

    it('under reload, keeps it when a newer artifact came meanwhile: the retry applies that revision, and one release follows it (flux-sim seed 32)', () => {
      const { gate, released } = world();
      gate.observeSource('GitRepository/shop/repo', rev(2));
      gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2 }));
      gate.hold(change('ConfigMap/shop/a'), config('a'));
      gate.observeSource('GitRepository/shop/repo', rev(3));
      gate.observe(kustomization('app', 'failed', { configs: ['a'], attempted: 2, applied: 1 }));
      expect(released).toEqual([]);
      gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 3, applied: 1 }));
      gate.observe(kustomization('app', 'ready', { configs: ['a'], attempted: 3, applied: 3 }));
      expect(released.map((c) => [c.config, c.via?.revision])).toEqual([['ConfigMap/shop/a', rev(3)]]);
    });

    it('keeps it, and later changes, until a reconciliation succeeds under --flux-on-failed-apply=hold', () => {
      const { gate, released } = world({ onFailedApply: 'hold' });
      gate.observe(kustomization('app', 'progressing', { configs: ['a', 'b'], attempted: 2 }));
      gate.hold(change('ConfigMap/shop/a'), config('a'));
      gate.observe(kustomization('app', 'failed', { configs: ['a', 'b'], attempted: 2, applied: 1 }));
      expect(released).toEqual([]);
      // Failed and not busy: a later change joins what is held.
      expect(gate.hold(change('ConfigMap/shop/b', 5), config('b'))).toBe(true);
      gate.observe(kustomization('app', 'ready', { configs: ['a', 'b'], attempted: 3, applied: 3 }));
      expect(released.map((c) => c.config).sort()).toEqual(['ConfigMap/shop/a', 'ConfigMap/shop/b']);
    });

    it('at a new term, a failed Kustomization holds a change found at start under hold, and not under reload', () => {
      const hold = world({ onFailedApply: 'hold' });
      hold.gate.observe(kustomization('app', 'failed', { configs: ['a'], attempted: 2, applied: 1 }));
      expect(hold.gate.holdAtStart(change('ConfigMap/shop/a'), config('a'))).toBe(true);
      const reload = world();
      reload.gate.observe(kustomization('app', 'failed', { configs: ['a'], attempted: 2, applied: 1 }));
      expect(reload.gate.holdAtStart(change('ConfigMap/shop/a'), config('a'))).toBe(false);
    });
  });

  it('releases after --flux max hold when the reconciliation never ends (a controller down)', async () => {
    const { gate, released, t } = world({ maxHoldMs: 60_000 });
    gate.observe(kustomization('app', 'progressing', { configs: ['a'], attempted: 2 }));
    gate.hold(change('ConfigMap/shop/a'), config('a'));
    await t.advance(59_999);
    expect(released).toEqual([]);
    await t.advance(60_000);
    expect(released).toHaveLength(1);
  });

  it("holds as long as the applier's spec.timeout allows its reconciliation to run, plus a minute, when that is longer than the cap", async () => {
    const { gate, released, t } = world({ maxHoldMs: 60_000 });
    const slow = applierFromObject('Kustomization', {
      metadata: { name: 'app', namespace: NS, generation: 1 },
      spec: { sourceRef: { kind: 'GitRepository', name: 'repo' }, interval: '1h', timeout: '30m' },
      status: {
        observedGeneration: 1,
        conditions: [
          { type: 'Reconciling', status: 'True', reason: 'Progressing' },
          { type: 'Ready', status: 'Unknown' },
        ],
        inventory: { entries: [{ id: `${NS}_a__ConfigMap`, v: 'v1' }] },
      },
    }) as Applier;
    expect(slow.timeoutMs).toBe(30 * 60_000);
    gate.observe(slow);
    gate.hold(change('ConfigMap/shop/a'), config('a'));
    await t.advance(31 * 60_000 - 1);
    expect(released, 'released while the reconciliation may still run').toEqual([]);
    await t.advance(31 * 60_000);
    expect(released).toHaveLength(1);
  });

  it('reads the reconciliation timeout from spec.timeout, else a Kustomization’s spec.interval', () => {
    const k = (spec: Record<string, unknown>, kind: 'Kustomization' | 'HelmRelease' = 'Kustomization') =>
      applierFromObject(kind, { metadata: { name: 'x', namespace: NS }, spec })?.timeoutMs;
    expect(k({ timeout: '1m30s', interval: '10m' })).toBe(90_000);
    expect(k({ interval: '10m' })).toBe(600_000);
    expect(k({ interval: '10m' }, 'HelmRelease')).toBeUndefined();
    expect(k({ timeout: 'soon' })).toBeUndefined();
  });

  it('names a HelmRelease’s chart revision (it records only the attempted one) when it releases', () => {
    const { gate, released } = world();
    const hr = (phase: 'progressing' | 'ready') =>
      applierFromObject('HelmRelease', {
        metadata: { name: 'web', namespace: NS, generation: 1 },
        spec: {},
        status: {
          observedGeneration: 1,
          conditions:
            phase === 'ready'
              ? [{ type: 'Ready', status: 'True', reason: 'UpgradeSucceeded' }]
              : [{ type: 'Reconciling', status: 'True', reason: 'Progressing' }],
          lastAttemptedRevision: '0.1.0+abc123',
          inventory: { entries: [{ id: `${NS}_app__ConfigMap`, v: 'v1' }] },
        },
      }) as Applier;
    gate.observe(hr('progressing'));
    expect(gate.hold(change('ConfigMap/shop/app'), config('app'))).toBe(true);
    gate.observe(hr('ready'));
    expect(released[0]?.via).toEqual({ app: 'HelmRelease/shop/web', revision: '0.1.0+abc123' });
  });

  it('releases what a deleted Kustomization held, and forgets its inventory', () => {
    const { gate, released } = world();
    gate.observe(kustomization('app', 'progressing', { configs: ['a'] }));
    gate.hold(change('ConfigMap/shop/a'), config('a'));
    gate.applierDeleted('Kustomization/shop/app');
    expect(released).toHaveLength(1);
    expect(gate.ownerOf('ConfigMap/shop/a')).toBeUndefined();
  });

  it('forgets an inventory entry the Kustomization no longer lists (pruned)', () => {
    const { gate } = world();
    gate.observe(kustomization('app', 'progressing', { configs: ['a', 'b'] }));
    gate.observe(kustomization('app', 'progressing', { configs: ['a'] }));
    expect(gate.ownerOf('ConfigMap/shop/b')).toBeUndefined();
    expect(gate.ownerOf('ConfigMap/shop/a')?.key).toBe('Kustomization/shop/app');
  });

  it('after detach (leadership ended) releases nothing into the old sink', () => {
    const { gate, released } = world();
    const sink = { add: (c: Change) => released.push(c) };
    gate.attach(sink);
    gate.observe(kustomization('app', 'progressing', { configs: ['a'] }));
    gate.hold(change('ConfigMap/shop/a'), config('a'));
    gate.detach(sink);
    gate.observe(kustomization('app', 'ready', { configs: ['a'] }));
    expect(released).toEqual([]);
  });
});
