// The execution-level simulation: the real engine (Reconciler) and the real strategies port
// (strategies/execute.ts: RestartSession, the Deployment and StatefulSet restarts, PodEvictor,
// evictPod, the live views, the catch-up at a term's start) against a model of the API server and its
// controllers (exec-model.ts, exec-controllers.ts, exec-api.ts), on vitest's fake
// clock, with a seeded schedule of config changes, template changes by "the user", API faults, watch
// drops and 410s, pods the environment breaks, slow shutdowns and leader changes. Two replicas share
// the model; each reaches it through the service's own write path: writeGatedAccess with the real
// leaderWriteFence, so a deposed leader's write is refused exactly where the service refuses it.
//
// node:timers/promises is not faked; the code it runs here does not use it (evictPod sleeps with it
// only when given a deadline, which the strategies never give; the real elector is not run: its
// fence is, over a modelled election). The Ledger is a MemoryLedger whose writes go through the same
// fence function.
//
// Checked while it runs (the model sees every write) and at quiescence:
//  - no pod-template write in restart mode;
//  - no eviction or handover that leaves fewer Ready pods than replicas − maxUnavailable;
//  - no pod replaced twice for one change (a pod created at or after the newest change's cutoff);
//  - nothing lost: every running pod was created after the newest change of each config it reads;
//  - no write (to the API or the ledger) by a replica that does not hold the Lease;
//  - no request the model does not serve (a gap in the model, not a defect: widen the model).
// With --progressive-reloads the schedules also write bad content (pods that read it never become
// Ready), often followed by its fix, and may give a workload whose surge pods a quota refuses for ever
// (withProgressiveSteps). Then also:
//  - a halt survives: once any leader's status shows a config's current content halted, no workload
//    that content had not reached by then is reached by it (a surge pod or an eviction) until the
//    config changes again (or one halted with it by the same failure: docs/adr/0045), across leader
//    changes and the service's restarts of its term;
//  - no good change is halted unless the failure can be blamed on a bad content the same reload
//    carried or on the environment breaking pods meanwhile;
//  - a good change completes: at quiescence every pod reads the newest content of each of its configs,
//    in every workload but one whose surge pods are refused and those reading a config whose newest
//    content is bad or was halted as above (left where it was halted; their reload would carry it).

import pino from 'pino';
import { vi } from 'vitest';
import { catchUp } from '../../service/catch-up.ts';
import { loadConfig } from '../../service/config/config.ts';
import { compileGlobals } from '../../service/core/annotations.ts';
import { effectiveCutoff } from '../../service/core/cutoff.ts';
import { DEFAULT_TIMINGS, writeDeadline } from '../../service/core/lease-logic.ts';
import type { LedgerEntry } from '../../service/core/ledger-entry.ts';
import type { ConfigRecord, WorkloadRecord } from '../../service/core/records.ts';
import type { LedgerStore } from '../../service/engine/deps.ts';
import { type ClusterAccess, writeGatedAccess } from '../../service/kube/access.ts';
import { appsApi, batchApi, coreApi, customApi } from '../../service/kube/api.ts';
import { JobSpecStore } from '../../service/kube/job-spec-store.ts';
import { type LeaderElection, leaderWriteFence } from '../../service/kube/leader.ts';
import { configRecord, workloadRecord } from '../../service/kube/to-record.ts';
import { type Logger, silentLogger } from '../../service/log.ts';
import { Reconciler } from '../../service/reconciler.ts';
import { ClusterState } from '../../service/state.ts';
import { strategyExecutor } from '../../service/strategies/execute.ts';
import { MemoryLedger } from '../support/engine-fakes.ts';
import { ApiModel } from './exec-api.ts';
import { type Fault, NS, type Obj, type WorkloadSpec } from './exec-model.ts';
import { prng } from './sim.ts';

