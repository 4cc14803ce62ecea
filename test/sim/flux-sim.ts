// A deterministic simulation of the Flux gate (service/flux/gate.ts): the real FluxGate, fed the raw
// Kustomization objects a model of kustomize-controller writes (read by the real applierFromObject),
// the source's artifact revisions, config changes, and leader changes, in seeded interleavings.
//
// The model follows kustomize-controller v1.9.0 and fluxcd/pkg/runtime v0.110.0 (docs/flux.md): when
// its source has a new artifact, a Kustomization waits (Ready=False, DependencyNotReady) until every
// Kustomization it depends on is Ready at that revision; then it persists Reconciling=True and
// lastAttemptedRevision before it applies; it applies its configs; and it ends in two writes, the
// conditions first (Ready=True, Reconciling removed), lastAppliedRevision second, or fails
// (Ready=False, Reconciling with reason ProgressingWithRetry) and tries again later. People also edit
// configs out of band. Each write is observed in the order it was made (watches that keep up).
//
// Checked on every delivery (a change the gate lets through, or releases) and at the end:
//  - no early release: a change a Kustomization's apply made is delivered only once that
//    Kustomization (with --flux-depends-on-as-one, every Kustomization joined to it by dependsOn) has
//    no revision in hand (started, or about to start) that it has not finished; under
//    --flux-on-failed-apply=hold, not while its last finish was a failure; except at the max hold;
//  - the cause: a release at the end of a reconciliation names the revision it finished;
//  - nothing lost: every change is delivered at or after it was made, across leader changes;
//  - no double delivery: a (workload, config) is delivered no more often than it changed.

import type { Change } from '../../service/core/batcher.ts';
import type { ConfigRecord } from '../../service/core/records.ts';
import { type Applier, applierFromObject } from '../../service/flux/applier.ts';
import { FLUX_MAX_HOLD_MS, FluxGate } from '../../service/flux/gate.ts';
import { silentLogger } from '../../service/log.ts';
import { fakeTimers } from '../support/fake-timers.ts';
import { prng } from './schedule.ts';

const NS = 'sim';
const WORKLOAD = 'Deployment/sim/web';
const SOURCE = `GitRepository/${NS}/repo`;
const rev = (n: number) => `main@sha1:${n.toString(16).padStart(40, '0')}`;

export interface FluxSchedule {
  seed: number;
  /** Kustomizations k0…, each owning some configs; k(i) may depend on k(i-1). */
  kustomizations: Array<{ name: string; configs: string[]; dependsOn?: string }>;
  /** Configs no Kustomization owns (edited by people only). */
  loose: string[];
  dependsOnAsOne: boolean;
  onFailedApply: 'reload' | 'hold';
  /** Chance that an apply fails (retried later). */
  pFail: number;
  /** Steps: picked by weight from the actions that can happen at each point. */
  steps: number;
  /**
   * The watches of Kustomizations and sources lag behind the config watch: their events wait in a
   * queue, and the gate reads a Kustomization afresh when Flux wrote a config its view says is idle.
   */
  lag: boolean;
}

export function randomFluxSchedule(seed: number): FluxSchedule {
  const r = prng(seed);
  const n = 1 + Math.floor(r() * 3);
  const kustomizations = Array.from({ length: n }, (_, i) => ({
    name: `k${i}`,
    configs: Array.from({ length: 1 + Math.floor(r() * 2) }, (_, j) => `k${i}c${j}`),
    ...(i > 0 && r() < 0.6 ? { dependsOn: `k${i - 1}` } : {}),
  }));
  return {
    seed,
    kustomizations,
    loose: r() < 0.5 ? ['loose'] : [],
    dependsOnAsOne: r() < 0.5,
    onFailedApply: r() < 0.5 ? 'reload' : 'hold',
    pFail: r() < 0.4 ? 0 : r() * 0.5,
    steps: 10 + Math.floor(r() * 60),
    lag: r() < 0.5,
  };
}

