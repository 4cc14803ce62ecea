// A new term's first look: every known workload is judged against the ledger once the caches are
// synced (invariant I6 in docs/design.md). Pending reloads are resumed, new workloads are baselined
// (unless created while the service was down: then their pods are judged, core/catch-up.ts),
// and a workload whose configs differ from the ledger is reloaded only when some pod a reload would
// replace is older than the configs' newest write (docs/catch-up.md); the same rule decides after an
// HMAC key change, when the digests prove nothing.

import { type CatchUp, decide, type KeyState } from '../core/catch-up.ts';
import { effectiveCutoff } from '../core/cutoff.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import { firstSeenRecord, isTracked, recordable } from '../core/plan.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { TrackedWorkload } from '../state.ts';
import type { ReconcilerDeps } from './deps.ts';
import { fields, versionsOf } from './report.ts';

export interface StartupHooks {
  /** The digests the workload watches now, or undefined when it watches nothing (reports problems). */
  set(t: TrackedWorkload): Record<string, string> | undefined;
  /**
   * What a baseline records: the digests it watched when this start first saw the configs (a write seen
   * during the start is replayed after it as a change, core/configs-before.ts); undefined: set()'s.
   */
  firstSeen?(t: TrackedWorkload): Record<string, string> | undefined;
  reportPolicy(t: TrackedWorkload): void;
  changeRV(ids: string[]): string;
  submit(a: ReloadAction): void;
  /**
   * True when the Argo CD gate holds every one of these changes (a sync runs, or the last one failed
   * under --argocd-on-failed-sync=hold): the gate, not this start, reloads when the hold ends.
   */
  heldByGate?(t: TrackedWorkload, changed: string[], observedAt: number): boolean;
  /** The ledger is loaded, nothing is judged yet (progressive reloads restore their halts from it). */
  loaded?(): void;
}

// Keeps the uids: the catch-up tells new objects of recorded names by them (core/catch-up.ts recreated).
const withoutPending = ({ pending: _pending, ...rest }: LedgerEntry): LedgerEntry => rest;

export async function judgeAtStart(d: ReconcilerDeps, h: StartupHooks): Promise<void> {
  const { state, ledger, log } = d;
  await ledger.load();
  h.loaded?.();
  // Digests made with another HMAC key (or one the ledger does not name) prove no change: the pods'
  // age decides instead (docs/catch-up.md).
  const keyState = ledger.keyState();
  const keyChanged = keyState !== 'same';
  const ledgerWrittenMs = ledger.writtenAtMs();
  const catchUp = d.catchUp ?? digestsOnly(d);
  let rebaselined = 0;
  const writes: Array<[string, LedgerEntry]> = [];
  // Logged once written: a stop right after the log must find the baseline in the ledger.
  const baselined: TrackedWorkload[] = [];
  const now = (d.timers ?? Date).now();
  // Without --reload-on-delete a deleted config is no change, and is not recorded (docs/adr/0024).
  const opts = { reloadOnDelete: d.cfg.reloadOnDelete };
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
    // After a key change the targets always differ: the configs' write times say whether the content
    // changed after the reload in progress began. If not, it goes on as it was; if so, it replaces
    // every pod older than the newest write, not only its snapshot (pods it replaced read old data).
    const since =
      entry?.pending && keyChanged ? writtenSince(d, set, Date.parse(entry.pending.cutoff)) : undefined;
    if (entry?.pending && since !== undefined) {
      // Written again since the reload began, maybe by a sync still running: that sync's end reloads
      // it (docs/adr/0029), as for any change found at start (engine simulation seed 26441).
      if (h.heldByGate?.(t, entry.pending.changed, changedBy(d, entry.pending.changed, now))) {
        const changes = {
          configs: entry.pending.changed,
          resourceVersions: versionsOf(state, entry.pending.changed),
        };
        log.info({ ...fields(t), ...changes }, 'changed, and held until the Argo CD sync ends');
        continue;
      }
      // It carries every config written since it began, not only the ones it was for: its pods will
      // read them, and progressive reloads judge it for each (engine simulation seed 4710 with broken
      // contents: a bad content written while down reached a workload outside its waves).
      const cutoffMs = Date.parse(entry.pending.cutoff);
      const rewritten = Object.keys(set).filter((id) => writtenSecond(d, id) >= cutoffMs);
      h.submit({
        workload: t.id,
        changed: [...new Set([...entry.pending.changed, ...rewritten])].sort(),
        cutoffMs: effectiveCutoff(since),
        target: set,
        changeRV: h.changeRV(Object.keys(set)),
      });
      continue;
    }
    if (entry?.pending && (keyChanged || sameDigests(entry.pending.target, set))) {
      h.submit({
        workload: t.id,
        changed: entry.pending.changed,
        cutoffMs: Date.parse(entry.pending.cutoff),
        target: set,
        changeRV: h.changeRV(Object.keys(set)),
        resumed: true,
        ...(entry.pending.targets ? { targets: entry.pending.targets } : {}),
      });
      continue;
    }
    // What changed while the service was down is judged by the pods' age (docs/catch-up.md). That
    // includes a pending reload whose configs changed again meanwhile: its pods may be newer than the
    // change (a template rollout while down), and its app's sync may be running (docs/adr/0029).
    const base = entry && withoutPending(entry);
    const v = await catchUp(t, set, base, keyState, opts, ledgerWrittenMs);
    if (v.kind === 'current') {
      writes.push([t.id, { ...base, configs: recordable(set, entry?.configs, opts) }]);
      if (keyChanged) rebaselined++;
    } else if (v.kind === 'baseline' || v.kind === 'rebaseline') {
      if (!isTracked({ digests: set, reasons: {}, skipped: {}, problems: [], unreferenced: [] })) continue;
      const configs = v.kind === 'rebaseline' ? v.record : (h.firstSeen?.(t) ?? set);
      writes.push([t.id, { ...base, configs }]);
      if (v.kind === 'baseline') baselined.push(t);
    } else if (v.kind === 'none' && base && entry?.pending) {
      // What the pending reload was for is gone again (reverted, or deleted): nothing left to do.
      writes.push([t.id, base]);
      log.info(
        { ...fields(t), configs: entry.pending.changed },
        'pending reload dropped: the configs hold what the ledger records as applied',
      );
    } else if (v.kind === 'reload') {
      // A workload created while down has no entry: record what its pods read, so that a reload held
      // (a sync running, a config missing) or cut stays due, instead of a later batch baselining it.
      if (!base) writes.push([t.id, { configs: firstSeenRecord(set, v.changed) }]);
      // A hold of the previous term (a sync running, or one that failed) is still a hold: the next
      // successful sync releases it, not this leader change (docs/adr/0029).
      if (h.heldByGate?.(t, v.changed, changedBy(d, v.changed, now))) {
        const changes = { configs: v.changed, resourceVersions: versionsOf(state, v.changed) };
        log.info({ ...fields(t), ...changes }, 'changed, and held until the Argo CD sync ends');
        continue;
      }
      log.info(
        { ...fields(t), configs: v.changed, resourceVersions: versionsOf(state, v.changed) },
        'changed while the service was down',
      );
      h.submit({
        workload: t.id,
        changed: v.changed,
        cutoffMs: effectiveCutoff(changedBy(d, v.changed, now)),
        target: set,
        changeRV: h.changeRV(v.changed),
      });
    }
  }
  if (writes.length > 0) await ledger.putMany(writes);
  for (const t of baselined) log.info(fields(t), 'baseline recorded');
  // Hub mode: shards from before the cluster id label get it, so later starts list only this cluster's.
  await ledger.labelOwn?.();
  if (keyChanged) {
    await ledger.stampKey();
    if (keyState === 'other') d.metrics?.keyChanged(rebaselined);
    log[keyState === 'other' ? 'warn' : 'info'](
      { workloads: rebaselined },
      keyState === 'other'
        ? 'the HMAC key differs from the one the ledger was written with: workloads whose pods are newer than their configs re-baselined, not reloaded'
        : 'the ledger does not name the HMAC key it was written with: workloads whose pods are newer than their configs re-baselined, not reloaded',
    );
  }
}

