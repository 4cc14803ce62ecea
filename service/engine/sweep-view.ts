// What the periodic sweep (surge pods, cut Job reloads) is told about the reloads a term knows: which
// workloads' surge pods must stay, which workloads this release reloads, and which reload runs now.

import type { ReconcilerDeps } from './deps.ts';
import type { SweepView } from './strategies-port.ts';

export function sweepView(
  d: Pick<ReconcilerDeps, 'state' | 'ledger' | 'inScope'>,
  running: ReadonlySet<string>,
  /**
   * Workloads whose ledger entries this term removed at start because it no longer sees them: a
   * namespace dropped from the watched list is one reason, and its surge pods are still ours.
   */
  formerlyReloaded: readonly string[] = [],
): SweepView {
  const { state, ledger } = d;
  return {
    pendingOwners: () => {
      const pending = new Set<string>();
      // A pending reload out of scope is not resumed (start() skips it): its surge pods are not needed.
      for (const t of state.workloads.values()) {
        if (ledger.get(t.id)?.pending && d.inScope(t.rec.ref.namespace)) pending.add(t.rec.ref.uid);
      }
      // A reload running here may have created a surge pod before its pending write landed.
      for (const id of running) {
        const uid = state.workloads.get(id)?.rec.ref.uid;
        if (uid) pending.add(uid);
      }
      return pending;
    },
    reloaded: () => [...ledger.entries().keys(), ...formerlyReloaded],
    running: (id) => running.has(id),
    pending: (id) => ledger.get(id)?.pending !== undefined,
  };
}
