// What the engine is doing, for anyone to read (docs/progressive-reloads.md, "Status"): reloads running,
// waiting and why, changes halted (and the pods that failed), and the last reloads done with their
// cause (configs, keys, the Argo CD sync). Served as JSON on --status-address (loopback by default:
// reached by port-forward) and printed by `gitops-reloader status`. Names of workloads, configs, keys
// and pods only, never config data or digests.

import type { ConfigDigest } from '../core/config-hash.ts';
import type { ConfigRecord } from '../core/records.ts';
import type { Outcome, ReloadAction } from '../core/reload-action.ts';
import { configId } from '../core/types.ts';
import { changedKeys, KeyMemory } from './changed-keys.ts';
import { display } from './report.ts';
import type { RunWait } from './strategies-port.ts';
import type { RoomTable } from './waiting-room.ts';

export type WaitReason =
  | 'debounce'
  | 'sync-hold'
  | 'queue'
  | 'retry'
  | 'window'
  | 'wave'
  | 'halt'
  | 'brake'
  | RunWait;

export interface WaitingReload {
  workload: string;
  configs: string[];
  why: WaitReason;
  /** Since when, where known (debounce, sync-hold, budget, pdb). */
  since?: string;
  /** sync-hold: the Application (`namespace/name`) whose sync it waits for. */
  app?: string;
}

export interface DoneReload {
  workload: string;
  configs: string[];
  /** Per config (as `configs` names it): the keys whose content changed, where known. */
  keys?: Record<string, string[]>;
  /** The Argo CD sync it followed: Application (`namespace/name`) and the sync's revision. */
  via?: { app: string; revision?: string };
  at: string;
  outcome: string;
}

export interface ReloadStatus {
  leader: boolean;
  brake: boolean;
  running: Array<{ workload: string; configs: string[]; since: string }>;
  waiting: WaitingReload[];
  /** `pods`: the failing workload's pods that were not Ready or restarted; empty after a restart. */
  halted: Array<{
    config: string;
    wave: number;
    workload: string;
    why: string;
    since: string;
    pods: string[];
  }>;
  /**
   * Workloads a change under way does not judge (progressive reloads): their pods were already not
   * Ready, or their own rollout ran, when the change reached them. They reload, hold no wave, and
   * halt nothing.
   */
  excused: Array<{ workload: string; config: string; why: string; since: string }>;
  done: DoneReload[];
}

/** How many finished reloads the status keeps. */
export const DONE_KEPT = 50;

/**
 * The engine's parts, as the status reads them: three sources. The waiting room's one table (every
 * planned reload after the batch and its phase, with the brake's flag and the waves' halts), and the
 * two that hold changes before the batch: the batcher and the sync gates.
 */
export interface StatusSources {
  /** engine/waiting-room.ts. */
  room: RoomTable;
  /** Batches still collecting changes (core/batcher.ts). */
  debouncing: Iterable<{ workload: string; configs: string[]; since: number }>;
  /** Changes the Argo CD or Flux gate holds until a sync ends. */
  syncHeld: Iterable<{ workload: string; config: string; app: string; since: number }>;
}

/** What the book reads of the engine's state. */
export interface StatusBookDeps {
  now(): number;
  /** What the workload's pods ran before this reload, per config (the ledger's record). */
  applied(workload: string): Readonly<Record<string, string>> | undefined;
  /** A config's current digests (the watch cache). */
  current(config: string): ConfigDigest | undefined;
}

interface Running {
  action: ReloadAction;
  since: number;
  /** The ledger's record when it started: what its keys changed from. */
  applied: Readonly<Record<string, string>> | undefined;
  /** Budget waits under way (a restart can wait for several slots at once), and since when. */
  budget: number;
  budgetSince?: number;
  pdbSince?: number;
}

/** Pseudo-configs of batches that judge a workload rather than reload it for a change. */
const NOT_A_CHANGE = 'workload';

/** The running reloads and the last ones finished, kept by the reconciler as they go. */
export class StatusBook {
  readonly #running = new Map<string, Running>();
  readonly #done: DoneReload[] = [];
  readonly #d: StatusBookDeps;
  readonly #keys = new KeyMemory();

  constructor(d: StatusBookDeps) {
    this.#d = d;
  }

  /** A config change the watch showed: its old and new per-key digests tell a reload's keys later. */
  sawConfig(old: ConfigRecord | undefined, now: ConfigRecord | undefined): void {
    const rec = now ?? old;
    if (!rec) return;
    const id = configId(rec.ref);
    this.#keys.saw(id, old?.digest);
    this.#keys.saw(id, now?.digest);
  }

