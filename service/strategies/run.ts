// Picks the code that carries out a reload for a strategy and workload kind.

import type { WorkloadRecord } from '../core/records.ts';
import type { ReloadStrategy } from '../core/types.ts';
import { annotate } from './annotate.ts';
import { runCronJob } from './cronjob-run.ts';
import type { GitCommitter } from './git-commit.ts';
import { recreateJob } from './job-recreate.ts';
import { restartDaemonSet } from './restart-daemonset.ts';
import { restartDeployment } from './restart-deployment.ts';
import { restartRollout } from './restart-rollout.ts';
import { RestartSession } from './restart-session.ts';
import { restartStatefulSet } from './restart-statefulset.ts';
import {
  type ReloadRequest,
  type StrategyContext,
  type StrategyResult,
  StrategyUnsupported,
} from './types.ts';

/** What the git strategy needs besides the common context: the committer, and what changed (for the message). */
export interface GitStrategyContext {
  git?: GitCommitter;
  changed?: readonly string[];
}

export async function runStrategy(
  strategy: ReloadStrategy,
  workload: WorkloadRecord,
  ctx: StrategyContext & Omit<ReloadRequest, 'workload'> & GitStrategyContext,
): Promise<StrategyResult> {
  const req: ReloadRequest = {
    workload,
    cutoffMs: ctx.cutoffMs,
    ...(ctx.targets ? { targets: ctx.targets } : {}),
    ...(ctx.canary ? { canary: true } : {}),
    configHash: ctx.configHash,
    templateChangedSince: ctx.templateChangedSince,
  };
  const kind = workload.ref.kind;
  if (kind === 'Job' && strategy !== 'restart') {
    throw new StrategyUnsupported(
      `a Job's pod template cannot be changed, so the ${strategy} strategy does not apply; the restart strategy recreates the Job`,
    );
  }
  switch (strategy) {
    case 'annotate':
      await ctx.begin();
      return annotate(ctx, req);
    case 'git':
      if (!ctx.git) {
        throw new StrategyUnsupported('the git strategy is not configured here; nothing was changed');
      }
      await ctx.begin();
      return ctx.git.reload(ctx, req, ctx.changed);
    case 'restart':
      // The pod-evicting restarts call begin() themselves, with the pods they will replace.
      if (kind === 'Deployment') return RestartSession.run(ctx, req, restartDeployment);
      if (kind === 'StatefulSet') return RestartSession.run(ctx, req, restartStatefulSet);
      if (kind === 'DaemonSet') return RestartSession.run(ctx, req, restartDaemonSet);
      if (kind === 'Rollout') {
        await ctx.begin();
        return restartRollout(ctx, req);
      }
      // These call begin() themselves, once they know they will create something.
      if (kind === 'CronJob') return runCronJob(ctx, req, ctx.changed ?? []);
      if (kind === 'Job') return recreateJob(ctx, req, ctx.changed ?? []);
      throw new StrategyUnsupported(`the restart strategy does not handle ${kind} yet; nothing was changed`);
    default:
      throw new StrategyUnsupported(`unknown strategy ${String(strategy satisfies never)}`);
  }
}
