// The annotate strategy (opt-in, for clusters not run from git): writes
// gitops-reloader.io/config-hash into the pod template, so the workload's own controller rolls the
// pods (the patches are JSON merge patches, see kube/api.ts). This changes the template, so in a GitOps cluster it drifts from git; restart does not.
import { KEYS } from '../core/annotations.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

export async function annotate(ctx: StrategyContext, req: ReloadRequest): Promise<StrategyResult> {
  const { kind, namespace, name } = req.workload.ref;
  const annotations = { [KEYS.configHash]: req.configHash };
  const template = { template: { metadata: { annotations } } };
  switch (kind) {
    case 'Deployment':
      await ctx.apps.patchNamespacedDeployment({ name, namespace, body: { spec: template } });
      break;
    case 'StatefulSet':
      await ctx.apps.patchNamespacedStatefulSet({ name, namespace, body: { spec: template } });
      break;
    case 'DaemonSet':
      await ctx.apps.patchNamespacedDaemonSet({ name, namespace, body: { spec: template } });
      break;
    case 'Rollout':
      await ctx.custom.patchNamespacedCustomObject({
        group: 'argoproj.io',
        version: 'v1alpha1',
        namespace,
        plural: 'rollouts',
        name,
        body: { spec: template },
      });
      break;
    case 'CronJob':
      await ctx.batch.patchNamespacedCronJob({
        name,
        namespace,
        body: { spec: { jobTemplate: { spec: template } } },
      });
      break;
  }
  return { replaced: 0, summary: `set ${KEYS.configHash}=${req.configHash} on the pod template` };
}
