// The emergency brake (docs/progressive-reloads.md, "The brake"): with --brake, no reload starts, in any
// namespace. It is a flag, so it is durable and in git like the rest of the install: setting it (a
// rollout of the service) interrupts the reloads that run, whose pending entries stay in the ledger
// with their pod snapshots; the braked service holds them and every change it sees. Nothing is
// recorded as applied, so releasing the brake (another rollout) finds every held change at start-up
// (invariant I6) and resumes every interrupted reload from its snapshot (I3, I5).

import { REQUEST } from '../core/plan.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import type { ReconcilerDeps } from './deps.ts';
import { emitOn, fields } from './report.ts';
import type { Admission, WaitingRoom } from './waiting-room.ts';

/** The brake's admission check: `run`, or `wait` (for as long as the flag is set: no `until`). */
export function brakeCheck(
  cfg: Pick<ReconcilerDeps['cfg'], 'brake' | 'brakeAllowsRequests'>,
  a: Pick<ReloadAction, 'changed'>,
): Admission & { kind: 'run' | 'wait' } {
  if (!cfg.brake) return { kind: 'run' };
  // The Argo CD "reload (drift-free)" action: a person asked for this one reload.
  if (cfg.brakeAllowsRequests && a.changed.every((c) => c === REQUEST)) return { kind: 'run' };
  return { kind: 'wait', reason: 'brake' };
}

export class Brake {
  readonly #d: ReconcilerDeps;
  /** Keeps the reloads the brake holds (each told once). */
  readonly #room: WaitingRoom;
  readonly #detach: (() => void) | undefined;

  constructor(d: ReconcilerDeps, room: WaitingRoom) {
    this.#d = d;
    this.#room = room;
    this.#detach = d.cfg.brake ? d.metrics?.brakeFrom(() => room.count('brake')) : undefined;
  }

  /** True when the brake holds this reload: it waits in the room, and is not queued. */
  holds(a: ReloadAction): boolean {
    const { cfg, state, log, events } = this.#d;
    if (brakeCheck(cfg, a).kind === 'run') return false;
    if (this.#room.wait(a, 'brake')) {
      log.debug(
        { workload: a.workload, configs: a.changed, changeRV: a.changeRV },
        'a later change joins the reload held by the brake (--brake)',
      );
      return true;
    }
    const t = state.workloads.get(a.workload);
    if (!t) {
      // Not in the cache (yet): held all the same, and said, so the decision is never silent.
      const [kind, namespace, ...name] = a.workload.split('/');
      log.warn(
        { workload: `${kind}/${name.join('/')}`, namespace, configs: a.changed, changeRV: a.changeRV },
        'reload held by the brake (--brake)',
      );
      return true;
    }
    log.warn(
      { ...fields(t), configs: a.changed, changeRV: a.changeRV },
      'reload held by the brake (--brake)',
    );
    void emitOn(events)(
      t,
      'ReloadHeld',
      'held by the emergency brake (--brake): no reload starts until it is released; the change is kept and reloaded then',
      'Warning',
    );
    return true;
  }

  stop(): void {
    this.#detach?.();
  }
}
