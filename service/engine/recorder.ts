// Records completed reloads in the ledger without ever going back in time: a reload that completes
// after a newer one was recorded leaves the newer target in place (issue 20, finding 1). Which target
// is newer is known from the actions this reconciler recorded; what a term finds in the ledger at its
// start is older than anything it plans, because every action it plans comes from the state it
// watches from then on.

import { recordable, type VerdictOptions } from '../core/plan.ts';
import { isOlder, type Recency, type ReloadAction } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import type { LedgerStore, ReconcilerDeps } from './deps.ts';
import { fields } from './report.ts';

export class Recorder {
  readonly #ledger: LedgerStore;
  /** Per workload: the recency of the target the ledger's `configs` hold, when this term recorded it. */
  readonly #recorded = new Map<string, Recency>();

  readonly #opts: VerdictOptions;

  constructor(ledger: LedgerStore, opts: VerdictOptions = {}) {
    this.#ledger = ledger;
    this.#opts = opts;
  }

  /** The recency of the target recorded for this workload, if this term recorded one. */
  recorded(workload: string): Recency | undefined {
    return this.#recorded.get(workload);
  }

  /**
   * Records `a`'s target as applied (with `reloadedAt`, or the previous one when absent). Returns
   * false, and records only that `a` is no longer pending, when a newer target is already recorded.
   */
  async done(a: ReloadAction, reloadedAt?: string): Promise<boolean> {
    const entry = this.#ledger.get(a.workload);
    const at = reloadedAt ?? entry?.reloadedAt;
    // A newer action's pending entry (it began, then failed and waits for its retry) stays.
    const newerPending =
      entry?.pending && Date.parse(entry.pending.cutoff) > a.cutoffMs ? { pending: entry.pending } : {};
    if (isOlder(a, this.#recorded.get(a.workload))) {
      if (entry?.pending && !newerPending.pending) {
        await this.#ledger.put(a.workload, { configs: entry.configs, ...(at ? { reloadedAt: at } : {}) });
      }
      return false;
    }
    // Without --reload-on-delete a config deleted before the run keeps the digest last applied
    // (docs/adr/0024): its return with that data is no change.
    await this.#ledger.put(a.workload, {
      configs: recordable(a.target, entry?.configs, this.#opts),
      ...newerPending,
      ...(at ? { reloadedAt: at } : {}),
    });
    this.#recorded.set(a.workload, { cutoffMs: a.cutoffMs, changeRV: a.changeRV });
    return true;
  }

  forget(workload: string): void {
    this.#recorded.delete(workload);
  }
}

/**
 * Forgets the entry of a workload deleted while its reload ran: the run recorded it after the delete
 * event, which left it alone then (a Job run again records its own outcome). Kept, it would outlive the
 * workload, and a new workload of the same name would be judged against it (issue 26). A Job's entry,
 * or one still pending (a retry, or a Job to resume, settles it), stays.
 */
export async function forgetIfGone(d: Pick<ReconcilerDeps, 'state' | 'ledger'>, id: string): Promise<void> {
  const entry = d.ledger.get(id);
  if (!entry || entry.pending || id.startsWith('Job/') || d.state.workloads.has(id)) return;
  await d.ledger.remove(id).catch(() => undefined);
}

/**
 * Forgets the entries of workloads that are gone, at every sweep: a removal that failed when the
 * workload was deleted (the API refused it) is not retried otherwise until the next term. The entries
 * of a running reload, and of a Job with a reload pending (to resume), stay. Never throws.
 */
export async function forgetGone(
  d: Pick<ReconcilerDeps, 'state' | 'ledger' | 'log'>,
  running: ReadonlySet<string>,
): Promise<void> {
  const gone = [...d.ledger.entries()]
    .filter(
      ([id, e]) => !(e.pending && id.startsWith('Job/')) && !running.has(id) && !d.state.workloads.has(id),
    )
    .map(([id]) => id);
  if (gone.length === 0) return;
  await d.ledger
    .removeMany(gone)
    .catch((err: Error) =>
      d.log.warn({ err: err.message, workloads: gone }, 'ledger remove failed; the next sweep retries'),
    );
}

/** A queued reload of a workload that opted out or became invalid: forget it, and its surge pods. */
export async function dropReload(
  d: Pick<ReconcilerDeps, 'ledger' | 'log' | 'strategies'>,
  t: TrackedWorkload,
  signal: AbortSignal,
): Promise<void> {
  const { ledger, log } = d;
  log.info(fields(t), 'reload dropped: the workload is no longer reloaded');
  try {
    const entry = ledger.get(t.id);
    if (entry?.pending) {
      await ledger.put(t.id, {
        configs: entry.configs,
        ...(entry.reloadedAt ? { reloadedAt: entry.reloadedAt } : {}),
      });
    }
    await d.strategies.dropSurgePods(t, signal);
  } catch (err) {
    log.warn(
      { ...fields(t), err: (err as Error).message },
      'could not clean up a dropped reload; the sweep retries',
    );
  }
}