/** What kustomize-controller is doing with a Kustomization, in the model. */
type Stage =
  /** Nothing in hand: attempted = applied = the source's revision, or its last try failed. */
  | 'idle'
  /** A newer artifact: it checks its dependencies next. */
  | 'due'
  | 'waiting'
  /** Reconciling=True and lastAttemptedRevision written: it applies next. */
  | 'started'
  /** Applied: its conditions say Ready next (the first of the two writes). */
  | 'applied'
  /** Ready=True written; lastAppliedRevision next (the second write). */
  | 'readyWritten';

interface K {
  name: string;
  configs: string[];
  dependsOn?: string;
  stage: Stage;
  attempted: number;
  applied: number;
  /** The revision its last reconciliation finished (applied, or failed at). */
  finished: number;
  lastFailed: boolean;
  /** Its resourceVersion: one counter for every write, as etcd's revision. */
  rv: number;
  conditions: Array<{ type: string; status: string; reason: string }>;
  /** The revision whose configs it changes in this apply: which configs the commit touched. */
  touches: Set<string>;
}

interface Made {
  config: string;
  /** Index of the step that made it, and when. */
  step: number;
  at: number;
  /** The Kustomization whose apply made it (undefined: a person's edit), and the revision it applied. */
  by?: string;
  rev?: number;
}

export interface FluxSimResult {
  violations: string[];
  delivered: number;
  held: number;
  steps: Record<string, number>;
}

const config = (name: string, writer: string): ConfigRecord => ({
  ref: { kind: 'ConfigMap', namespace: NS, name },
  writer,
  uid: name,
  resourceVersion: '1',
  annotations: {},
  labels: {},
  digest: { all: name, keys: {} } as unknown as ConfigRecord['digest'],
});

const cid = (name: string) => `ConfigMap/${NS}/${name}`;

