// What to do with an action the queue hands over, before anything is written: the pure decision
// half of a reload's run (the execution half is run-reload.ts).

import { isOlder, type Recency, type ReloadAction } from '../core/reload-action.ts';
import { windowState } from '../core/restart-window.ts';
import type { TrackedWorkload } from '../state.ts';

export type Decision =
  /** The workload is gone: forget its ledger entry. */
  | { kind: 'forget' }
  /** Opted out, or its annotations became invalid: drop the reload and its surge pods. */
  | { kind: 'drop' }
  /**
   * A newer change's action was planned or recorded since: this one would run an older target. Or the
   * workload was deleted and created again: the new object is judged on its own (engine simulation
   * seed 13626: a retry for the old one recorded an older target over the new one's baseline).
   */
  | { kind: 'superseded'; by: 'a newer change' | 'a new object of the same name' }
  /** Its restart window is closed: hold it until `until`. */
  | { kind: 'hold'; until: number; windowText: string }
  | { kind: 'run'; action: ReloadAction };

export interface DecideInput {
  workload: TrackedWorkload | undefined;
  /** Whether the workload still watches anything (an untracked one is no longer reloaded). */
  tracked: boolean;
  action: ReloadAction;
  /** The newest action submitted for the workload in this term, and the newest target it recorded. */
  newest?: Recency;
  recorded?: Recency;
  /** The action held for a closed window, which a run now covers. */
  held?: ReloadAction;
  now: number;
}

export function decide(i: DecideInput): Decision {
  const t = i.workload;
  if (!t) return { kind: 'forget' };
  if (t.parsed.problems.length > 0 || !i.tracked) return { kind: 'drop' };
  if (i.action.uid !== undefined && t.rec.ref.uid !== undefined && i.action.uid !== t.rec.ref.uid)
    return { kind: 'superseded', by: 'a new object of the same name' };
  if (isOlder(i.action, i.newest) || isOlder(i.action, i.recorded))
    return { kind: 'superseded', by: 'a newer change' };
  const windows = t.parsed.policy.windows;
  if (windows) {
    const w = windowState(windows, i.now);
    if (!w.open) return { kind: 'hold', until: w.opensAt, windowText: windows.text };
  }
  // A newer action runs now; it covers the held one, whose configs it names too.
  const action = i.held
    ? { ...i.action, changed: [...new Set([...i.held.changed, ...i.action.changed])].sort() }
    : i.action;
  return { kind: 'run', action };
}
