// A deterministic simulation of the engine: the real Reconciler (batcher, queue, decide, run, settle,
// recorder), the real start-up judgement (engine/startup.ts with service/catch-up.ts listing pods) and
// the real Argo CD SyncGate, against a model of a namespace of ConfigMaps, Deployments and their pods,
// Argo CD Applications, and the ledger's API, on a fake clock. A seeded schedule (schedule.ts) mixes
// config updates, metadata-only edits, deletions and re-creations, template changes, workload
// deletion and re-creation, leader changes, crashes (with changes while down) and restarts under a new
// HMAC key, Argo CD syncs that start, succeed or fail with notifications lost, duplicated or late,
// and faults: strategy failures, stalls, waits; ledger writes failing (409, 500, a timeout that
// applied the write); Events not recorded. The model of the strategies is thin on purpose (pods
// replaced one by one); the real strategies against a model of the API are test/sim/exec-*.ts.
//
// Checked whenever a pod is replaced or a reload starts, on every ledger write, and at quiescence:
//  - nothing lost: every pod reads the current data of every config it uses;
//  - the ledger never goes back, ends on the current target, with nothing pending, and keeps no entry
//    of a deleted workload;
//  - I3: no pod is replaced for a change it was created after;
//  - no needless replacement: no pod that already reads the current data of every config it uses is
//    replaced (so none twice for one change, none for a metadata-only edit, a deletion or a change a
//    template rollout already brought), beyond what the documented rules allow (the 1 s clock-skew
//    margin, and after a key change the newest write of a config as the bound of its data change);
//  - no reload starts while a config its pods need (not optional) is missing;
//  - with the Application watch, no reload for a change seen during an app's sync starts before the
//    sync ends;
//  - with broken contents (withBadContents, progressive reloads): a halt survives (a halted content,
//    as the ledger's halt records say, reaches no further workload), and a good change completes:
//    "nothing lost" and the ledger's end hold for every workload, except one that reads a broken
//    content still current, or a good one halted with such a content (docs/adr/0045).

import { pino } from 'pino';
import { SyncGate } from '../../service/argocd/gate.ts';
import type { SyncNotification } from '../../service/argocd/notification.ts';
import type { AppSync, OperationPhase } from '../../service/argocd/sync-tracker.ts';
import { catchUp } from '../../service/catch-up.ts';
import { loadConfig } from '../../service/config/config.ts';
import { compileGlobals } from '../../service/core/annotations.ts';
import { keyFingerprint } from '../../service/core/config-hash.ts';
import { effectiveCutoff } from '../../service/core/cutoff.ts';
import { decodeHalt, isHaltKey } from '../../service/core/halt-record.ts';
import { decodeEntry } from '../../service/core/ledger-entry.ts';
import { missingNeeded } from '../../service/core/needed-configs.ts';
import { watchedSet } from '../../service/core/plan.ts';
import { type PodHealthFacts, unhealthy } from '../../service/core/pod-health.ts';
import type { ConfigRecord, WorkloadRecord } from '../../service/core/records.ts';
import { sameDigests } from '../../service/engine/startup.ts';
import type { ExecRequest, ExecResult, StrategiesPort } from '../../service/engine/strategies-port.ts';
import type { CoreApi } from '../../service/kube/api.ts';
import { KEY_ANNOTATION, Ledger } from '../../service/kube/ledger.ts';
import { configRecord, workloadRecord } from '../../service/kube/to-record.ts';
import { silentLogger as quiet } from '../../service/log.ts';
import { Reconciler } from '../../service/reconciler.ts';
import { ClusterState } from '../../service/state.ts';
import { type Delivery, prng, type Schedule, type Step } from './schedule.ts';

export { prng, randomSchedule, type Schedule, type Step } from './schedule.ts';

/** SIM_TRACE=1 logs what the engine does (with SIM_SEED: one schedule's story). */
let traceAt = 0;
const silentLogger = process.env.SIM_TRACE
  ? pino({ level: 'debug', base: null, timestamp: () => `,"t":${traceAt}` })
  : quiet;
const KEYS = [3, 4, 5, 6, 7, 8, 9, 10].map((n) => Buffer.alloc(32, n));
const NS = 'sim';
const ARGO_NS = 'argocd';
const DEADLINE_MS = 20_000;
/** effectiveCutoff's margin: a pod created this soon after a write may be replaced for it (ADR 0008). */
const SKEW_MS = 2_000;

/** What the last simulate() did, for a reader who wonders whether anything ran. */
export const stats = {
  runs: 0,
  replaced: 0,
  steps: {} as Record<string, number>,
  ledgerFaults: 0,
  /** Halt records written (progressive reloads of broken contents). */
  halts: 0,
};

