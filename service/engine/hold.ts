// Records a reload held until its workload's restart window opens: the pending action goes to the
// ledger (so a restarted service holds it too, with the same cutoff), and a ReloadDeferred Event says
// until when. The waiting room keeps it and the timer that submits it again. And records a reload held while
// a config its pods need is missing, which needs no timer (docs/adr/0024). And keeps each workload's
// batch window (pause-period), which the queue waits for.

import { KEYS } from '../core/annotations.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import { heldMessage } from '../core/needed-configs.ts';
import { firstSeenRecord, type Verdict, verdict } from '../core/plan.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import type { ReconcilerDeps } from './deps.ts';
import { display, emitOn, fields } from './report.ts';
import { sameDigests } from './startup.ts';
import type { WaitingRoom } from './waiting-room.ts';

export interface Held {
  action: ReloadAction;
  opensAt: number;
}

/** The held action that replaces `before` (changes while held join it: one reload). */
export function heldAction(a: ReloadAction, before: Held | undefined): ReloadAction {
  return {
    ...a,
    changed: [...new Set([...(before?.action.changed ?? []), ...a.changed])].sort(),
    resumed: true,
  };
}

export async function recordHold(
  d: ReconcilerDeps,
  t: TrackedWorkload,
  held: Held,
  before: Held | undefined,
  windowText: string,
): Promise<void> {
  const { ledger, log } = d;
  const { action, opensAt } = held;
  const entry = ledger.get(t.id);
  const pending = {
    cutoff: new Date(action.cutoffMs).toISOString(),
    target: action.target,
    changed: action.changed,
    startedAt: entry?.pending?.startedAt ?? new Date((d.timers ?? Date).now()).toISOString(),
  };
  if (JSON.stringify(entry?.pending) !== JSON.stringify(pending)) {
    try {
      await ledger.put(t.id, {
        configs: entry?.configs ?? firstSeenRecord(action.target, action.changed),
        pending,
        ...(entry?.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}),
      });
    } catch (err) {
      log.error({ ...fields(t), err: (err as Error).message }, 'could not record the held reload');
    }
  }
  const changed = action.changed.map(display);
  const until = new Date(opensAt).toISOString();
  if (before?.opensAt === opensAt && before.action.changed.join() === action.changed.join()) return;
  log.info(
    { ...fields(t), configs: changed, changeRV: action.changeRV, until, window: windowText },
    'reload held until its window opens',
  );
  await emitOn(d.events)(
    t,
    'ReloadDeferred',
    `${changed.join(', ')} changed; reload held until ${until}, when a window of ${KEYS.restartWindow}="${windowText}" opens`,
  );
}

/** The reloads held until their restart window opens: they wait, with their timers, in the waiting room. */
export class WindowHolds {
  readonly #d: ReconcilerDeps;
  readonly #room: WaitingRoom;
  readonly #submit: (a: ReloadAction) => void;

  constructor(d: ReconcilerDeps, room: WaitingRoom, submit: (a: ReloadAction) => void) {
    this.#d = d;
    this.#room = room;
    this.#submit = submit;
  }

  /** The action held for the workload, which a run now covers. */
  action(workload: string): ReloadAction | undefined {
    return this.#room.windowAction(workload);
  }

  /** Forgets the hold (a run covers it); with `resubmit`, queues it now (its window may have been edited). */
  release(workload: string, resubmit = false): void {
    const h = this.#room.releaseWindow(workload);
    if (h && resubmit) this.#submit(h.action);
  }

