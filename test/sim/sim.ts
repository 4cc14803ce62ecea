// A deterministic simulation of the engine: the real Reconciler (batcher, queue, decide, run, settle,
// recorder) against a model of a namespace of Deployments and their pods, on a fake clock, with a
// seeded random schedule of config changes and strategy faults (failures, stalls past the reload
// deadline, "waiting"). It searches interleavings example tests do not reach; the real control plane
// stays the proof (test/restart/retry-newest.test.ts is the one for what this found first).
//
// Checked after every ledger write and at quiescence:
//  - nothing lost: every pod was created after the newest change of every config it references;
//  - the ledger ends on the current target, with nothing pending;
//  - the ledger never goes back: no config's recorded version is older than one recorded before;
//  - I3: no pod is replaced for a change it was created after.

import { loadConfig } from '../../service/config/config.ts';
import { compileGlobals } from '../../service/core/annotations.ts';
import type { LedgerEntry } from '../../service/core/ledger-entry.ts';
import { watchedSet } from '../../service/core/plan.ts';
import type { ConfigRecord, WorkloadRecord } from '../../service/core/records.ts';
import type { ExecRequest, ExecResult, StrategiesPort } from '../../service/engine/strategies-port.ts';
import { configRecord, workloadRecord } from '../../service/kube/to-record.ts';
import { silentLogger } from '../../service/log.ts';
import { Reconciler } from '../../service/reconciler.ts';
import { ClusterState } from '../../service/state.ts';
import { MemoryLedger } from '../support/engine-fakes.ts';

/** mulberry32: a small seeded PRNG, enough to pick schedules. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Change {
  /** Milliseconds after the start. */
  at: number;
  /** The config that changes; absent: the leader crashes and a new term starts from the ledger. */
  config?: string;
}

export interface Schedule {
  seed: number;
  configs: string[];
  /** Deployment name → the configs it reads, and its replicas. */
  deployments: Array<{ name: string; uses: string[]; replicas: number }>;
  changes: Change[];
  minIntervalMs: number;
  /** Chances per attempt while the faults last (the first `faultsUntil` ms). */
  pFail: number;
  pStall: number;
  pWait: number;
  faultsUntil: number;
}

export function randomSchedule(seed: number): Schedule {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T;
  const configs = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => `cm${i}`);
  const deployments = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, i) => {
    const uses = configs.filter(() => r() < 0.6);
    return {
      name: `web${i}`,
      uses: uses.length > 0 ? uses : [pick(configs)],
      replicas: 1 + Math.floor(r() * 3),
    };
  });
  const changes: Change[] = [];
  let at = 0;
  for (let n = 2 + Math.floor(r() * 8); n > 0; n--) {
    // Bursts (a change while the last one's reload runs or waits) and quiet spells.
    at += Math.floor(r() * (r() < 0.6 ? 4_000 : 30_000));
    changes.push(r() < 0.15 ? { at } : { at, config: pick(configs) });
  }
  return {
    seed,
    configs,
    deployments,
    changes,
    minIntervalMs: pick([0, 5_000, 10_000, 30_000]),
    pFail: r() * 0.6,
    pStall: r() * 0.3,
    pWait: r() * 0.2,
    faultsUntil: at + 30_000,
  };
}

interface Pod {
  uid: string;
  createdAt: number;
}

const KEY = Buffer.alloc(32, 3);
const NS = 'sim';
const DEADLINE_MS = 20_000;

/** Runs one schedule to quiescence and returns the invariant violations it saw (none: it passed). */
/** What the last simulate() did, for a reader who wonders whether anything ran. */
export const stats = { runs: 0, replaced: 0 };

