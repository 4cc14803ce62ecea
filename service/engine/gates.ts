// The gates a reload passes before it is queued: the emergency brake (engine/brake.ts), then the
// progressive reloads' waves (engine/progressive.ts). One object, so the reconciler asks once. The
// reloads they keep wait in the waiting room (engine/waiting-room.ts), which shows their knowledge.

import type { Outcome, ReloadAction } from '../core/reload-action.ts';
import { Brake } from './brake.ts';
import type { ReconcilerDeps } from './deps.ts';
import { Progressive, type ProgressiveOptions } from './progressive.ts';

export class Gates {
  readonly brake: Brake;
  /** Undefined without --progressive-reloads. */
  readonly progressive: Progressive | undefined;

  constructor(d: ReconcilerDeps, o: ProgressiveOptions) {
    this.brake = new Brake(d, o.room);
    this.progressive = Progressive.of(d, o);
    const p = this.progressive;
    o.room.know({
      brake: d.cfg.brake,
      halted: (a) => p?.halted(a) ?? false,
      halts: () => p?.halts() ?? [],
      excused: () => p?.excused() ?? [],
    });
  }

  /** The reload to queue now, or undefined when a gate keeps it (and queues it later, or never). */
  admit(a: ReloadAction): ReloadAction | undefined {
    if (this.brake.holds(a)) return undefined;
    return this.progressive ? this.progressive.admit(a) : a;
  }

  /** The queue hands the reload over: undefined when a gate now keeps it (progressive.atRun). */
  atRun(a: ReloadAction): ReloadAction | undefined {
    return this.progressive ? this.progressive.atRun(a) : a;
  }

  ended(a: ReloadAction, o: Outcome): void {
    this.progressive?.ended(a, o);
  }

  /** The ledger is loaded at the start of a term: the halts it records hold again. */
  restore(): void {
    this.progressive?.restore();
  }

  stop(): void {
    this.progressive?.stop();
    this.brake.stop();
  }
}