  /** Holds the action until its window opens at `until`, recorded in the ledger and reported. */
  async hold(t: TrackedWorkload, a: ReloadAction, until: number, windowText: string): Promise<void> {
    const held = this.#room.windowAction(t.id);
    const action = heldAction(a, held && { action: held, opensAt: until });
    const replaced = this.#room.holdForWindow(action, until, this.#submit);
    const before = replaced && { action: replaced.action, opensAt: replaced.until };
    await recordHold(this.#d, t, { action, opensAt: until }, before, windowText);
  }
}

/**
 * Never evicts into an outage: while a config the pods need (not optional) is missing, a replaced pod
 * could not start, so the reload is held, with a Warning Event naming the config (never its data).
 * No timer: the config's return is a change event, judged against the ledger. A pending entry (the run
 * began, and replaced some pods, before the config went) is kept: when the config returns with the
 * content it was for, the reload resumes with its snapshot (resumeHeld), so the pods it already
 * replaced are not replaced again for the same change (invariant I3).
 */
export async function recordMissing(
  d: ReconcilerDeps,
  action: ReloadAction,
  missing: readonly string[],
): Promise<void> {
  const { log } = d;
  const t = d.state.workloads.get(action.workload);
  if (!t) return;
  const changed = action.changed.map(display);
  d.metrics?.reloadHeld('config-missing');
  log.warn(
    { ...fields(t), configs: changed, changeRV: action.changeRV, missing },
    'reload held: a config the pods need is missing',
  );
  await emitOn(d.events)(t, 'ReloadHeld', heldMessage(changed, missing), 'Warning');
}

/**
 * How a reload planned for `target` resumes the pending one of the ledger, when that is for the same
 * content (held while a config was missing, or for a restart window) and snapshotted its pods: it
 * replaces those pods only, not the ones created since (by itself, before it was held). Its cutoff is
 * the new one: a newer action may have been planned meanwhile (the one that was held), and an older
 * cutoff would be taken for an older change and superseded.
 */
export function resumeHeld(
  entry: LedgerEntry | undefined,
  target: Record<string, string>,
): Pick<ReloadAction, 'resumed' | 'targets'> | undefined {
  const p = entry?.pending;
  if (!p?.targets || !sameDigests(p.target, target)) return undefined;
  return { resumed: true, targets: p.targets };
}

/**
 * A batch's verdict (core/plan.ts), less the changes the Argo CD gate holds: a batch of something else
 * (a metadata edit of another config, a new workload) finds the held configs' digests changed too, and
 * must not roll them out while their sync runs. If every changed config is held, nothing reloads now;
 * if one is not (a real change of an untracked config), the reload carries all of them, as documented.
 */
export function batchVerdict(
  d: Pick<ReconcilerDeps, 'gate' | 'cfg'>,
  workload: string,
  set: Record<string, string>,
  applied: Record<string, string> | undefined,
  created: readonly string[] = [],
): Verdict {
  const v = verdict(set, applied, { reloadOnDelete: d.cfg.reloadOnDelete, created });
  const gate = d.gate;
  if (v.kind !== 'reload' || !gate?.holding || !v.changed.every((c) => gate.holding?.(workload, c))) return v;
  return { kind: 'none', deleted: [] };
}

/**
 * Reloader's pause-period, read as a trailing batch window (issue 37): a workload's first change
 * opens a window of the period, every change made in it joins the one reload that runs when it ends,
 * and a change after that opens the next window. Reloader gets the same by pausing the Deployment
 * (`spec.paused`) with its first change and resuming it after the period; nothing is written here:
 * the queue does not start the action before the window's end (`notBefore`). The window is kept in
 * memory: a change found at start-up opens a new one.
 */
export class BatchWindows {
  /** Per workload: when its open window ends (epoch ms). */
  readonly #ends = new Map<string, number>();
  readonly #d: Pick<ReconcilerDeps, 'state' | 'log'>;
  readonly #now: () => number;

  constructor(d: Pick<ReconcilerDeps, 'state' | 'log'>, now: () => number) {
    this.#d = d;
    this.#now = now;
  }

  /** The action as the queue takes it: not before its window's end, opening one if none is open. */
  apply(a: ReloadAction): ReloadAction {
    const t = this.#d.state.workloads.get(a.workload);
    const windowMs = t?.parsed.policy.batchWindowMs;
    if (t === undefined || windowMs === undefined) {
      this.#ends.delete(a.workload);
      return a;
    }
    const now = this.#now();
    let end = this.#ends.get(a.workload);
    if (end === undefined || end <= now) {
      // A retry or a resumed reload has waited for its window already.
      if (a.resumed) return a;
      end = now + windowMs;
      this.#ends.set(a.workload, end);
      this.#d.log.info(
        {
          workload: a.workload,
          configs: a.changed.map(display),
          changeRV: a.changeRV,
          until: new Date(end).toISOString(),
        },
        'reload waits for its batch window (pause-period)',
      );
    } else {
      this.#d.log.info(
        {
          workload: a.workload,
          configs: a.changed.map(display),
          changeRV: a.changeRV,
          until: new Date(end).toISOString(),
        },
        'change joins the open batch window (pause-period)',
      );
    }
    return { ...a, notBefore: end };
  }

  /** The workload's reload started: its window is over, and the next change opens a new one. */
  started(workload: string): void {
    this.#ends.delete(workload);
  }

  /** When each open window ends, for the status page and tests. */
  openUntil(workload: string): number | undefined {
    return this.#ends.get(workload);
  }
}