  started(a: ReloadAction): void {
    this.#running.set(a.workload, {
      action: a,
      since: this.#d.now(),
      applied: this.#d.applied(a.workload),
      budget: 0,
    });
  }

  /** A running reload waits for a restart-budget slot or a PodDisruptionBudget, or no longer does. */
  waiting(workload: string, why: RunWait, on: boolean): void {
    const r = this.#running.get(workload);
    if (!r) return;
    const now = this.#d.now();
    if (why === 'pdb') {
      if (!on) delete r.pdbSince;
      else r.pdbSince ??= now;
      return;
    }
    r.budget = Math.max(0, r.budget + (on ? 1 : -1));
    if (r.budget === 0) delete r.budgetSince;
    else r.budgetSince ??= now;
  }

  ended(a: ReloadAction, o: Outcome): void {
    const r = this.#running.get(a.workload);
    this.#running.delete(a.workload);
    if (o.kind !== 'done' && o.kind !== 'retry') return;
    const outcome = o.kind === 'done' ? 'done' : o.failed ? 'failed, retrying' : 'waiting, retrying';
    const keys = this.#keysOf(a, r ? r.applied : this.#d.applied(a.workload));
    this.#done.unshift({
      workload: a.workload,
      configs: a.changed.map(display),
      ...(Object.keys(keys).length > 0 ? { keys } : {}),
      ...(a.via ? { via: { ...a.via } } : {}),
      at: iso(this.#d.now()),
      outcome,
    });
    if (this.#done.length > DONE_KEPT) this.#done.pop();
  }

  /** Per changed config: the key names whose content differs from what the pods ran, where known. */
  #keysOf(a: ReloadAction, applied: Readonly<Record<string, string>> | undefined): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const c of a.changed) {
      if (!(c in a.target)) continue;
      const keysOf = (all: string) => {
        const cur = this.#d.current(c);
        return cur?.all === all ? cur.keys : this.#keys.keysOf(c, all);
      };
      const keys = changedKeys(applied?.[c], a.target[c], keysOf);
      if (keys) out[display(c)] = keys;
    }
    return out;
  }

  status(s: StatusSources): ReloadStatus {
    const running: ReloadStatus['running'] = [];
    const waiting: WaitingReload[] = [];
    const add = (a: ReloadAction, why: WaitReason, since?: number) =>
      waiting.push({
        workload: a.workload,
        configs: a.changed.map(display),
        why,
        ...(since !== undefined ? { since: iso(since) } : {}),
      });
    for (const r of this.#running.values()) {
      if (r.budget > 0) add(r.action, 'budget', r.budgetSince);
      else if (r.pdbSince !== undefined) add(r.action, 'pdb', r.pdbSince);
      else
        running.push({
          workload: r.action.workload,
          configs: r.action.changed.map(display),
          since: iso(r.since),
        });
    }
    for (const b of s.debouncing) {
      const configs = b.configs.filter((c) => c !== NOT_A_CHANGE);
      if (configs.length > 0)
        waiting.push({
          workload: b.workload,
          configs: configs.map(display),
          why: 'debounce',
          since: iso(b.since),
        });
    }
    const synced = new Map<string, WaitingReload & { at: number; ids: Set<string> }>();
    for (const h of s.syncHeld) {
      const key = `${h.workload}\u0000${h.app}`;
      const w = synced.get(key) ?? {
        workload: h.workload,
        configs: [],
        why: 'sync-hold',
        app: h.app,
        at: h.since,
        ids: new Set(),
      };
      w.ids.add(h.config);
      w.at = Math.min(w.at, h.since);
      synced.set(key, w);
    }
    for (const { at, ids, ...w } of synced.values())
      waiting.push({ ...w, configs: [...ids].sort().map(display), since: iso(at) });
    for (const { workload, phase } of s.room.phases) {
      if (phase.kind === 'queued') add(phase.action, 'queue');
      else if (phase.kind === 'retry') waiting.push({ workload, configs: [], why: 'retry' });
      // The brake names no configs: every change joins the one reload it holds, until it is released.
      else if (phase.reason === 'brake') waiting.push({ workload, configs: [], why: 'brake' });
      else add(phase.action, phase.reason);
    }
    waiting.sort((x, y) => (x.workload < y.workload ? -1 : x.workload > y.workload ? 1 : 0));
    const halted = [...s.room.halts].map((h) => ({
      config: h.config,
      wave: h.wave,
      workload: h.workload,
      why: h.why,
      since: iso(h.atMs),
      pods: [...(h.pods ?? [])],
    }));
    const excused = [...s.room.excused]
      .map((e) => ({ workload: e.workload, config: e.config, why: e.why, since: iso(e.atMs) }))
      .sort((x, y) => (x.workload < y.workload ? -1 : x.workload > y.workload ? 1 : 0));
    return { leader: true, brake: s.room.brake, running, waiting, halted, excused, done: [...this.#done] };
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The status as `gitops-reloader status` prints it: one line per reload. */
export function formatStatus(s: ReloadStatus | { leader: false }): string {
  if (!s.leader) return 'this replica is not the leader: ask the one that holds the Lease\n';
  const lines: string[] = [];
  lines.push(`brake: ${s.brake ? 'ON (no reload starts)' : 'off'}`);
  const section = (title: string, rows: string[]) => {
    lines.push(`${title} (${rows.length})`);
    for (const r of rows) lines.push(`  ${r}`);
  };
  section(
    'halted',
    s.halted.map(
      (h) =>
        `${h.config} at wave ${h.wave}, since ${h.since}: ${h.workload} ${h.why}` +
        `; pods: ${h.pods.length > 0 ? h.pods.join(', ') : '(not kept across a restart)'}`,
    ),
  );
  section(
    'running',
    s.running.map((r) => `${r.workload} since ${r.since} (${r.configs.join(', ')})`),
  );
  section(
    'waiting',
    s.waiting.map(
      (w) =>
        `${w.workload}: ${w.why}${w.app ? ` for ${w.app}` : ''}${w.since ? ` since ${w.since}` : ''}` +
        `${w.configs.length > 0 ? ` (${w.configs.join(', ')})` : ''}`,
    ),
  );
  section(
    'excused',
    (s.excused ?? []).map((e) => `${e.workload}: not judged for ${e.config} since ${e.since}: ${e.why}`),
  );
  section(
    'done',
    s.done.map((d) => `${d.at} ${d.workload}: ${d.outcome} (${cause(d)})`),
  );
  return `${lines.join('\n')}\n`;
}

/** A finished reload's cause: each config with the keys that changed, and the Argo CD sync. */
export function cause(d: DoneReload): string {
  const configs = d.configs.map((c) => (d.keys?.[c] ? `${c} [${d.keys[c].join(', ')}]` : c)).join(', ');
  if (!d.via) return configs;
  return `${configs}; after sync of ${d.via.app}${d.via.revision ? ` at ${d.via.revision}` : ''}`;
}
