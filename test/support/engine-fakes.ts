// Fakes for driving the Reconciler one step at a time in unit tests: a ledger in memory, an Event
// recorder that keeps what it was told, strategies whose runs the test ends by hand, and a small
// world of ConfigMaps and Deployments fed through the real ClusterState. Time is fakeTimers().

import { loadConfig } from '../../service/config/config.ts';
import type { ReloadAlert } from '../../service/core/alert-message.ts';
import { compileGlobals } from '../../service/core/annotations.ts';
import type { ChangeGate } from '../../service/core/batcher.ts';
import type { KeyState } from '../../service/core/catch-up.ts';
import { encodeHalt, type HaltRecord } from '../../service/core/halt-record.ts';
import type { LedgerEntry } from '../../service/core/ledger-entry.ts';
import { missingNeeded } from '../../service/core/needed-configs.ts';
import type { PodHealthFacts } from '../../service/core/pod-health.ts';
import type { ConfigRecord } from '../../service/core/records.ts';
import type { ConfigRef } from '../../service/core/types.ts';
import type { EventSink, LedgerStore, ReconcilerDeps } from '../../service/engine/deps.ts';
import type {
  ExecRequest,
  ExecResult,
  StrategiesPort,
  SweepView,
} from '../../service/engine/strategies-port.ts';
import { configRecord, workloadRecord } from '../../service/kube/to-record.ts';
import { createLogger } from '../../service/log.ts';
import { Reconciler } from '../../service/reconciler.ts';
import { ClusterState, type TrackedWorkload } from '../../service/state.ts';
import { fakeTimers } from './fake-timers.ts';

export class MemoryLedger implements LedgerStore {
  readonly map = new Map<string, LedgerEntry>();
  /** Every write, in order. */
  readonly writes: Array<[string, LedgerEntry | null]> = [];
  fence(): void {}
  async load() {
    return this.map;
  }
  keyState(): KeyState {
    return 'same';
  }
  /** No write times: every workload seen first is baselined (core/catch-up.ts createdWhileDown). */
  writtenAtMs(): number | undefined {
    return undefined;
  }
  identifyWith(): void {}
  async stampKey() {}
  get(id: string) {
    return this.map.get(id);
  }
  entries() {
    return this.map;
  }
  async put(id: string, e: LedgerEntry) {
    this.map.set(id, structuredClone(e));
    this.writes.push([id, structuredClone(e)]);
  }
  async remove(id: string) {
    this.map.delete(id);
    this.writes.push([id, null]);
  }
  async putMany(es: Iterable<readonly [string, LedgerEntry]>) {
    for (const [id, e] of es) await this.put(id, e);
  }
  async removeMany(ids: Iterable<string>) {
    for (const id of ids) await this.remove(id);
  }
  /** Halt records by config (kept apart from the entries, as the real ledger keeps them). */
  readonly haltRecords = new Map<string, HaltRecord>();
  halts() {
    return [...this.haltRecords.values()];
  }
  async putHalt(h: HaltRecord) {
    encodeHalt(h); // refuses what the real ledger would
    this.haltRecords.set(h.config, structuredClone(h));
  }
  async removeHalt(config: string) {
    this.haltRecords.delete(config);
  }
}

export interface PendingRun {
  req: ExecRequest;
  end(r: ExecResult): void;
}

/** Strategies whose runs wait until the test ends them. */
export class HandStrategies implements StrategiesPort {
  readonly notifies = false;
  readonly runs: PendingRun[] = [];
  /** Sweeps and Job resumes asked for, in order. */
  async run(req: ExecRequest): Promise<ExecResult> {
    await req.begin();
    return new Promise<ExecResult>((end) => this.runs.push({ req, end }));
  }
  /** What each sweep was told: the owners it must spare, and the ledger's ids. */
  readonly sweeps: Array<{ pending: Set<string>; reloaded: string[] }> = [];
  /** How many times a Job resume was asked for outside a sweep. */
  resumes = 0;
  /** Whether a config exists, as the watch cache says (the world's ClusterState). */
  exists: (c: ConfigRef) => boolean = () => true;
  async missingNeeded(t: TrackedWorkload) {
    return missingNeeded(t.rec.uses, this.exists).map((c) => `${c.kind}/${c.name}`);
  }
  async sweep(view: SweepView) {
    this.sweeps.push({ pending: view.pendingOwners(), reloaded: [...view.reloaded()] });
  }
  async resumeJobs() {
    this.resumes++;
  }
  /** Per workload id: why its pods are unhealthy (progressive reloads); absent: healthy. */
  readonly unhealthy = new Map<string, string>();
  /** Per workload id: the pods that health names as failing (default none). */
  readonly unhealthyPods = new Map<string, string[]>();
  async health(t: TrackedWorkload) {
    const why = this.unhealthy.get(t.id);
    if (why === undefined) return undefined;
    return { why, pods: this.unhealthyPods.get(t.id) ?? [], restarted: why.startsWith('restarted') };
  }
  /** Per workload id: its pods, as a running reload's check reads them (default none). */
  readonly podFacts = new Map<string, PodHealthFacts[]>();
  async pods(t: TrackedWorkload) {
    return this.podFacts.get(t.id) ?? [];
  }
  readonly dropped: string[] = [];
  async dropSurgePods(t: TrackedWorkload) {
    this.dropped.push(t.id);
  }
}