/**
 * When the changes found at start were made at the latest: the newest write of the changed configs (an
 * upper bound of their data change, docs/catch-up.md), or now when one cannot be told (a reload request,
 * a config without write times). A pod created after it already reads the data: the reload's cutoff
 * leaves it alone, as a live change's cutoff spares pods a template rollout created after it.
 */
function changedBy(d: Pick<ReconcilerDeps, 'state'>, changed: readonly string[], now: number): number {
  let newest = Number.NEGATIVE_INFINITY;
  for (const id of changed) {
    const written = d.state.configs.get(id)?.writtenAtMs;
    if (written === undefined) return now;
    newest = Math.max(newest, written);
  }
  return Math.min(newest, now);
}

/** The second of a config's newest write (-Infinity when unknown). */
function writtenSecond(d: Pick<ReconcilerDeps, 'state'>, id: string): number {
  return Math.floor((d.state.configs.get(id)?.writtenAtMs ?? Number.NEGATIVE_INFINITY) / 1000) * 1000;
}

/** The newest write of the set's configs when it is after `cutoffMs` (whole seconds), else undefined. */
function writtenSince(d: Pick<ReconcilerDeps, 'state'>, set: Record<string, string>, cutoffMs: number) {
  const newest = Math.max(
    ...Object.keys(set).map((id) => d.state.configs.get(id)?.writtenAtMs ?? Number.NEGATIVE_INFINITY),
  );
  return Math.floor(newest / 1000) * 1000 >= cutoffMs ? newest : undefined;
}

/** The start-up rule with no pods to judge by: the digests decide, and only under our own key. */
function digestsOnly(d: ReconcilerDeps): NonNullable<ReconcilerDeps['catchUp']> {
  return async (t, set, entry, key: KeyState, opts): Promise<CatchUp> =>
    decide({
      opts,
      kind: t.rec.ref.kind,
      uid: t.rec.ref.uid,
      set,
      entry,
      key,
      config: (id) => {
        const rec = d.state.configs.get(id);
        return rec && { uid: rec.uid, writtenAtMs: rec.writtenAtMs };
      },
      podsCreatedMs: undefined,
    });
}

function sorted(m: Record<string, string>): Array<[string, string]> {
  return Object.entries(m).sort(([a], [b]) => (a < b ? -1 : 1));
}

/** Same configs with the same digests, whatever the key order. */
export function sameDigests(a: Record<string, string>, b: Record<string, string>): boolean {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

/** Offers a change found at start to the gate; true when it holds every one (docs/adr/0029). */
export function heldAtStart(
  d: Pick<ReconcilerDeps, 'gate' | 'state'>,
  t: TrackedWorkload,
  changed: string[],
  observedAt: number,
): boolean {
  const gate = d.gate;
  if (!gate?.holdAtStart || changed.length === 0) return false;
  let all = true;
  for (const config of changed) {
    const rec = d.state.configs.get(config);
    const change = { workload: t.id, config, observedAt, debounceMs: t.parsed.policy.debounceMs };
    // Each is offered (a held one is released with the sync); one not held means a reload now,
    // which carries the held ones too, as a change of an untracked config does at any time.
    if (!rec || !gate.holdAtStart(change, rec)) all = false;
  }
  return all;
}
