// A new term's first look: every known workload is judged against the ledger once the caches are
// synced (invariant I6 in docs/design.md). Pending reloads are resumed, changes made while no leader
// acted are reloaded, new workloads are baselined, and after an HMAC key change everything is
// re-baselined and nothing reloaded.

import { effectiveCutoff } from '../core/cutoff.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import { isTracked, verdict } from '../core/plan.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import type { ReconcilerDeps } from './deps.ts';
import { fields } from './report.ts';

export interface StartupHooks {
  /** The digests the workload watches now, or undefined when it watches nothing (reports problems). */
  set(t: TrackedWorkload): Record<string, string> | undefined;
  reportPolicy(t: TrackedWorkload): void;
  changeRV(ids: string[]): string;
  submit(a: ReloadAction): void;
}

const withoutPending = (e: LedgerEntry): LedgerEntry => ({
  configs: e.configs,
  ...(e.reloadedAt ? { reloadedAt: e.reloadedAt } : {}),
});

export async function judgeAtStart(d: ReconcilerDeps, h: StartupHooks): Promise<void> {
  const { state, ledger, log } = d;
  await ledger.load();
  // Digests made with another HMAC key cannot be compared with ours: re-baseline, never reload.
  const keyChanged = ledger.keyChanged();
  let rebaselined = 0;
  const writes: Array<[string, LedgerEntry]> = [];
  const now = (d.timers ?? Date).now();
  for (const t of state.workloads.values()) {
    if (!d.inScope(t.rec.ref.namespace)) continue;
    h.reportPolicy(t);
    const entry = ledger.get(t.id);
    if (t.parsed.problems.length > 0) {
      if (entry?.pending) {
        writes.push([t.id, withoutPending(entry)]);
        log.info(fields(t), 'pending reload dropped: the reload annotations are invalid');
      }
      continue;
    }
    const set = h.set(t);
    if (!set) {
      // Opted out (or nothing left to watch) with a reload pending: that reload is dropped, and its
      // surge pods go with the clean-up that follows.
      if (entry?.pending) {
        writes.push([t.id, withoutPending(entry)]);
        log.info(fields(t), 'pending reload dropped: the workload is no longer reloaded');
      }
      continue;
    }
    if (entry?.pending) {
      // After a key change the targets always differ; the reload in progress goes on as it was.
      const same = keyChanged || sameDigests(entry.pending.target, set);
      h.submit({
        workload: t.id,
        changed: entry.pending.changed,
        cutoffMs: same ? Date.parse(entry.pending.cutoff) : effectiveCutoff(now),
        target: set,
        changeRV: h.changeRV(Object.keys(set)),
        resumed: same,
        ...(same && entry.pending.targets ? { targets: entry.pending.targets } : {}),
      });
      continue;
    }
    const v = verdict(set, entry?.configs);
    if (keyChanged && entry && v.kind === 'reload') {
      writes.push([t.id, { ...entry, configs: set }]);
      rebaselined++;
    } else if (v.kind === 'baseline' || v.kind === 'rebaseline') {
      if (!isTracked({ digests: set, reasons: {}, skipped: {}, problems: [] })) continue;
      writes.push([t.id, { ...entry, configs: set }]);
      if (v.kind === 'baseline') log.info(fields(t), 'baseline recorded');
    } else if (v.kind === 'reload') {
      log.info({ ...fields(t), configs: v.changed }, 'changed while the service was down');
      h.submit({
        workload: t.id,
        changed: v.changed,
        cutoffMs: effectiveCutoff(now),
        target: set,
        changeRV: h.changeRV(v.changed),
      });
    }
  }
  if (writes.length > 0) await ledger.putMany(writes);
  if (keyChanged) {
    await ledger.stampKey();
    d.metrics?.keyChanged(rebaselined);
    log.warn(
      { workloads: rebaselined },
      'the HMAC key differs from the one the ledger was written with: every workload re-baselined, none reloaded',
    );
  }
}

function sorted(m: Record<string, string>): Array<[string, string]> {
  return Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1));
}

/** Same configs with the same digests, whatever the key order. */
export function sameDigests(a: Record<string, string>, b: Record<string, string>): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}
