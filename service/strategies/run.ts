// Picks the code that carries out a reload for a strategy and workload kind.

import type { WorkloadRecord } from '../core/records.ts';
import type { ReloadStrategy } from '../core/types.ts';
import { annotate } from './annotate.ts';
import { restartDeployment } from './restart-deployment.ts';
import { type StrategyContext, type StrategyResult, StrategyUnsupported } from './types.ts';

export async function runStrategy(
  strategy: ReloadStrategy,
  workload: WorkloadRecord,
  ctx: StrategyContext & { cutoffMs: number; configHash: string },
): Promise<StrategyResult> {
  const req = { workload, cutoffMs: ctx.cutoffMs, configHash: ctx.configHash };
  const kind = workload.ref.kind;
  switch (strategy) {
    case 'annotate':
      return annotate(ctx, req);
    case 'git':
      throw new StrategyUnsupported('the git strategy is not enabled in this release; nothing was changed');
    case 'restart':
      if (kind === 'Deployment') return restartDeployment(ctx, req);
      if (kind === 'CronJob') {
        throw new StrategyUnsupported('a CronJob has nothing to restart: its next Job reads the new config');
      }
      throw new StrategyUnsupported(`the restart strategy does not handle ${kind} yet; nothing was changed`);
    default:
      throw new StrategyUnsupported(`unknown strategy ${String(strategy satisfies never)}`);
  }
}