export type Step =
  /** A config write; `bad`: pods that read the new content never become Ready (a broken config). */
  | { at: number; kind: 'config'; config: string; bad?: boolean }
  | { at: number; kind: 'template'; deployment: string }
  /** Pods created from now until `at + ms` never become Ready; then the environment heals them. */
  | { at: number; kind: 'break'; ms: number }
  | { at: number; kind: 'drop'; compact: boolean }
  /** The leader stops renewing for `ms` and notices its loss `noticeMs` after its renew deadline. */
  | { at: number; kind: 'partition'; ms: number; noticeMs: number };

export interface ExecSchedule {
  seed: number;
  /** Run the service with --progressive-reloads (docs/progressive-reloads.md). */
  progressive?: boolean;
  configs: string[];
  deployments: WorkloadSpec[];
  steps: Step[];
  p500: number;
  p429: number;
  /** A conflict on a write (a concurrent update the server gave up retrying). */
  p409?: number;
  pHang: number;
  /** The longest a watch event takes to arrive (a busy API server: seconds). */
  maxLagMs: number;
  faultsUntil: number;
  /** Test only: wire the writes without the leader's fence, to show the Lease check can fail. */
  noFence?: boolean;
  /** A Deployment whose surge pods a ResourceQuota refuses (403) for ever: a member that fails fast. */
  refuseSurge?: string;
  /**
   * Workloads whose pods read their configs once (environment variables of a container that does not
   * restart): a pod that read a bad content stays not Ready after the fix, until it is replaced.
   */
  stayBroken?: string[];
}

/**
 * The progressive schedule of a seed: its base schedule with more readers of cm0 (so that waves
 * matter), some config writes made bad and most of those followed by their fix (before or after the
 * canary's deadline), and sometimes a workload whose surge pods are refused for ever. Its own random
 * stream: the base schedule stays the seed's.
 */
export function withProgressiveSteps(base: ExecSchedule): ExecSchedule {
  const r = prng(base.seed ^ 0x2c1b3c6d);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
  const extra: WorkloadSpec[] = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => ({
    name: `web${base.deployments.length + i}`,
    replicas: 1 + Math.floor(r() * 2),
    maxSurge: pick([1, '50%'] as const),
    maxUnavailable: pick([0, 1] as const),
    graceMs: 200 + Math.floor(r() * 2_000),
    uses: ['cm0'],
  }));
  const steps: Step[] = [];
  for (const step of base.steps) {
    if (step.kind !== 'config' || r() >= 0.35) {
      steps.push(step);
      continue;
    }
    steps.push({ ...step, bad: true });
    if (r() < 0.7)
      steps.push({ at: step.at + 2_000 + Math.floor(r() * 90_000), kind: 'config', config: step.config });
  }
  const deployments = [...base.deployments, ...extra];
  const refuse = r() < 0.2 ? pick(deployments.filter((d) => d.kind !== 'StatefulSet')) : undefined;
  // Only where no template change of the user's comes: a rollout whose new pods never get Ready
  // waits for ever, and so does the reload behind it (docs/strategies.md: it waits for the rollout).
  const rolled = new Set(steps.flatMap((x) => (x.kind === 'template' ? [x.deployment] : [])));
  const stayBroken = deployments.filter((d) => !rolled.has(d.name) && r() < 0.3).map((d) => d.name);
  const last = Math.max(0, ...steps.map((x) => x.at));
  return {
    ...base,
    progressive: true,
    deployments,
    steps,
    faultsUntil: Math.max(base.faultsUntil, last + 20_000),
    ...(refuse ? { refuseSurge: refuse.name } : {}),
    ...(stayBroken.length > 0 ? { stayBroken } : {}),
  };
}

const MAX_SURGE = [0, 1, '25%', '50%'] as const;
const MAX_UNAVAILABLE = [0, 1, '25%', '50%'] as const;

