// The cutoff of a reload a batch plans: the pure rule (core/batcher.ts batchCutoffMs) fed with what the
// engine knows beyond the batch: the newest planned reload and the configs' write times.

import { type Batch, batchCutoffMs } from '../core/batcher.ts';
import { effectiveCutoff } from '../core/cutoff.ts';
import type { ReconcilerDeps } from './deps.ts';

export function plannedCutoff(
  d: Pick<ReconcilerDeps, 'state'>,
  b: Batch,
  changed: readonly string[],
  newestCutoffMs: number | undefined,
): number {
  return batchCutoffMs(b, changed, {
    newestCutoffMs,
    writtenAtMs: (id) => d.state.configs.get(id)?.writtenAtMs,
    cutoffOf: effectiveCutoff,
  });
}
