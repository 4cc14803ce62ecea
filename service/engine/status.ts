// What the engine is doing, for anyone to read (docs/progressive.md, "Status"): reloads running,
// waiting and why, changes halted, and the last reloads done with their cause. Served as JSON on
// --status-address (loopback by default: reached by port-forward) and printed by
// `gitops-reloader status`. Names of workloads and configs only, never config data.

import type { Outcome, ReloadAction } from '../core/reload-action.ts';
import type { Halt } from '../core/waves.ts';
import { display } from './report.ts';

export type WaitReason = 'queue' | 'retry' | 'window' | 'wave' | 'halt' | 'brake';

export interface ReloadStatus {
  leader: boolean;
  brake: boolean;
  running: Array<{ workload: string; configs: string[]; since: string }>;
  waiting: Array<{ workload: string; configs: string[]; why: WaitReason }>;
  halted: Array<{ config: string; wave: number; workload: string; why: string; since: string }>;
  done: Array<{ workload: string; configs: string[]; at: string; outcome: string }>;
}

/** How many finished reloads the status keeps. */
export const DONE_KEPT = 50;

/** The engine's parts, as the status reads them. */
export interface StatusSources {
  brake: boolean;
  queued: Iterable<ReloadAction>;
  retrying: Iterable<string>;
  held: Iterable<ReloadAction>;
  parked: Iterable<{ action: ReloadAction; halted: boolean }>;
  braked: Iterable<string>;
  halts: Iterable<Halt>;
}

/** The running reloads and the last ones finished, kept by the reconciler as they go. */
export class StatusBook {
  readonly #running = new Map<string, { action: ReloadAction; since: number }>();
  readonly #done: ReloadStatus['done'] = [];
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  started(a: ReloadAction): void {
    this.#running.set(a.workload, { action: a, since: this.#now() });
  }

  ended(a: ReloadAction, o: Outcome): void {
    this.#running.delete(a.workload);
    if (o.kind !== 'done' && o.kind !== 'retry') return;
    const outcome = o.kind === 'done' ? 'done' : o.failed ? 'failed, retrying' : 'waiting, retrying';
    this.#done.unshift({
      workload: a.workload,
      configs: a.changed.map(display),
      at: iso(this.#now()),
      outcome,
    });
    if (this.#done.length > DONE_KEPT) this.#done.pop();
  }

  status(s: StatusSources): ReloadStatus {
    const running = [...this.#running.values()].map(({ action, since }) => ({
      workload: action.workload,
      configs: action.changed.map(display),
      since: iso(since),
    }));
    const waiting: ReloadStatus['waiting'] = [];
    const add = (a: ReloadAction, why: WaitReason) =>
      waiting.push({ workload: a.workload, configs: a.changed.map(display), why });
    for (const a of s.queued) add(a, 'queue');
    for (const a of s.held) add(a, 'window');
    for (const p of s.parked) add(p.action, p.halted ? 'halt' : 'wave');
    for (const w of s.retrying) waiting.push({ workload: w, configs: [], why: 'retry' });
    for (const w of s.braked) waiting.push({ workload: w, configs: [], why: 'brake' });
    waiting.sort((x, y) => (x.workload < y.workload ? -1 : x.workload > y.workload ? 1 : 0));
    const halted = [...s.halts].map((h) => ({
      config: h.config,
      wave: h.wave,
      workload: h.workload,
      why: h.why,
      since: iso(h.atMs),
    }));
    return { leader: true, brake: s.brake, running, waiting, halted, done: [...this.#done] };
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
    s.halted.map((h) => `${h.config} at wave ${h.wave}, since ${h.since}: ${h.workload} ${h.why}`),
  );
  section(
    'running',
    s.running.map((r) => `${r.workload} since ${r.since} (${r.configs.join(', ')})`),
  );
  section(
    'waiting',
    s.waiting.map(
      (w) => `${w.workload}: ${w.why}${w.configs.length > 0 ? ` (${w.configs.join(', ')})` : ''}`,
    ),
  );
  section(
    'done',
    s.done.map((d) => `${d.at} ${d.workload}: ${d.outcome} (${d.configs.join(', ')})`),
  );
  return `${lines.join('\n')}\n`;
}