export function randomExecSchedule(seed: number): ExecSchedule {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
  const configs = Array.from({ length: 1 + Math.floor(r() * 2) }, (_, i) => `cm${i}`);
  const deployments: WorkloadSpec[] = Array.from({ length: 1 + Math.floor(r() * 2) }, (_, i) => {
    const replicas = 1 + Math.floor(r() * 4);
    const uses = configs.filter(() => r() < 0.7);
    return {
      ...(r() < 0.3 ? { kind: 'StatefulSet' as const } : {}),
      name: `web${i}`,
      replicas,
      maxSurge: pick(MAX_SURGE),
      maxUnavailable: pick(MAX_UNAVAILABLE),
      ...(r() < 0.4 ? { pdbMinAvailable: Math.max(0, replicas - 1) } : {}),
      graceMs: r() < 0.3 ? 5_000 + Math.floor(r() * 25_000) : 200 + Math.floor(r() * 2_000),
      uses: uses.length > 0 ? uses : [pick(configs)],
    };
  });
  const steps: Step[] = [];
  let at = 0;
  for (let n = 2 + Math.floor(r() * 7); n > 0; n--) {
    at += Math.floor(r() * (r() < 0.6 ? 5_000 : 40_000));
    const x = r();
    if (x < 0.55) steps.push({ at, kind: 'config', config: pick(configs) });
    else if (x < 0.67) steps.push({ at, kind: 'template', deployment: pick(deployments).name });
    else if (x < 0.77) steps.push({ at, kind: 'break', ms: 5_000 + Math.floor(r() * 60_000) });
    else if (x < 0.89) steps.push({ at, kind: 'drop', compact: r() < 0.5 });
    else
      steps.push({
        at,
        kind: 'partition',
        ms: 5_000 + Math.floor(r() * 40_000),
        noticeMs: Math.floor(r() * 20_000),
      });
  }
  return {
    seed,
    configs,
    deployments,
    steps,
    p500: r() * 0.15,
    p429: r() * 0.15,
    p409: r() * 0.05,
    pHang: r() * 0.05,
    maxLagMs: r() < 0.3 ? 3_000 : 300,
    faultsUntil: at + 20_000,
  };
}

const KEY = Buffer.alloc(32, 5);
const START = Date.parse('2026-01-01T00:00:00Z');
const T = DEFAULT_TIMINGS;

interface Term {
  ctl: AbortController;
  reconciler: Reconciler;
  state: ClusterState;
  lastRenewMs: number;
  /** When this replica will notice its loss (a late notice: a stalled process). */
  noticeAt?: number;
}

interface Replica {
  id: string;
  partitionedUntil: number;
  noticeMs: number;
  term: Term | undefined;
  fence: () => void;
}

export interface ExecRun {
  violations: string[];
  /** Every write the model accepted and every schedule step, in order: equal for equal seeds. */
  trace: string[];
  /** What ran, for a reader who wonders whether anything did. */
  /** Eviction requests (dry runs too), surge pods created, pod patches (cost, handover), writes the fence refused, terms. */
  stats: { evictions: number; surgePods: number; podPatches: number; refused: number; terms: number };
}

export async function simulateExec(s: ExecSchedule): Promise<ExecRun> {
  vi.useFakeTimers({
    now: START,
    toFake: [
      'setTimeout',
      'clearTimeout',
      'setInterval',
      'clearInterval',
      'setImmediate',
      'clearImmediate',
      'Date',
    ],
  });
  try {
    return await run(s);
  } finally {
    vi.clearAllTimers();
    vi.useRealTimers();
  }
}