const KEY = Buffer.alloc(32, 7);

/** `inScope`: the namespaces the service acts in (default: all). */
export function engineWorld(
  flags: string[] = [],
  o: { inScope?: (ns: string) => boolean; gate?: ChangeGate } = {},
) {
  const time = fakeTimers();
  time.clock.now = Date.parse('2026-01-01T00:00:00Z');
  const cfg = loadConfig(['--release-namespace=rel', '--debounce=1s', ...flags], {});
  const { globals } = compileGlobals(cfg);
  const state = new ClusterState(cfg.defaultStrategy, false);
  const ledger = new MemoryLedger();
  const events: Array<{ reason: string; message: string }> = [];
  const sink: EventSink = {
    async emit(_t, reason, message) {
      events.push({ reason, message });
    },
  };
  const strategies = new HandStrategies();
  strategies.exists = (c) => state.get(c) !== undefined;
  let rv = 100;
  const putConfigMap = (
    ns: string,
    name: string,
    data: Record<string, string>,
    annotations?: Record<string, string>,
  ): ConfigRecord => {
    const meta = { name, namespace: ns, uid: `uid-${name}`, resourceVersion: String(++rv) };
    const rec = configRecord(
      'ConfigMap',
      { metadata: { ...meta, ...(annotations ? { annotations } : {}) }, data },
      KEY,
    ) as ConfigRecord;
    return rec;
  };
  const deployment = (
    ns: string,
    name: string,
    configMap: string | string[],
    annotations: Record<string, string> = {},
  ) =>
    workloadRecord('Deployment', {
      metadata: {
        name,
        namespace: ns,
        uid: `uid-${name}`,
        resourceVersion: String(++rv),
        annotations: { 'reloader.stakater.com/auto': 'true', ...annotations },
      },
      spec: {
        replicas: 1,
        template: {
          spec: {
            containers: [
              { name: 'c', envFrom: [configMap].flat().map((cm) => ({ configMapRef: { name: cm } })) },
            ],
          },
        },
      },
      // Its pods all Ready, no rollout: a progressive reload judges what the change does to it.
      status: {
        observedGeneration: 0,
        replicas: 1,
        updatedReplicas: 1,
        readyReplicas: 1,
        availableReplicas: 1,
      },
    });
  /** Every line the engine logged (debug and up), parsed: what it decided, in order. */
  const logs: Array<{ level: string; msg: string; [k: string]: unknown }> = [];
  const log = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line)) });
  /** What the engine told the chat alerts (service/alerts/sender.ts filters and sends them). */
  const alerts: ReloadAlert[] = [];
  const deps: ReconcilerDeps = {
    cfg,
    state,
    ledger,
    events: sink,
    alerts: { notify: (a) => void alerts.push(a) },
    log,
    globals,
    hashKey: KEY,
    strategies,
    inScope: o.inScope ?? (() => true),
    timers: time.timers,
    ...(o.gate ? { gate: o.gate } : {}),
  };
  const reconciler = new Reconciler(deps);
  /** Changes a ConfigMap, as the watch reports it. */
  const change = (
    ns: string,
    name: string,
    data: Record<string, string>,
    annotations?: Record<string, string>,
  ) => {
    const rec = putConfigMap(ns, name, data, annotations);
    const old = state.putConfig(rec);
    reconciler.configChanged(old, rec);
    return rec;
  };
  /** Deletes a ConfigMap, as the watch reports it. */
  const remove = (ns: string, name: string) => {
    const old = state.deleteConfig({ kind: 'ConfigMap', namespace: ns, name });
    reconciler.configChanged(old, undefined);
  };
  /** Lets pending promise callbacks run (the queue and the reconciler chain a few). */
  const settle = async () => {
    for (let i = 0; i < 20; i++) await Promise.resolve();
  };
  return {
    time,
    cfg,
    globals,
    state,
    ledger,
    events,
    alerts,
    logs,
    strategies,
    reconciler,
    /** What the reconciler was given: a new term's reconciler is made from the same. */
    deps,
    putConfigMap,
    deployment,
    change,
    remove,
    settle,
  };
}