interface Pod {
  uid: string;
  createdAt: number;
  /** Per config: the data version it read, absent (optional and missing) or waiting (needed and missing). */
  reads: Map<string, number | 'absent' | 'waiting'>;
  /** Configs it waited for (needed and missing at its creation): it started with what came back. */
  waited: Set<string>;
}
interface ConfigModel {
  name: string;
  app?: string;
  uid: number;
  exists: boolean;
  version: number;
  /** Data version → when it was first written. */
  contentAt: Map<number, number>;
  /** Every write (data or metadata, creation included). */
  writes: number[];
  createdAt: number;
  meta: number;
  /** Data versions whose pods never become Ready (a broken content: withBadContents). */
  bad: Set<number>;
}
interface DeploymentModel {
  name: string;
  uses: Array<{ config: string; optional: boolean }>;
  replicas: number;
  uid: number;
  exists: boolean;
  createdAt: number;
  template: number;
  pods: Pod[];
}
interface AppModel {
  name: string;
  running: boolean;
  startedMs: number;
  op?: { phase: OperationPhase; startedAt: string };
  /** Ops ended, for the final sync under --argocd-on-failed-sync=hold. */
  ops: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
const isoSeconds = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
const configName = (id: string) => id.split('/')[2] as string;

/** Runs one schedule to quiescence and returns the invariant violations it saw (none: it passed). */
export interface SimOptions {
  /** Run the engine with --progressive-reloads (docs/progressive-reloads.md): the same invariants hold. */
  progressive?: boolean;
}

export async function simulate(s: Schedule, o: SimOptions = {}): Promise<string[]> {
  const violations: string[] = [];
  stats.runs = 0;
  stats.replaced = 0;
  stats.steps = {};
  stats.ledgerFaults = 0;
  stats.halts = 0;
  const r = prng(s.seed ^ 0x9e3779b9);
  // The clock and timers: time moves only when the driver says so.
  let now = Date.parse('2026-01-01T00:00:00Z');
  const start = now;
  const t = (ms = now) => `t=${ms - start}`;
  let seq = 0;
  const pending: Array<{ at: number; seq: number; fn: () => void }> = [];
  const timers = {
    now: () => now,
    set: (fn: () => void, ms: number) => {
      const x = { at: now + Math.max(0, ms), seq: seq++, fn };
      pending.push(x);
      return x;
    },
    clear: (h: unknown) => {
      const i = pending.indexOf(h as (typeof pending)[number]);
      if (i >= 0) pending.splice(i, 1);
    },
  };
  const flush = () => new Promise<void>((res) => setImmediate(res));
  const advance = async (to: number) => {
    traceAt = now - start;
    await flush();
    for (;;) {
      pending.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = pending[0];
      if (!next || next.at > to) break;
      pending.shift();
      now = Math.max(now, next.at);
      traceAt = now - start;
      next.fn();
      await flush();
    }
    now = Math.max(now, to);
    await flush();
  };
  const sleep = (ms: number, signal: AbortSignal) =>
    new Promise<boolean>((res) => {
      if (signal.aborted) return res(false);
      const x = timers.set(() => {
        signal.removeEventListener('abort', onAbort);
        res(true);
      }, ms);
      const onAbort = () => {
        timers.clear(x);
        res(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  const faults = () => now - start < s.faultsUntil;

  const cfg = {
    ...loadConfig(
      [
        '--release-namespace=rel',
        '--debounce=1s',
        ...(o.progressive
          ? ['--progressive-reloads', '--progressive-gather=1s', '--progressive-settle=2s']
          : ['--progressive-reloads=false']),
      ],
      {},
    ),
    minReloadIntervalMs: s.minIntervalMs,
    reloadDeadlineMs: DEADLINE_MS,
  };
  const { globals } = compileGlobals(cfg);

  // ---- The world ----
  let uids = 0;
  const configs = new Map<string, ConfigModel>();
  for (const c of s.configs) {
    configs.set(c.name, {
      name: c.name,
      ...(c.app ? { app: c.app } : {}),
      uid: uids++,
      exists: true,
      version: 0,
      contentAt: new Map([[0, now - 3_600_000]]),
      writes: [now - 3_600_000],
      createdAt: now - 3_600_000,
      meta: 0,
      bad: new Set(),
    });
  }
  const current = (name: string) => {
    const c = configs.get(name);
    return c?.exists ? c.version : undefined;
  };
  const newPod = (d: DeploymentModel): Pod => ({
    uid: `p${uids++}`,
    createdAt: now,
    waited: new Set(),
    reads: new Map(
      d.uses.map((u) => [u.config, current(u.config) ?? (u.optional ? 'absent' : 'waiting')] as const),
    ),
  });
  /** A pod that read a broken content of one of its configs never becomes Ready (and never crashes). */
  const podReady = (p: Pod) =>
    ![...p.reads].some(([c, v]) => typeof v === 'number' && configs.get(c)?.bad.has(v) === true);
  const podFacts = (d: DeploymentModel): PodHealthFacts[] =>
    d.pods.map((p) => ({
      name: p.uid,
      createdMs: Math.floor(p.createdAt / 1000) * 1000,
      ready: podReady(p),
      restarts: 0,
      terminating: false,
    }));
  /** A config whose current content is broken: its readers may stay unreached (its change halted). */
  const badNow = (name: string) => {
    const c = configs.get(name);
    return c?.exists === true && c.bad.has(c.version);
  };
  const deployments = new Map<string, DeploymentModel>();
  for (const d of s.deployments) {
    const m: DeploymentModel = {
      ...d,
      uid: uids++,
      exists: true,
      createdAt: now - 120_000,
      template: 0,
      pods: [],
    };
    const was = now;
    now -= 60_000;
    m.pods = Array.from({ length: d.replicas }, () => newPod(m));
    now = was;
    deployments.set(d.name, m);
  }
  const apps = new Map<string, AppModel>(
    s.apps.map((name) => [name, { name, running: false, startedMs: 0, ops: 0 }]),
  );

  const rawConfig = (c: ConfigModel) => ({
    metadata: {
      name: c.name,
      namespace: NS,
      uid: `u-${c.name}-${c.uid}`,
      resourceVersion: String(++uids),
      creationTimestamp: isoSeconds(c.createdAt),
      managedFields: [{ time: isoSeconds(c.writes.at(-1) as number) }],
      labels: { rev: String(c.meta), ...(c.app ? { 'app.kubernetes.io/instance': c.app } : {}) },
      annotations: { 'argocd.argoproj.io/sync-wave': String(c.meta) },
    },
    data: { v: String(c.version) },
  });
  const rawDeployment = (d: DeploymentModel) => ({
    metadata: {
      name: d.name,
      namespace: NS,
      uid: `u-${d.name}-${d.uid}`,
      resourceVersion: String(++uids),
      creationTimestamp: isoSeconds(d.createdAt),
      generation: d.template + 1,
      annotations: { 'reloader.stakater.com/auto': 'true' },
    },
    spec: {
      replicas: d.replicas,
      selector: { matchLabels: { app: d.name } },
      template: {
        metadata: { labels: { app: d.name }, annotations: { rev: String(d.template) } },
        spec: {
          containers: [
            {
              name: 'c',
              envFrom: d.uses.map((u) => ({ configMapRef: { name: u.config, optional: u.optional } })),
            },
          ],
        },
      },
    },
    // The model's rollouts are done at once; its pods are Ready unless they read a broken content.
    status: {
      observedGeneration: d.template + 1,
      replicas: d.replicas,
      updatedReplicas: d.replicas,
      readyReplicas: d.pods.filter(podReady).length,
    },
  });
  const appSync = (name: string): AppSync | undefined => {
    const a = apps.get(name);
    if (!a) return undefined;
    const resources = s.configs
      .filter((c) => c.app === name)
      .map((c) => ({ group: '', version: 'v1', kind: 'ConfigMap', namespace: NS, name: c.name }));
    return {
      app: { namespace: ARGO_NS, name },
      requested: false,
      ...(a.op ? { operation: { ...a.op, resources } } : {}),
      sources: [],
      destination: {},
    };
  };

  // ---- Invariants ----
  // Which config version a digest in the ledger stands for (any key; -1: the config was missing).
  const versionOf = new Map<string, number>();
  const noteDigests = (state: ClusterState) => {
    for (const [id, c] of state.configs)
      versionOf.set(`${id}#${c.digest.all}`, current(configName(id)) ?? -1);
    for (const w of state.workloads.values()) {
      for (const [id, dg] of Object.entries(watchedSet(w.rec, w.parsed, state, globals).digests))
        versionOf.set(`${id}=${dg}`, current(configName(id)) ?? -1);
    }
  };
  /** Per config: the halted content (its version) and the workload that failed it, from the halt records. */
  const halts = new Map<
    string,
    { version: number | undefined; workload: string; with: Array<{ config: string; version?: number }> }
  >();
  const onLedgerWrite = (key: string, before: string | undefined, after: string | undefined) => {
    if (isHaltKey(key)) {
      const h = after === undefined ? undefined : decodeHalt(key, after);
      if (!h?.ok) {
        if (before !== undefined && after === undefined) {
          const was = decodeHalt(key, before);
          if (was.ok) halts.delete(configName(was.halt.config));
        }
        return;
      }
      if (before === undefined) stats.halts++;
      halts.set(configName(h.halt.config), {
        version: versionOf.get(`${h.halt.config}#${h.halt.digest}`),
        workload: h.halt.workload,
        with: (h.halt.with ?? []).map((c) => ({
          config: configName(c.config),
          version: versionOf.get(`${c.config}#${c.digest}`),
        })),
      });
      return;
    }
    const was = before === undefined ? undefined : decodeEntry(key, before);
    const is = after === undefined ? undefined : decodeEntry(key, after);
    if (!is?.ok) return;
    const prev = was?.ok ? was.entry.configs : {};
    for (const [c, dg] of Object.entries(is.entry.configs)) {
      const v0 = prev[c] === undefined ? undefined : versionOf.get(`${c}=${prev[c]}`);
      const v1 = versionOf.get(`${c}=${dg}`);
      if (v0 !== undefined && v1 !== undefined && v1 >= 0 && v1 < v0)
        violations.push(`${t()}: the ledger went back for ${is.id}: ${configName(c)} v${v0} → v${v1}`);
    }
  };
  /** A replacement the documented rules allow though the pod already reads the current data. */
  const keyLost = new Set<string>();
  const allowed = (p: Pod, d: DeploymentModel, cutoffMs: number) =>
    d.uses.some((u) => {
      const c = configs.get(u.config) as ConfigModel;
      // Created while the config was missing, it started when the config came back, after the change
      // it reads: its creationTimestamp cannot say so (a limit of the pod-age rule, not a defect).
      if (p.waited.has(u.config)) return true;
      // Missing at a start under a new key, its recorded digest is the old key's: its return counts as
      // a change (so that new data is never lost), and same data restarts its pods once (reported).
      if (keyLost.has(u.config)) return true;
      // The clock margin counts from when the pod's data appeared: its write, or the config's return
      // with it (a config created again is a change the engine observes, and dates, then).
      const appeared = Math.max(
        c.contentAt.get(c.version) ?? 0,
        c.createdAt <= p.createdAt ? c.createdAt : 0,
      );
      const since = p.createdAt - appeared;
      if (since >= 0 && since <= SKEW_MS) return true;
      // A pod no newer (in whole seconds) than a write of its config before the cutoff: writes bound
      // data changes where the engine did not see one (at a start, docs/catch-up.md), and a config
      // deleted and created again is observed again, which moves a held change's cutoff.
      return c.writes.some((w) => w < cutoffMs && Math.floor(p.createdAt / 1000) <= Math.floor(w / 1000));
    });
  const onReplace = (d: DeploymentModel, p: Pod, cutoffMs: number) => {
    const id = `Deployment/${NS}/${d.name}`;
    // A halt survives: a halted content reaches no further workload (issue 34), until a resume (never
    // here), a newer change of its config or the config's deletion ends the halt record.
    for (const u of d.uses) {
      const h = halts.get(u.config);
      const v = current(u.config);
      if (h?.version === undefined || h.version !== v || h.workload === id || p.reads.get(u.config) === v)
        continue;
      violations.push(
        `${t()}: halt did not survive: ${id} replaced ${p.uid} to read ${u.config}=v${v}, halted at ${h.workload}`,
      );
    }
    if (p.createdAt >= cutoffMs)
      violations.push(`${t()}: I3: ${id} replaced ${p.uid}, created after its cutoff`);
    // Already current: it reads the newest data of each config (a deletion alone justifies nothing).
    const needless = d.uses.every((u) => {
      const c = configs.get(u.config) as ConfigModel;
      const read = p.reads.get(u.config);
      return read === c.version || (!c.exists && typeof read !== 'number');
    });
    if (needless && !allowed(p, d, cutoffMs)) {
      violations.push(
        `${t()}: needless: ${id} replaced ${p.uid} (created ${t(p.createdAt)}), which already read ${[
          ...p.reads,
        ]
          .map(([c, v]) => `${c}=v${v}`)
          .join(',')}`,
      );
    }
  };
  const onRunStart = (req: ExecRequest, d: DeploymentModel | undefined) => {
    const a = req.action;
    const id = req.workload.id;
    for (const u of d?.uses ?? []) {
      if (!u.optional && current(u.config) === undefined)
        violations.push(`${t()}: ${id}: a reload started while ${u.config}, which its pods need, is missing`);
    }
    if (s.argo.mode !== 'watched' || a.resumed || a.changed.length === 0) return;
    for (const app of apps.values()) {
      if (!app.running || a.cutoffMs <= effectiveCutoff(app.startedMs)) continue;
      if (a.changed.every((c) => configs.get(configName(c))?.app === app.name)) {
        violations.push(
          `${t()}: ${id}: a reload of ${a.changed.join(',')} (cutoff ${t(a.cutoffMs)}) started during ${app.name}'s sync (since ${t(app.startedMs)})`,
        );
      }
    }
  };

  // ---- The process: its caches, its gate, its ledger client, its current term ----
  // ---- The API server's ConfigMaps of the ledger (the real Ledger client writes them) ----
  interface Shard {
    metadata: {
      name: string;
      namespace: string;
      labels: Record<string, string>;
      annotations: Record<string, string>;
      /** The time of the last write, as the API server keeps it (Ledger#writtenAtMs reads it). */
      managedFields?: Array<{ time: string }>;
    };
    data: Record<string, string>;
  }
  const shards = new Map<string, Shard>();
  let seeding = true;
  /** A fault of one ledger request: a status (not applied), or a timeout that may have applied it. */
  const apiFault = (): number | 'timeout' | undefined => {
    if (seeding || !faults() || r() >= s.pLedger) return undefined;
    stats.ledgerFaults++;
    return ([409, 429, 500, 'timeout'] as const)[Math.floor(r() * 4)];
  };
  const fail = (code: number, what: string) => Object.assign(new Error(`${what}: HTTP ${code}`), { code });
  const shardCopy = (x: Shard) => structuredClone(x);
  const writeShard = (x: Shard, data: Record<string, string | null>) => {
    x.metadata.managedFields = [{ time: isoSeconds(now) }];
    for (const [k, v] of Object.entries(data)) {
      onLedgerWrite(k, x.data[k], v ?? undefined);
      if (v === null) delete x.data[k];
      else x.data[k] = v;
    }
  };
  /** Runs one request: refused (a status), applied, or applied and then timed out. */
  const request = async <T>(opts: { signal?: AbortSignal } | undefined, fn: () => T): Promise<T> => {
    await Promise.resolve();
    opts?.signal?.throwIfAborted();
    const f = apiFault();
    if (typeof f === 'number') throw fail(f, 'modelled API error');
    const out = fn();
    if (f === 'timeout') throw new Error('the request timed out');
    return out;
  };
  let keyIndex = 0;
  interface Process {
    key: Buffer;
    state: ClusterState;
    gate: SyncGate | undefined;
    ledger: Ledger;
    reconciler: Reconciler | undefined;
  }
  let proc: Process | undefined;
  const depOf = (id: string) => deployments.get(configName(id));
  const core = {
    async listNamespacedPod({ labelSelector }: { labelSelector: string }) {
      await Promise.resolve();
      if (faults() && r() < s.pLedger) throw new Error('listing pods failed: HTTP 500');
      const d = deployments.get(labelSelector.split('=')[1] as string);
      return {
        items: (d?.exists ? d.pods : []).map((p) => ({
          metadata: { creationTimestamp: isoSeconds(p.createdAt) },
        })),
      };
    },
    listNamespacedConfigMap: () =>
      request(undefined, () => ({ items: [...shards.values()].map(shardCopy), metadata: {} })),
    readNamespacedConfigMap: ({ name }: { name: string }, o?: { signal?: AbortSignal }) =>
      request(o, () => {
        const x = shards.get(name);
        if (!x) throw fail(404, `configmaps "${name}" not found`);
        return shardCopy(x);
      }),
    createNamespacedConfigMap: ({ body }: { body: Shard }, o?: { signal?: AbortSignal }) =>
      request(o, () => {
        if (shards.has(body.metadata.name))
          throw fail(409, `configmaps "${body.metadata.name}" already exists`);
        const x: Shard = { metadata: { ...structuredClone(body.metadata), namespace: 'rel' }, data: {} };
        writeShard(x, body.data);
        shards.set(x.metadata.name, x);
        return shardCopy(x);
      }),
    patchNamespacedConfigMap: (
      {
        name,
        body,
      }: {
        name: string;
        body: { metadata?: Partial<Shard['metadata']>; data?: Record<string, string | null> };
      },
      o?: { signal?: AbortSignal },
    ) =>
      request(o, () => {
        const x = shards.get(name);
        if (!x) throw fail(404, `configmaps "${name}" not found`);
        Object.assign(x.metadata.labels, body.metadata?.labels);
        Object.assign(x.metadata.annotations, body.metadata?.annotations);
        writeShard(x, body.data ?? {});
        return shardCopy(x);
      }),
  } as unknown as CoreApi;
  const newLedger = (key: Buffer) =>
    new Ledger({
      core,
      namespace: 'rel',
      log: () => undefined,
      shards: 2,
      keyFingerprint: keyFingerprint(key),
    });

  const aborted = (): ExecResult => ({
    kind: 'failed',
    error: new Error('aborted'),
    errorKind: 'update_workload',
  });
  const strategies: StrategiesPort = {
    notifies: false,
    async run(req: ExecRequest): Promise<ExecResult> {
      const a = req.action;
      stats.runs++;
      const d = depOf(req.workload.id);
      onRunStart(req, d);
      if (faults() && r() < s.pWait)
        return { kind: 'waiting', why: 'modelled wait', retryMs: 1_000 + Math.floor(r() * 10_000) };
      const uid = d?.uid;
      const live = d?.exists ? d.pods : [];
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
        if (!d?.exists || d.uid !== uid) continue;
        const i = d.pods.findIndex((p) => p.uid === u);
        if (i < 0) continue;
        onReplace(d, d.pods[i] as Pod, a.cutoffMs);
        const ready = d.pods.filter(podReady).length;
        d.pods.splice(i, 1, newPod(d));
        // The Deployment controller reports its Ready pods: the watch sees the status change.
        if (d.pods.filter(podReady).length !== ready) putDeployment(d);
        replaced++;
        stats.replaced++;
        req.onProgress();
      }
      return {
        kind: 'done',
        replaced,
        summary: `replaced ${replaced}`,
        ...(replaced === 0 ? { notNeeded: true } : {}),
      };
    },
    async missingNeeded(w) {
      const state = proc?.state;
      return missingNeeded(w.rec.uses, (c) => state?.get(c) !== undefined).map((c) => `${c.kind}/${c.name}`);
    },
    async sweep() {},
    async resumeJobs() {},
    async health(w, sinceMs) {
      const d = depOf(w.id);
      return d?.exists ? unhealthy(podFacts(d), sinceMs) : undefined;
    },
    async pods(w) {
      const d = depOf(w.id);
      return d?.exists ? podFacts(d) : undefined;
    },
    async dropSurgePods() {},
  };
  const events = {
    async emit() {
      // The real recorder logs a failed Event and goes on; nothing waits for one.
      if (faults() && r() < s.pEvent) return;
    },
  };

  /** Starts a term on the process; a start that fails gives up and tries again later, as serve's lead() does. */
  const startTerm = async (p: Process): Promise<void> => {
    const rec = new Reconciler({
      cfg,
      state: p.state,
      ledger: p.ledger,
      events,
      log: silentLogger,
      globals,
      hashKey: p.key,
      strategies,
      inScope: () => true,
      timers,
      ...(p.gate ? { gate: p.gate } : {}),
      catchUp: (w, set, entry, key, opts, ledgerWrittenMs) =>
        catchUp({ core, state: p.state, log: silentLogger }, w, set, entry, key, opts, ledgerWrittenMs),
    });
    p.reconciler = rec;
    try {
      await rec.start();
    } catch {
      if (p.reconciler !== rec) return;
      p.reconciler = undefined;
      await rec.stop();
      timers.set(() => {
        if (proc === p && !p.reconciler) void startTerm(p);
      }, 5_000);
    }
  };
  const stopTerm = async (p: Process) => {
    const rec = p.reconciler;
    p.reconciler = undefined;
    if (!rec) return;
    const stopping = rec.stop();
    await advance(now);
    await stopping;
  };
  const boot = async () => {
    const key = KEYS[keyIndex] as Buffer;
    const state = new ClusterState(cfg.defaultStrategy, false);
    for (const c of configs.values())
      if (c.exists) state.putConfig(configRecord('ConfigMap', rawConfig(c), key) as ConfigRecord);
    for (const d of deployments.values())
      if (d.exists) state.putWorkload(workloadRecord('Deployment', rawDeployment(d)) as WorkloadRecord);
    noteDigests(state);
    const gate =
      apps.size === 0
        ? undefined
        : new SyncGate({
            tracking: {
              method: cfg.argocdTracking,
              labelKey: cfg.argocdTrackingLabel,
              controlNamespace: ARGO_NS,
            },
            onFailedSync: s.argo.onFailedSync,
            watched: () => s.argo.mode === 'watched',
            notificationsEnabled: true,
            usersOf: (ref) =>
              state.affectedBy(ref).map((workload) => ({
                workload,
                debounceMs: state.workloads.get(workload)?.parsed.policy.debounceMs,
              })),
            refresh: async (app) => appSync(app.name),
            log: silentLogger,
            timers,
          });
    // The Application watch lists before the first term starts (serve waits for it).
    if (gate && s.argo.mode === 'watched')
      for (const a of apps.values()) if (a.op) gate.observe(appSync(a.name) as AppSync);
    const p: Process = {
      key,
      state,
      gate,
      ledger: newLedger(key),
      reconciler: undefined,
    };
    proc = p;
    const starting = startTerm(p);
    await advance(now);
    await starting;
  };

  // ---- Routing, as service/routing.ts feeds the leader's reconciler ----
  const putConfig = (c: ConfigModel) => {
    if (!proc) return;
    const rec = configRecord('ConfigMap', rawConfig(c), proc.key) as ConfigRecord;
    const old = proc.state.putConfig(rec);
    noteDigests(proc.state);
    proc.reconciler?.configChanged(old, rec);
  };
  const putDeployment = (d: DeploymentModel) => {
    if (!proc) return;
    const { now: tw, old } = proc.state.putWorkload(
      workloadRecord('Deployment', rawDeployment(d)) as WorkloadRecord,
    );
    noteDigests(proc.state);
    proc.reconciler?.workloadChanged(old, tw);
  };
  const notify = (app: AppModel, how: Delivery) => {
    const n: SyncNotification = {
      app: { namespace: ARGO_NS, name: app.name },
      phase: app.op?.phase as OperationPhase,
      startedAt: app.op?.startedAt as string,
      resources: appSync(app.name)?.operation?.resources ?? [],
    };
    const send = () => void proc?.gate?.notify(n);
    if (how === 'ok' || how === 'dup') send();
    if (how === 'dup') send();
    if (how === 'late') timers.set(send, 1_000 + Math.floor(r() * 60_000));
  };
  const observe = (app: AppModel) => {
    if (s.argo.mode === 'watched') proc?.gate?.observe(appSync(app.name) as AppSync);
  };

  const apply = async (step: Step) => {
    stats.steps[step.kind] = (stats.steps[step.kind] ?? 0) + 1;
    switch (step.kind) {
      case 'update':
      case 'meta':
      case 'delete':
      case 'recreate': {
        const c = configs.get(step.config);
        if (!c || c.exists !== (step.kind !== 'recreate')) return;
        if (step.kind === 'delete') {
          c.exists = false;
          const gone = proc?.state.deleteConfig({ kind: 'ConfigMap', namespace: NS, name: c.name });
          proc?.reconciler?.configChanged(gone, undefined);
          return;
        }
        if (step.kind === 'update' || (step.kind === 'recreate' && !step.same)) {
          c.version++;
          c.contentAt.set(c.version, now);
          if (step.kind === 'update' && step.bad) c.bad.add(c.version);
        }
        if (step.kind === 'meta') c.meta++;
        if (step.kind === 'recreate') {
          c.exists = true;
          c.uid = uids++;
          c.createdAt = now;
          // Pods that waited for it start now, with what it holds.
          for (const d of deployments.values())
            for (const p of d.pods)
              if (p.reads.get(c.name) === 'waiting') {
                p.reads.set(c.name, c.version);
                p.waited.add(c.name);
              }
        }
        c.writes.push(now);
        putConfig(c);
        return;
      }
      case 'template':
      case 'wrecreate': {
        const d = deployments.get(step.workload);
        if (!d || d.exists !== (step.kind === 'template')) return;
        if (step.kind === 'wrecreate') {
          d.exists = true;
          d.uid = uids++;
          d.createdAt = now;
        }
        d.template++;
        // The Deployment controller replaces every pod (one step: the model has no rollout to watch).
        d.pods =
          d.pods.length > 0 || step.kind === 'wrecreate'
            ? Array.from({ length: d.replicas }, () => newPod(d))
            : [];
        putDeployment(d);
        return;
      }
      case 'wdelete': {
        const d = deployments.get(step.workload);
        if (!d?.exists) return;
        d.exists = false;
        d.pods = [];
        const id = `Deployment/${NS}/${d.name}`;
        proc?.state.deleteWorkload(id);
        void proc?.reconciler?.workloadDeleted(id);
        return;
      }
      case 'term':
        if (!proc) return;
        // A leader change: the term's runs stop where they are; the next term starts from the ledger
        // (pending reloads resume with their cutoff and snapshot, I5). The process and its gate stay.
        await stopTerm(proc);
        {
          const starting = startTerm(proc);
          await advance(now);
          await starting;
        }
        return;
      case 'crash':
        if (!proc) return;
        await stopTerm(proc);
        proc.gate?.stop();
        proc = undefined;
        return;
      case 'restart':
        if (proc) return;
        if (step.rekey !== 'none') {
          keyIndex = (keyIndex + 1) % KEYS.length;
          for (const c of configs.values()) if (!c.exists) keyLost.add(c.name);
          // The upgrade from a release that wrote no fingerprint: the shards name no key.
          if (step.rekey === 'unknown')
            for (const x of shards.values()) delete x.metadata.annotations[KEY_ANNOTATION];
        }
        await boot();
        return;
      case 'syncStart': {
        const a = apps.get(step.app);
        if (!a || a.running) return;
        a.running = true;
        a.startedMs = now;
        a.op = { phase: 'Running', startedAt: iso(now) };
        observe(a);
        notify(a, step.deliver);
        return;
      }
      case 'syncEnd': {
        const a = apps.get(step.app);
        if (!a?.running || !a.op) return;
        a.running = false;
        a.ops++;
        a.op = { ...a.op, phase: step.ok ? 'Succeeded' : 'Failed' };
        observe(a);
        notify(a, step.deliver);
        return;
      }
    }
  };

  // A release ran before: the ledger holds what the pods run (a first start baselines, and a change
  // made before any baseline is recorded cannot be told from the state the install found).
  {
    const state = new ClusterState(cfg.defaultStrategy, false);
    for (const c of configs.values())
      state.putConfig(configRecord('ConfigMap', rawConfig(c), KEYS[0] as Buffer) as ConfigRecord);
    for (const d of deployments.values())
      state.putWorkload(workloadRecord('Deployment', rawDeployment(d)) as WorkloadRecord);
    const ledger = newLedger(KEYS[0] as Buffer);
    await ledger.load();
    await ledger.putMany(
      [...state.workloads.values()].map(
        (w) => [w.id, { configs: watchedSet(w.rec, w.parsed, state, globals).digests }] as const,
      ),
    );
    seeding = false;
  }
  await boot();
  for (const step of [...s.steps].sort((x, y) => x.at - y.at)) {
    await advance(start + step.at);
    await apply(step);
    await flush();
  }
  // Quiescence: the process runs, syncs end (under --argocd-on-failed-sync=hold one succeeds), deleted
  // configs come back with their data, the faults end, and every retry and back-off has had its time.
  if (!proc) await apply({ at: 0, kind: 'restart', rekey: 'none' });
  for (const a of apps.values()) {
    if (a.running) await apply({ at: 0, kind: 'syncEnd', app: a.name, ok: true, deliver: 'ok' });
    if (s.argo.onFailedSync === 'hold' && a.ops > 0) {
      await advance(now + 1_000);
      await apply({ at: 0, kind: 'syncStart', app: a.name, deliver: 'ok' });
      await advance(now + 1_000);
      await apply({ at: 0, kind: 'syncEnd', app: a.name, ok: true, deliver: 'ok' });
    }
  }
  for (const c of configs.values())
    if (!c.exists) await apply({ at: 0, kind: 'recreate', config: c.name, same: true });
  await advance(Math.max(now, start + s.faultsUntil) + 30 * 60_000);

  const p = proc as unknown as Process;
  for (const d of deployments.values()) {
    const id = `Deployment/${NS}/${d.name}`;
    const e = p.ledger.get(id);
    if (!d.exists) {
      if (e) violations.push(`${id}: deleted, and the ledger still holds an entry for it`);
      continue;
    }
    // A reader of a broken content may stay unreached (its change halted), and with it what else it
    // reads: a reload would bring it the broken content. So may a reader of a good content halted
    // with a broken one still current (one failed reload carried both: which failed cannot be told).
    // Every other change completes.
    const haltedWithBad = (name: string) => {
      const h = halts.get(name);
      return (
        h !== undefined &&
        h.version === current(name) &&
        h.with.some((w) => w.version !== undefined && w.version === current(w.config) && badNow(w.config))
      );
    };
    const halted = d.uses.some((u) => badNow(u.config) || haltedWithBad(u.config));
    for (const pod of d.pods) {
      for (const u of d.uses) {
        const c = configs.get(u.config) as ConfigModel;
        const read = pod.reads.get(u.config);
        if (read === c.version || halted) continue;
        // Known limit (reported): a pod created while an optional config was missing runs without it;
        // its return with the data the ledger holds is no change, so nothing restarts that pod.
        if (read === 'absent' && (c.contentAt.get(c.version) ?? 0) < pod.createdAt) continue;
        violations.push(
          `lost: ${id} pod ${pod.uid} (created ${t(pod.createdAt)}) reads ${u.config}=v${read}, not v${c.version}`,
        );
      }
    }
    const w = p.state.workloads.get(id);
    const target = w ? watchedSet(w.rec, w.parsed, p.state, globals).digests : {};
    if (halted) continue;
    if (e?.pending) violations.push(`${id}: still pending at quiescence`);
    if (!e || !sameDigests(e.configs, target)) {
      const v = (m: Record<string, string> | undefined) =>
        Object.entries(m ?? {})
          .map(([c, dg]) => `${configName(c)}=v${versionOf.get(`${c}=${dg}`)}`)
          .join(',');
      violations.push(`${id}: the ledger holds ${v(e?.configs)}, the cluster ${v(target)}`);
    }
  }
  if (p.reconciler) await stopTerm(p);
  return violations;
}