async function run(s: ExecSchedule): Promise<ExecRun> {
  const violations: string[] = [];
  const trace: string[] = [];
  const stats = { evictions: 0, surgePods: 0, podPatches: 0, refused: 0, terms: 0 };
  const r = prng(s.seed ^ 0x5bd1e995);
  const t = () => Date.now() - START;
  const faults = () => t() < s.faultsUntil;
  const changedAt = new Map<string, number>();
  let brokenUntil = 0;
  /** The environment's break windows, [from, to) ms. */
  const breaks: Array<[number, number]> = [];
  // Each config's content version, the versions that are bad, and the pods created reading one.
  const version = new Map<string, number>();
  const badVersions = new Set<string>();
  const content = (c: string) => `${c}@${version.get(c) ?? 0}`;
  /** Pods that read a bad content when they started, by uid: the contents they read. */
  const badPods = new Map<string, string[]>();
  const usesOf = (p: Obj) => s.deployments.find((d) => d.name === model.deploymentOf(p))?.uses ?? [];
  // The halt check: the workloads each content reached (a surge pod or an eviction of theirs by the
  // service), and the halts seen in a leader's status, each with the workloads reached by then.
  const reached = new Map<string, Set<string>>();
  /**
   * Per config: its halted content, the workloads it had reached, and the contents of the configs
   * halted with it then (one failed reload carried them): a newer change of one of those ends this
   * halt too (docs/adr/0045).
   */
  const halts = new Map<
    string,
    { content: string; reached: Set<string>; seenAt: number; with: Map<string, string> }
  >();
  /** The config's halt, while it holds: its content unchanged, and the contents halted with it too. */
  const holding = (c: string) => {
    const h = halts.get(c);
    if (!h || h.content !== content(c)) return undefined;
    for (const [other, was] of h.with) if (content(other) !== was) return undefined;
    return h;
  };
  /** Per workload id: when its recorded reload started (a new start rewrites it; progress does not). */
  const started = new Map<string, string | undefined>();
  const lease = { holder: '', renewMs: 0 };

  const model: ApiModel = new ApiModel({
    fault(method, path, body): Fault {
      // A quota that refuses the surge pods of one workload, for ever (issue 34: a member failing fast).
      if (
        s.refuseSurge !== undefined &&
        method === 'POST' &&
        path.endsWith('/pods') &&
        body?.includes(`"app":"${s.refuseSurge}"`)
      )
        return { kind: 'status', status: 403 };
      if (!faults()) return { kind: 'none' };
      if (r() < s.pHang) return { kind: 'hang', applied: method !== 'GET' && r() < 0.5 };
      if (path.endsWith('/eviction') && r() < s.p429) return { kind: 'status', status: 429 };
      if (r() < s.p500) return { kind: 'status', status: 500 };
      if (method !== 'GET' && s.p409 !== undefined && r() < s.p409) return { kind: 'status', status: 409 };
      return { kind: 'none' };
    },
    lag: () => Math.floor(r() * s.maxLagMs),
    maxLagMs: s.maxLagMs,
    startMs(p) {
      if (usesOf(p).some((c) => badVersions.has(content(c)))) {
        badPods.set(p.metadata.uid, usesOf(p).map(content));
        return undefined;
      }
      return Date.now() < brokenUntil ? undefined : 500 + Math.floor(r() * 4_000);
    },
    healable: (p) => !badPods.has(p.metadata.uid),
    onWrite(sender, method, path, body) {
      trace.push(`t=${t()} ${sender.identity} ${method} ${path} ${body ?? ''}`);
      if (s.progressive) reaching(method, path, body);
      if (path.endsWith('/eviction')) stats.evictions++;
      else if (method === 'POST') stats.surgePods++;
      else if (method === 'PATCH' && path.includes('/pods/')) stats.podPatches++;
      checkLease(sender.identity, `${method} ${path}`);
    },
    violation: (msg) => violations.push(`t=${t()}: ${msg}`),
    note: (msg) => trace.push(`t=${t()} model: ${msg}`),
    replacedTwice(deployment, createdMs) {
      const spec = s.deployments.find((d) => d.name === deployment) as WorkloadSpec;
      const newest = Math.max(...spec.uses.map((c) => changedAt.get(c) ?? -Infinity));
      if (newest === -Infinity || createdMs < effectiveCutoff(newest)) return undefined;
      return `replaced twice: created at t=${createdMs - START}, after the cutoff of the newest change (t=${newest - START})`;
    },
  });

  function checkLease(identity: string, what: string) {
    if (lease.holder !== identity || Date.now() >= lease.renewMs + T.leaseDurationMs) {
      violations.push(
        `t=${t()}: ${identity} wrote (${what}) without holding the Lease (holder ${lease.holder || 'none'}, renewed t=${lease.renewMs - START})`,
      );
    }
  }

  /** The halts the leaders' statuses show now, each for the content its config holds (issue 34). */
  function sawHalts() {
    for (const rep of replicas) {
      const term = rep.term;
      if (!term || term.ctl.signal.aborted) continue;
      const listed = term.reconciler.status().halted ?? [];
      for (const h of listed) {
        const c = h.config.split('/').pop() as string;
        // Decided after the config's newest write: a halt of the content it holds now.
        if (Date.parse(h.since) < (changedAt.get(c) ?? 0)) continue;
        if (holding(c)) continue;
        const companions = listed
          .filter((o) => o !== h && o.workload === h.workload && o.since === h.since)
          .map((o) => o.config.split('/').pop() as string);
        halts.set(c, {
          content: content(c),
          reached: new Set(reached.get(content(c)) ?? []),
          seenAt: Date.now(),
          with: new Map(companions.map((o) => [o, content(o)])),
        });
        // A good content halted: only where the failure can be blamed on something else the reload
        // carried (another config's bad content: both changes are halted, which failed is unknown), or
        // the environment broke the pods meanwhile. Anything else blames a good change. Carried by
        // the same failing reload: this leader halted both by one failure, at one workload and time
        // (a reload carrying a change this leader had halted before must not have started at all).
        const coCarried = listed.some((o) => {
          const other = o.config.split('/').pop() as string;
          return (
            other !== c && badVersions.has(content(other)) && o.workload === h.workload && o.since === h.since
          );
        });
        const broken = breaks.some(([from, to]) => to > (changedAt.get(c) ?? 0) && from <= Date.now());
        if (!badVersions.has(content(c)) && !coCarried && !broken)
          violations.push(`t=${t()}: the good change ${content(c)} was halted at ${h.workload}: ${h.why}`);
        trace.push(
          `t=${t()} halt of ${content(c)} seen (reached ${[...(reached.get(content(c)) ?? [])].join(',')})`,
        );
      }
    }
  }

  /** A surge pod or an eviction by the service reaches its workload with the contents it reads now. */
  function reaching(method: string, path: string, body: string | undefined) {
    let deployment: string | undefined;
    if (method === 'POST' && path.endsWith('/pods') && body) {
      deployment = (JSON.parse(body) as Obj).metadata?.labels?.app;
    } else if (path.endsWith('/eviction')) {
      const pod = model.objs.pods.get(path.split('/').at(-2) ?? '');
      deployment = pod ? model.deploymentOf(pod) : undefined;
    }
    if (deployment !== undefined) reach(deployment);
  }

  function reach(deployment: string) {
    const spec = s.deployments.find((d) => d.name === deployment);
    if (!spec) return;
    sawHalts();
    for (const c of spec.uses) {
      const h = holding(c);
      if (h && !h.reached.has(spec.name))
        violations.push(
          `t=${t()}: the halted change ${h.content} reached ${spec.name}; it had reached ${[...h.reached].join(',') || 'nothing'}`,
        );
      const set = reached.get(content(c)) ?? new Set<string>();
      set.add(spec.name);
      reached.set(content(c), set);
    }
  }

  for (const c of s.configs)
    model.create('configmaps', { metadata: { name: c, uid: '', resourceVersion: '' }, data: { v: '0' } });
  for (const d of s.deployments) model.addDeployment(d);
  // The Deployments come up before the service starts.
  await vi.advanceTimersByTimeAsync(10_000);
  const origin = Date.now();
  const at = (ms: number) => origin + ms;

  // SIM_LOG=1: the service's own log lines go into the trace (slower; for reading a failing seed).
  const log: Logger = process.env.SIM_LOG
    ? pino(
        { level: 'debug', base: null, timestamp: false },
        { write: (line: string) => void trace.push(`t=${t()} log ${line.trim()}`) },
      )
    : silentLogger;
  const cfg = {
    ...loadConfig(
      [
        '--release-namespace=rel',
        '--debounce=1s',
        '--default-strategy=restart',
        s.progressive ? '--progressive-reloads' : '--progressive-reloads=false',
      ],
      {},
    ),
    reloadDeadlineMs: 60_000,
  };
  const { globals } = compileGlobals(cfg);
  const ledgerStore = new MemoryLedger();

  const fencedLedger = (rep: Replica): LedgerStore => {
    const guard = (what: string) => {
      rep.fence();
      checkLease(rep.id, what);
    };
    return {
      fence: () => undefined,
      load: () => ledgerStore.load(),
      keyState: () => ledgerStore.keyState(),
      writtenAtMs: () => ledgerStore.writtenAtMs(),
      identifyWith: () => undefined,
      stampKey: async () => undefined,
      get: (id) => ledgerStore.get(id),
      entries: () => ledgerStore.entries(),
      async put(id: string, e: LedgerEntry) {
        guard(`ledger put ${id}`);
        trace.push(`t=${t()} ${rep.id} ledger ${id} ${e.pending ? 'pending' : 'done'}`);
        // A reload starts (its pending action is recorded first): it reaches its workload with what
        // the configs hold now, even if its first eviction comes after a halt (nothing more *starts*).
        if (s.progressive && e.pending && started.get(id) !== e.pending.startedAt) {
          started.set(id, e.pending.startedAt);
          reach(id.split('/').pop() as string);
        }
        await ledgerStore.put(id, e);
      },
      async remove(id: string) {
        guard(`ledger remove ${id}`);
        await ledgerStore.remove(id);
      },
      async putMany(es) {
        for (const [id, e] of es) await this.put(id, e);
      },
      async removeMany(ids) {
        for (const id of ids) await this.remove(id);
      },
      halts: () => ledgerStore.halts(),
      async putHalt(h) {
        guard(`ledger halt ${h.config}`);
        await ledgerStore.putHalt(h);
      },
      async removeHalt(config) {
        guard(`ledger halt removed ${config}`);
        await ledgerStore.removeHalt(config);
      },
    };
  };

  const replicas: Replica[] = ['r0', 'r1'].map((id) => {
    const rep: Replica = { id, partitionedUntil: 0, noticeMs: 0, term: undefined, fence: () => undefined };
    // The replica's elector as the fence sees it (kube/leader.ts mayWrite): leading, and before the
    // write deadline counted from its last renewal that was sent.
    const election: LeaderElection = {
      identity: id,
      isLeader: () => rep.term !== undefined && !rep.term.ctl.signal.aborted,
      mayWrite: () =>
        rep.term !== undefined &&
        !rep.term.ctl.signal.aborted &&
        Date.now() < writeDeadline(rep.term.lastRenewMs, T),
      leader: () => lease.holder,
      stop: async () => undefined,
      resign: async () => undefined,
    };
    const fence = leaderWriteFence(() => election);
    rep.fence = s.noFence ? () => undefined : fence;
    return rep;
  });

  const access = (rep: Replica): ClusterAccess =>
    writeGatedAccess(
      {
        getCurrentCluster: () => ({ server: 'http://model.invalid' }),
        applyToHTTPSOptions: async () => undefined,
        inProcess: model.server({ identity: rep.id }),
      },
      async () => undefined,
      () => {
        try {
          rep.fence();
        } catch (err) {
          stats.refused++;
          trace.push(`t=${t()} ${rep.id} refused by the fence`);
          throw err;
        }
      },
    );

  const startTerm = (rep: Replica) => {
    stats.terms++;
    trace.push(`t=${t()} ${rep.id} leads`);
    const ctl = new AbortController();
    const state = new ClusterState(cfg.defaultStrategy, false);
    for (const c of model.objs.configmaps.values())
      state.putConfig(configRecord('ConfigMap', c as never, KEY) as ConfigRecord);
    for (const d of model.objs.deployments.values())
      state.putWorkload(workloadRecord('Deployment', d as never) as WorkloadRecord);
    for (const set of model.objs.statefulsets.values())
      state.putWorkload(workloadRecord('StatefulSet', set as never) as WorkloadRecord);
    const kc = access(rep);
    const core = coreApi(kc);
    const executor = strategyExecutor({
      cfg,
      state,
      inScope: (ns) => ns === NS,
      jobSpecs: new JobSpecStore({
        core,
        namespace: 'rel',
        prefix: 'gitops-reloader',
        warn: () => undefined,
      }),
      events: { async emit() {} },
      core,
      apps: appsApi(kc),
      batch: batchApi(kc),
      custom: customApi(kc),
      kc,
      log,
    });
    const reconciler = new Reconciler({
      cfg,
      state,
      ledger: fencedLedger(rep),
      events: { async emit() {} },
      log,
      globals,
      hashKey: KEY,
      strategies: executor,
      inScope: (ns) => ns === NS,
      timers: {
        now: () => Date.now(),
        set: (fn, ms) => setTimeout(fn, ms),
        clear: (h) => clearTimeout(h as never),
      },
      term: ctl.signal,
      // The start-up judgement serve.ts gives the reconciler: it lists the pods (docs/catch-up.md).
      catchUp: (w, set, entry, key, opts) => catchUp({ core, state, log }, w, set, entry, key, opts),
    });
    rep.term = { ctl, reconciler, state, lastRenewMs: Date.now() };
    // The elector goes on renewing while the term starts (onStartedLeading is not awaited by it).
    void reconciler.start().catch((err: Error) => {
      // As serve.ts does: a leader that cannot start releases the Lease and holds off (resign).
      trace.push(`t=${t()} ${rep.id} start failed: ${err.message}`);
      if (rep.term?.ctl !== ctl) return;
      endTerm(rep);
      if (lease.holder === rep.id) lease.holder = '';
      rep.partitionedUntil = Math.max(rep.partitionedUntil, Date.now() + 5_000);
    });
  };

  const stopping: Promise<void>[] = [];
  const endTerm = (rep: Replica) => {
    const term = rep.term;
    if (!term) return;
    trace.push(`t=${t()} ${rep.id} stops leading`);
    term.ctl.abort(new Error('leadership lost'));
    rep.term = undefined;
    stopping.push(term.reconciler.stop());
  };

  // The informers: every change the model makes reaches each term's state and reconciler at once.
  model.subscribe((c) => {
    for (const rep of replicas) {
      const term = rep.term;
      if (!term || term.ctl.signal.aborted) continue;
      if (c.resource === 'configmaps' && c.type !== 'DELETED') {
        const rec = configRecord('ConfigMap', c.object as never, KEY) as ConfigRecord;
        const old = term.state.putConfig(rec);
        term.reconciler.configChanged(old, rec);
      } else if ((c.resource === 'deployments' || c.resource === 'statefulsets') && c.type !== 'DELETED') {
        const kind = c.resource === 'deployments' ? 'Deployment' : 'StatefulSet';
        const { now, old } = term.state.putWorkload(
          workloadRecord(kind, c.object as never) as WorkloadRecord,
        );
        term.reconciler.workloadChanged(old, now);
      }
    }
  });

  // The election: the holder renews every retry period unless partitioned; it notices a loss at its
  // renew deadline (plus a stall); a free or expired Lease goes to the first replica that can reach it.
  const elect = () => {
    const now = Date.now();
    for (const rep of replicas) {
      const term = rep.term;
      if (!term) continue;
      if (now >= rep.partitionedUntil && lease.holder === rep.id) {
        lease.renewMs = now;
        term.lastRenewMs = now;
      } else if (now >= term.lastRenewMs + T.renewDeadlineMs + rep.noticeMs) endTerm(rep);
    }
    if (lease.holder === '' || now >= lease.renewMs + T.leaseDurationMs) {
      const next = replicas.find((x) => !x.term && now >= x.partitionedUntil);
      if (next) {
        lease.holder = next.id;
        lease.renewMs = now;
        startTerm(next);
      }
    }
  };
  let electing = true;
  const tick = () => {
    if (!electing) return;
    elect();
    if (s.progressive) sawHalts();
    setTimeout(tick, T.retryPeriodMs);
  };
  tick();

  for (const step of [...s.steps].sort((a, b) => a.at - b.at)) {
    await vi.advanceTimersByTimeAsync(Math.max(0, at(step.at) - Date.now()));
    trace.push(`t=${t()} step ${JSON.stringify(step)}`);
    switch (step.kind) {
      case 'config': {
        const cm = model.objs.configmaps.get(step.config);
        if (!cm) break;
        changedAt.set(step.config, Date.now());
        version.set(step.config, (version.get(step.config) ?? 0) + 1);
        if (step.bad) badVersions.add(content(step.config));
        // A container that crashes on a bad content reads the config again when it restarts (an
        // environment variable, a mounted file): once no content it needs is bad, it becomes Ready,
        // still created before the change (a reload must still replace it).
        else
          model.heal((p) => {
            const read = badPods.get(p.metadata.uid);
            if (read === undefined || s.stayBroken?.includes(model.deploymentOf(p) ?? '')) return false;
            return usesOf(p).every((c) => !badVersions.has(content(c)));
          });
        const old = structuredClone(cm);
        cm.data = { v: String(Number(cm.data?.v ?? 0) + 1) };
        model.update('configmaps', cm, old);
        break;
      }
      case 'template':
        model.userTemplateChange(step.deployment);
        break;
      case 'break':
        brokenUntil = Date.now() + step.ms;
        breaks.push([Date.now(), brokenUntil]);
        setTimeout(() => model.heal(), step.ms);
        break;
      case 'drop':
        model.dropWatches(step.compact);
        break;
      case 'partition': {
        const holder = replicas.find((x) => x.id === lease.holder && x.term);
        if (holder) {
          holder.partitionedUntil = Date.now() + step.ms;
          holder.noticeMs = step.noticeMs;
        }
        break;
      }
    }
  }
  // Quiescence: the faults end, every break heals, and retries and back-offs have their time.
  await vi.advanceTimersByTimeAsync(Math.max(0, at(s.faultsUntil) - Date.now()));
  model.heal();
  await vi.advanceTimersByTimeAsync(30 * 60_000);
  electing = false;

  for (const d of s.deployments) {
    // A workload whose surge pods are refused for ever reloads never; the others must not wait for it.
    if (d.name === s.refuseSurge) continue;
    // A bad newest content stays halted where it failed (the halt check above judges it), and so does
    // a good change of another config of its readers: their reload would carry the halted change.
    if (d.uses.some((c) => badVersions.has(content(c)))) continue;
    // So does a good content halted with a bad one (one reload carried both) or by a broken
    // environment, and still in force: a halt ends by resume or a newer change (of its config, or of
    // one halted with it) only.
    if (d.uses.some((c) => holding(c))) continue;
    for (const p of model.objs.pods.values()) {
      if (p.metadata.labels?.app !== d.name || p.metadata.deletionTimestamp) continue;
      const created = model.createdMs.get(p.metadata.uid) ?? 0;
      for (const c of d.uses) {
        const since = changedAt.get(c);
        if (since !== undefined && created <= since)
          violations.push(
            `lost: ${d.name} pod ${p.metadata.name} (created t=${created - START}) predates the change of ${c} at t=${since - START}`,
          );
      }
    }
  }
  for (const w of model.templateWrites) violations.push(`a pod-template write in restart mode: ${w}`);
  for (const u of new Set(model.unserved)) violations.push(`the model does not serve ${u}`);
  for (const rep of replicas) endTerm(rep);
  await vi.advanceTimersByTimeAsync(60_000);
  await Promise.all(stopping);
  return { violations, trace, stats };
}

/** Drops steps one at a time while the schedule still fails: a shorter schedule to read. */
export async function shrinkExec(s: ExecSchedule): Promise<ExecSchedule> {
  let cur = s;
  for (let i = cur.steps.length - 1; i >= 0; i--) {
    const next = { ...cur, steps: cur.steps.filter((_, j) => j !== i) };
    if ((await simulateExec(next)).violations.length > 0) cur = next;
  }
  return cur;
}