export async function simulate(s: Schedule): Promise<string[]> {
  const violations: string[] = [];
  stats.runs = 0;
  stats.replaced = 0;
  const r = prng(s.seed ^ 0x9e3779b9);
  // The clock and timers: time moves only when the driver says so.
  let now = Date.parse('2026-01-01T00:00:00Z');
  const start = now;
  let seq = 0;
  const pending: Array<{ at: number; seq: number; fn: () => void }> = [];
  const timers = {
    now: () => now,
    set: (fn: () => void, ms: number) => {
      const t = { at: now + Math.max(0, ms), seq: seq++, fn };
      pending.push(t);
      return t;
    },
    clear: (h: unknown) => {
      const i = pending.indexOf(h as (typeof pending)[number]);
      if (i >= 0) pending.splice(i, 1);
    },
  };
  const flush = () => new Promise<void>((res) => setImmediate(res));
  const advance = async (to: number) => {
    await flush();
    for (;;) {
      pending.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = pending[0];
      if (!next || next.at > to) break;
      pending.shift();
      now = Math.max(now, next.at);
      next.fn();
      await flush();
    }
    now = Math.max(now, to);
    await flush();
  };
  const sleep = (ms: number, signal: AbortSignal) =>
    new Promise<boolean>((res) => {
      if (signal.aborted) return res(false);
      const t = timers.set(() => {
        signal.removeEventListener('abort', onAbort);
        res(true);
      }, ms);
      const onAbort = () => {
        timers.clear(t);
        res(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });

  const cfg = {
    ...loadConfig(['--release-namespace=rel', '--debounce=1s'], {}),
    minReloadIntervalMs: s.minIntervalMs,
    reloadDeadlineMs: DEADLINE_MS,
  };
  const { globals } = compileGlobals(cfg);
  const state = new ClusterState(cfg.defaultStrategy, false);
  let rv = 1;
  const version = new Map<string, number>();
  const changedAt = new Map<string, number>();
  const configRec = (name: string) =>
    configRecord(
      'ConfigMap',
      {
        metadata: { name, namespace: NS, uid: `u-${name}`, resourceVersion: String(++rv) },
        data: { v: String(version.get(name)) },
      },
      KEY,
    ) as ConfigRecord;
  for (const c of s.configs) {
    version.set(c, 0);
    state.putConfig(configRec(c));
  }
  const pods = new Map<string, Pod[]>();
  let uid = 0;
  for (const d of s.deployments) {
    const rec = workloadRecord('Deployment', {
      metadata: {
        name: d.name,
        namespace: NS,
        uid: `u-${d.name}`,
        resourceVersion: String(++rv),
        annotations: { 'reloader.stakater.com/auto': 'true' },
      },
      spec: {
        replicas: d.replicas,
        template: {
          spec: { containers: [{ name: 'c', envFrom: d.uses.map((name) => ({ configMapRef: { name } })) }] },
        },
      },
    }) as WorkloadRecord;
    state.putWorkload(rec);
    pods.set(
      `Deployment/${NS}/${d.name}`,
      Array.from({ length: d.replicas }, () => ({ uid: `p${uid++}`, createdAt: now - 60_000 })),
    );
  }
  // Which version of a config a digest in the ledger stands for.
  const versionOf = new Map<string, number>();
  const noteDigests = () => {
    for (const t of state.workloads.values()) {
      const set = watchedSet(t.rec, t.parsed, state, globals).digests;
      for (const [id, dg] of Object.entries(set))
        versionOf.set(`${id}=${dg}`, version.get(id.split('/')[2] as string) ?? -1);
    }
  };
  noteDigests();

  const ledger = new (class extends MemoryLedger {
    override async put(id: string, e: LedgerEntry) {
      const before = this.get(id)?.configs ?? {};
      for (const [c, dg] of Object.entries(e.configs)) {
        const was = before[c] === undefined ? undefined : versionOf.get(`${c}=${before[c]}`);
        const is = versionOf.get(`${c}=${dg}`);
        if (was !== undefined && is !== undefined && is < was) {
          violations.push(`t=${now - start}: the ledger went back for ${id}: ${c} v${was} → v${is}`);
        }
      }
      await super.put(id, e);
    }
  })();

  const faults = () => now - start < s.faultsUntil;
  const strategies: StrategiesPort = {
    notifies: false,
    async run(req: ExecRequest): Promise<ExecResult> {
      const id = req.workload.id;
      const a = req.action;
      stats.runs++;
      if (faults() && r() < s.pWait)
        return { kind: 'waiting', why: 'modelled wait', retryMs: 1_000 + Math.floor(r() * 10_000) };
      const live = pods.get(id) ?? [];
      const targets = a.targets ? new Set(a.targets) : undefined;
      const snapshot = live
        .filter((p) => (targets ? targets.has(p.uid) : p.createdAt < a.cutoffMs))
        .map((p) => p.uid);
      await req.begin(snapshot);
      // Like the real restart: no replacement before the cutoff has passed, or it would look old.
      if (now < a.cutoffMs && !(await sleep(a.cutoffMs - now, req.signal))) return aborted();
      let replaced = 0;
      for (const u of snapshot) {
        if (faults() && r() < s.pStall) {
          await sleep(10 * DEADLINE_MS, req.signal); // blocked (a PDB) until the deadline cuts it
          return aborted();
        }
        if (!(await sleep(100 + Math.floor(r() * 3_000), req.signal))) return aborted();
        if (faults() && r() < s.pFail)
          return { kind: 'failed', error: new Error('modelled API error'), errorKind: 'update_workload' };
        const list = pods.get(id) ?? [];
        const i = list.findIndex((p) => p.uid === u);
        if (i < 0) continue;
        const old = list[i] as Pod;
        if (old.createdAt >= a.cutoffMs)
          violations.push(`t=${now - start}: I3: ${id} replaced ${u}, created after its cutoff`);
        list.splice(i, 1, { uid: `p${uid++}`, createdAt: now });
        replaced++;
        stats.replaced++;
      }
      return { kind: 'done', replaced, summary: `replaced ${replaced}` };
    },
    async missingNeeded() {
      return [];
    },
    async sweep() {},
    async resumeJobs() {},
    async dropSurgePods() {},
  };
  const aborted = (): ExecResult => ({
    kind: 'failed',
    error: new Error('aborted'),
    errorKind: 'update_workload',
  });

  const term = () =>
    new Reconciler({
      cfg,
      state,
      ledger,
      events: { async emit() {} },
      log: silentLogger,
      globals,
      hashKey: KEY,
      strategies,
      inScope: () => true,
      timers,
    });
  let reconciler = term();
  await reconciler.start();
  for (const c of [...s.changes].sort((x, y) => x.at - y.at)) {
    await advance(start + c.at);
    if (c.config === undefined) {
      // A crash or leader change: the term's runs stop where they are; the next term starts from
      // the ledger (pending reloads resume with their cutoff and snapshot, I5).
      const stopping = reconciler.stop();
      await advance(now);
      await stopping;
      reconciler = term();
      const starting = reconciler.start();
      await advance(now);
      await starting;
      continue;
    }
    version.set(c.config, (version.get(c.config) ?? 0) + 1);
    changedAt.set(c.config, now);
    const rec = configRec(c.config);
    const old = state.putConfig(rec);
    noteDigests();
    reconciler.configChanged(old, rec);
    await flush();
  }
  // Quiescence: the faults end, and every retry and back-off has had its time.
  await advance(start + s.faultsUntil + 30 * 60_000);

  for (const t of state.workloads.values()) {
    const d = s.deployments.find((x) => `Deployment/${NS}/${x.name}` === t.id);
    for (const c of d?.uses ?? []) {
      const since = changedAt.get(c);
      if (since === undefined) continue;
      for (const p of pods.get(t.id) ?? []) {
        if (p.createdAt <= since) {
          violations.push(
            `lost: ${t.id} pod ${p.uid} (created t=${p.createdAt - start}) predates the change of ${c} at t=${since - start}`,
          );
        }
      }
    }
    const e = ledger.get(t.id);
    const target = watchedSet(t.rec, t.parsed, state, globals).digests;
    if (e?.pending) violations.push(`${t.id}: still pending at quiescence`);
    if (JSON.stringify(e?.configs) !== JSON.stringify(target)) {
      const v = (m: Record<string, string> | undefined) =>
        Object.entries(m ?? {})
          .map(([c, dg]) => `${c.split('/')[2]}=v${versionOf.get(`${c}=${dg}`)}`)
          .join(',');
      violations.push(`${t.id}: the ledger holds ${v(e?.configs)}, the cluster ${v(target)}`);
    }
  }
  await reconciler.stop();
  return violations;
}

/** Drops changes one at a time while the schedule still fails: a shorter schedule to read. */
export async function shrink(s: Schedule): Promise<Schedule> {
  let cur = s;
  for (let i = cur.changes.length - 1; i >= 0; i--) {
    const next = { ...cur, changes: cur.changes.filter((_, j) => j !== i) };
    if ((await simulate(next)).length > 0) cur = next;
  }
  return cur;
}
