// One ChangeGate made of several (Argo CD's SyncGate, Flux's FluxGate): a change is held by the first
// gate that takes it, and each gate releases what it took into the same sink.
import type { Change, ChangeGate, ChangeSink, HeldChange } from './batcher.ts';
import type { ConfigRecord } from './records.ts';

export function composeGates(gates: readonly ChangeGate[]): ChangeGate | undefined {
  if (gates.length <= 1) return gates[0];
  return {
    attach: (sink: ChangeSink) => {
      for (const g of gates) g.attach(sink);
    },
    detach: (sink: ChangeSink) => {
      for (const g of gates) g.detach(sink);
    },
    hold: (change: Change, config: ConfigRecord) => gates.some((g) => g.hold(change, config)),
    holdAtStart: (change: Change, config: ConfigRecord) =>
      gates.some((g) => (g.holdAtStart ? g.holdAtStart(change, config) : g.hold(change, config))),
    holding: (workload: string, config: string) => gates.some((g) => g.holding?.(workload, config) ?? false),
    held: function* (): Iterable<HeldChange> {
      for (const g of gates) if (g.held) yield* g.held();
    },
  };
}