export async function simulateFlux(s: FluxSchedule): Promise<FluxSimResult> {
  const r = prng(s.seed ^ 0x5f17);
  const t = fakeTimers();
  const violations: string[] = [];
  const steps: Record<string, number> = {};
  let step = 0;
  let source = 1;
  const ks = new Map<string, K>(
    s.kustomizations.map((k) => [
      k.name,
      {
        ...k,
        stage: 'idle',
        attempted: 1,
        applied: 1,
        finished: 1,
        lastFailed: false,
        rv: 1,
        conditions: [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded' }],
        touches: new Set(),
      },
    ]),
  );
  const owner = new Map<string, string>();
  for (const k of ks.values()) for (const c of k.configs) owner.set(c, k.name);
  /** Every change made and not yet delivered after it, per config. */
  const made: Made[] = [];
  const deliveries = new Map<string, number>();
  const changes = new Map<string, number>();
  let delivered = 0;
  let held = 0;

  const raw = (k: K) => ({
    metadata: { name: k.name, namespace: NS, generation: 1, resourceVersion: String(k.rv) },
    spec: {
      sourceRef: { kind: 'GitRepository', name: 'repo' },
      ...(k.dependsOn ? { dependsOn: [{ name: k.dependsOn }] } : {}),
    },
    status: {
      observedGeneration: 1,
      conditions: k.conditions,
      lastAttemptedRevision: rev(k.attempted),
      lastAppliedRevision: rev(k.applied),
      inventory: { entries: k.configs.map((c) => ({ id: `${NS}_${c}__ConfigMap`, v: 'v1' })) },
    },
  });

  /** The Kustomizations counted with `name` (its dependsOn component when the flag is on). */
  const group = (name: string): K[] => {
    if (!s.dependsOnAsOne) return [ks.get(name) as K];
    const seen = new Set([name]);
    const todo = [name];
    while (todo.length > 0) {
      const n = todo.pop() as string;
      for (const k of ks.values()) {
        const linked = (k.name === n && k.dependsOn) || (k.dependsOn === n && k.name);
        if (linked && !seen.has(linked)) {
          seen.add(linked);
          todo.push(linked);
        }
      }
    }
    return [...seen].map((n) => ks.get(n) as K);
  };
  /**
   * In the model's truth: it has a revision in hand that it has not finished (watches that keep up;
   * with lagging ones the check is per revision, in deliver).
   */
  const inHand = (k: K) => k.stage !== 'idle';

  let lastTimeout: { at: number; by: string | undefined } | undefined;
  const deliver = (c: Change, how: 'passed' | 'released') => {
    const name = c.config.split('/')[2] as string;
    if (process.env.FLUX_SIM_TRACE)
      console.log(`  ${how} ${name}${c.via ? ` via ${c.via.app} ${c.via.revision}` : ''}`);
    const key = c.config;
    deliveries.set(key, (deliveries.get(key) ?? 0) + 1);
    delivered++;
    const by = owner.get(name);
    // Released by the max hold (the only release without a cause here): some change of the same
    // owner must have waited that long.
    // One timer releases one batch: checked at its first delivery, before any of it is crossed off.
    const timedOut = how === 'released' && !c.via;
    const sameBatch = timedOut && lastTimeout?.at === t.clock.now && lastTimeout.by === by;
    if (timedOut && !sameBatch) {
      lastTimeout = { at: t.clock.now, by };
      if (!made.some((m) => owner.get(m.config) === by && t.clock.now - m.at >= FLUX_MAX_HOLD_MS))
        violations.push(
          `step ${step}: ${name} released without a cause before any change of ${by} waited the max hold`,
        );
    }
    const pendingOwn = made.some((m) => m.config === name && m.by !== undefined);
    const k = by ? (ks.get(by) as K) : undefined;
    if (k && s.lag && !timedOut) {
      // Lagging watches: what the gate cannot see it cannot wait for, but it never lets a change go
      // before the reconciliation that applied it ended, and names a revision it finished.
      const own = made.filter((m) => m.config === name && m.by === by && m.rev !== undefined);
      for (const m of own)
        if (k.finished < (m.rev as number))
          violations.push(
            `step ${step}: ${name} ${how} before ${by} finished revision ${m.rev}, which applied it at step ${m.step} (${k.stage}, finished ${k.finished})`,
          );
      const named = c.via?.revision ? Number.parseInt(c.via.revision.split(':')[1] ?? '', 16) : undefined;
      if (named !== undefined && (named > k.finished || own.some((m) => named < (m.rev as number))))
        violations.push(
          `step ${step}: ${name} released naming revision ${named}; ${by} finished ${k.finished}`,
        );
      if (s.onFailedApply === 'hold' && k.lastFailed && own.length > 0)
        violations.push(`step ${step}: ${name} ${how} while ${by}'s last apply failed, under hold`);
    } else if (by && pendingOwn && !timedOut) {
      const busy = group(by).filter(inHand);
      if (busy.length > 0)
        violations.push(
          `step ${step}: ${name} ${how} while ${busy.map((k) => `${k.name} (${k.stage}, source ${source}, finished ${k.finished})`).join(', ')} has a revision in hand`,
        );
      if (s.onFailedApply === 'hold' && k?.lastFailed)
        violations.push(`step ${step}: ${name} ${how} while ${by}'s last apply failed, under hold`);
    }
    if (!s.lag && how === 'released' && c.via?.revision !== undefined) {
      const k = ks.get(c.via.app.split('/')[2] as string);
      if (k && c.via.revision !== rev(k.finished))
        violations.push(
          `step ${step}: ${name} released naming ${c.via.revision}, but ${k.name} finished ${rev(k.finished)}`,
        );
    }
    // Everything made up to now for this config is covered by this delivery.
    for (let i = made.length - 1; i >= 0; i--) if ((made[i] as Made).config === name) made.splice(i, 1);
  };

  let rvs = 1;
  /** Flux objects' watch events not yet delivered (lag mode), in the order they were made. */
  let queue: Array<() => void> = [];
  const lastWriter = new Map<string, string>();
  const applierOf = (k: K) => applierFromObject('Kustomization', raw(k)) as Applier;
  const newGate = (): FluxGate =>
    new FluxGate({
      onFailedApply: s.onFailedApply,
      dependsOnAsOne: s.dependsOnAsOne,
      log: silentLogger,
      timers: t.timers,
      // A quorum read: the Kustomization as it is now.
      ...(s.lag ? { reread: async (a: Applier) => gate.observe(applierOf(ks.get(a.ref.name) as K)) } : {}),
    });
  let gate: FluxGate = newGate();
  const sink = { add: (c: Change) => deliver(c, 'released') };
  gate.attach(sink);
  const observeAll = () => {
    gate.observeSource(SOURCE, rev(source));
    for (const k of ks.values()) gate.observe(applierOf(k));
  };
  observeAll();

  /** The watch delivers `e` now, or after the events before it (lag mode). */
  const watchEvent = (e: () => void) => (s.lag ? queue.push(e) : e());
  const write = (k: K) => {
    k.rv = ++rvs;
    const seen = applierOf(k);
    watchEvent(() => gate.observe(seen));
  };
  const change = (name: string, by?: string, atStart = false) => {
    const rev = by ? (ks.get(by) as K).attempted : undefined;
    made.push({ config: name, step, at: t.clock.now, ...(by ? { by, rev } : {}) });
    changes.set(cid(name), (changes.get(cid(name)) ?? 0) + 1);
    const c: Change = { workload: WORKLOAD, config: cid(name), observedAt: t.clock.now };
    const writer = by ? 'kustomize-controller' : 'kubectl';
    lastWriter.set(name, writer);
    const h = atStart ? gate.holdAtStart(c, config(name, writer)) : gate.hold(c, config(name, writer));
    if (h) held++;
    else deliver(c, 'passed');
  };

  /** The actions possible now, with their weights. */
  const actions = (): Array<[number, string, () => unknown]> => {
    const out: Array<[number, string, () => unknown]> = [];
    out.push([
      6,
      'commit',
      () => {
        source++;
        const seen = rev(source);
        watchEvent(() => gate.observeSource(SOURCE, seen));
        for (const k of ks.values()) {
          k.touches = new Set(k.configs.filter(() => r() < 0.6));
          if (k.stage === 'idle') k.stage = 'due';
        }
      },
    ]);
    const all = [...s.loose, ...ks.values()].flatMap((x) => (typeof x === 'string' ? [x] : x.configs));
    out.push([2, 'edit', () => change(all[Math.floor(r() * all.length)] as string)]);
    out.push([
      1,
      'term',
      () => {
        // The leader changes: the new term re-reads Flux's status, and its start finds what the old
        // term still held (the pods are older than the configs) and asks the gate again.
        gate.detach(sink);
        gate.stop();
        const pending = [...new Set(made.map((m) => m.config))];
        const keep = made.splice(0, made.length);
        // The new term's watches start from a fresh list: what the old ones had not delivered is moot.
        queue = [];
        gate = newGate();
        gate.attach(sink);
        observeAll();
        for (const name of pending) {
          const was = keep.filter((m) => m.config === name);
          const c: Change = { workload: WORKLOAD, config: cid(name), observedAt: t.clock.now };
          made.push(...was);
          if (!gate.holdAtStart(c, config(name, lastWriter.get(name) ?? 'kubectl'))) deliver(c, 'passed');
        }
      },
    ]);
    if (queue.length > 0)
      out.push([
        8,
        'deliver',
        () => {
          for (let n = 1 + Math.floor(r() * 3); n > 0 && queue.length > 0; n--)
            (queue.shift() as () => void)();
        },
      ]);
    out.push([
      1,
      'time',
      () =>
        t.advance(t.clock.now + (r() < 0.1 ? FLUX_MAX_HOLD_MS + 1_000 : 1_000 + Math.floor(r() * 30_000))),
    ]);
    for (const k of ks.values()) {
      const dep = k.dependsOn ? (ks.get(k.dependsOn) as K) : undefined;
      const depReady = !dep || (dep.stage === 'idle' && !dep.lastFailed && dep.applied === source);
      if (k.stage === 'due' || k.stage === 'waiting') {
        out.push([
          4,
          `check ${k.name}`,
          () => {
            if (!depReady) {
              if (k.stage !== 'waiting') {
                k.stage = 'waiting';
                k.conditions = [{ type: 'Ready', status: 'False', reason: 'DependencyNotReady' }];
                write(k);
              }
              return;
            }
            k.stage = 'started';
            k.attempted = source;
            k.conditions = [
              { type: 'Reconciling', status: 'True', reason: 'Progressing' },
              { type: 'Ready', status: 'Unknown', reason: 'Progressing' },
            ];
            write(k);
          },
        ]);
      }
      if (k.stage === 'started') {
        out.push([
          4,
          `apply ${k.name}`,
          () => {
            // A build error fails before anything is applied; a health check after it.
            const fails = r() < s.pFail ? (r() < 0.5 ? 'before' : 'after') : undefined;
            if (fails !== 'before') {
              for (const c of k.touches) change(c, k.name);
              k.touches = new Set();
            }
            if (!fails) {
              k.stage = 'applied';
              return;
            }
            k.finished = k.attempted;
            k.lastFailed = true;
            // Flux tries again at its retry interval, with the newest artifact by then.
            k.stage = k.attempted < source ? 'due' : 'idle';
            k.conditions = [
              { type: 'Reconciling', status: 'True', reason: 'ProgressingWithRetry' },
              { type: 'Ready', status: 'False', reason: 'ReconciliationFailed' },
            ];
            write(k);
          },
        ]);
      }
      if (k.stage === 'applied') {
        out.push([
          4,
          `ready ${k.name}`,
          () => {
            k.stage = 'readyWritten';
            k.conditions = [{ type: 'Ready', status: 'True', reason: 'ReconciliationSucceeded' }];
            write(k);
          },
        ]);
      }
      if (k.stage === 'readyWritten') {
        out.push([
          4,
          `lastApplied ${k.name}`,
          () => {
            k.applied = k.attempted;
            k.finished = k.attempted;
            k.lastFailed = false;
            // A newer artifact arrived meanwhile: it starts again.
            k.stage = k.attempted < source ? 'due' : 'idle';
            write(k);
          },
        ]);
      }
      if (k.stage === 'idle' && k.lastFailed) {
        out.push([
          2,
          `retry ${k.name}`,
          () => {
            k.stage = 'due';
          },
        ]);
      }
    }
    return out;
  };

  const run = async (a: [number, string, () => unknown]) => {
    if (process.env.FLUX_SIM_TRACE) console.log(`step ${step} t=${t.clock.now}: ${a[1]}`);
    const name = a[1].split(' ')[0] as string;
    steps[name] = (steps[name] ?? 0) + 1;
    await a[2]();
    // Let a fresh read the gate asked for answer (a microtask or two).
    for (let i = 0; i < 4; i++) await Promise.resolve();
    step++;
  };
  for (let i = 0; i < s.steps; i++) {
    const as = actions();
    const total = as.reduce((n, [w]) => n + w, 0);
    let x = r() * total;
    let pick = as[0] as [number, string, () => unknown];
    for (const a of as) {
      pick = a;
      x -= a[0];
      if (x < 0) break;
    }
    await run(pick);
  }
  // The end: Flux gets every Kustomization to the last revision with a success (no more failures,
  // no commits, no edits), then nothing may be left undelivered.
  const heal = s.pFail;
  s.pFail = 0;
  for (let guard = 0; guard < 1_000; guard++) {
    const as = actions().filter(([, n]) => /^(check|apply|ready|lastApplied|retry) |^deliver$/.test(n));
    if (as.length === 0) break;
    await run(as[Math.floor(r() * as.length)] as [number, string, () => unknown]);
  }
  s.pFail = heal;
  for (const k of ks.values())
    if (k.stage !== 'idle' || k.lastFailed || k.applied !== source)
      violations.push(`the model did not settle: ${k.name} ${k.stage} at ${k.applied} of ${source}`);
  for (const m of made)
    violations.push(
      `lost: ${m.config}'s change of step ${m.step}${m.by ? ` (applied by ${m.by})` : ''} never delivered`,
    );
  for (const [c, n] of deliveries)
    if (n > (changes.get(c) ?? 0)) violations.push(`${c} delivered ${n} times for ${changes.get(c)} changes`);
  return { violations, delivered, held, steps };
}
