// A CronJob reload, with Reloader's meaning: run the CronJob once now, as `kubectl create job --from`
// does, so the batch work sees the new config without waiting for the schedule. The Job is built from
// the CronJob's jobTemplate untouched, owned by the CronJob, and marked
// `cronjob.kubernetes.io/instantiate: manual`. Unlike Reloader, it honours the CronJob's own rules:
// nothing runs while it is suspended (unless --run-suspended-cronjobs, Reloader's behaviour), Forbid
// waits for the running Job to end, Replace replaces it. The CronJob itself is never written.
import type { V1CronJob, V1Job } from '@kubernetes/client-node';
import { KEYS } from '../core/annotations.ts';
import {
  type ReloadRequest,
  ReloadWaiting,
  type StrategyContext,
  type StrategyResult,
  StrategyUnsupported,
} from './types.ts';

/** How often a Forbid CronJob's running Job is looked at again (a LIST of the namespace's Jobs). */
export const FORBID_RECHECK_MS = 10_000;

/** The Job name a reload with this cutoff creates: the same after a crash, so the Job is made once. */
export function reloadJobName(cronJob: string, cutoffMs: number): string {
  // A CronJob name has at most 52 characters (Job names, 63, get a suffix from the controller).
  return `${cronJob.slice(0, 52)}-r${Math.floor(cutoffMs / 1000).toString(36)}`;
}

export function isFinished(job: V1Job): boolean {
  return (job.status?.conditions ?? []).some(
    (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
  );
}

export async function runCronJob(
  ctx: StrategyContext,
  req: ReloadRequest,
  changed: readonly string[],
): Promise<StrategyResult> {
  const { namespace, name, uid } = req.workload.ref;
  const cj: V1CronJob = await ctx.batch.readNamespacedCronJob({ name, namespace });
  if (cj.metadata?.uid !== uid) throw new Error(`CronJob ${namespace}/${name} was replaced`);
  if (cj.spec?.suspend === true && !ctx.runSuspendedCronJobs) {
    throw new StrategyUnsupported(
      'the CronJob is suspended, so no Job was created; its first Job after it resumes reads the new config',
    );
  }
  const jobName = reloadJobName(name, req.cutoffMs);
  const jobs = (await ctx.batch.listNamespacedJob({ namespace })).items;
  if (jobs.some((j) => j.metadata?.name === jobName)) {
    return { replaced: 0, summary: `Job ${jobName} was already created from the CronJob's jobTemplate` };
  }
  const running = jobs.filter(
    (j) => !isFinished(j) && j.metadata?.ownerReferences?.some((o) => o.controller && o.uid === uid),
  );
  const policy = cj.spec?.concurrencyPolicy ?? 'Allow';
  const names = running.map((j) => j.metadata?.name).join(', ');
  if (policy === 'Forbid' && running.length > 0) {
    throw new ReloadWaiting(
      `Job ${names} of the CronJob is still running and its concurrencyPolicy is Forbid; ` +
        'the new Job is created when it ends',
      FORBID_RECHECK_MS,
    );
  }
  await ctx.begin();
  if (policy === 'Replace') {
    // As the CronJob controller replaces a running Job: delete it, its pods in the background.
    for (const j of running) {
      await ctx.batch
        .deleteNamespacedJob({
          name: j.metadata?.name as string,
          namespace,
          body: { propagationPolicy: 'Background', preconditions: { uid: j.metadata?.uid } },
        })
        .catch((err: { code?: number }) => {
          if (err.code !== 404 && err.code !== 409) throw err;
        });
    }
  }
  const template = cj.spec?.jobTemplate;
  const job: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: jobName,
      namespace,
      ...(template?.metadata?.labels ? { labels: template.metadata.labels } : {}),
      annotations: {
        ...template?.metadata?.annotations,
        'cronjob.kubernetes.io/instantiate': 'manual',
        [KEYS.reloadedFor]: changed.join(','),
        [KEYS.reloadCutoff]: new Date(req.cutoffMs).toISOString(),
      },
      // No blockOwnerDeletion: where OwnerReferencesPermissionEnforcement is on, setting it would need
      // update on cronjobs/finalizers, a write right on CronJobs the service otherwise never needs.
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name, uid, controller: true }],
    },
    spec: template?.spec as V1Job['spec'],
  };
  try {
    await ctx.batch.createNamespacedJob({ namespace, body: job });
  } catch (err) {
    // Created by an attempt that crashed before recording it: this reload's Job exists, once.
    if ((err as { code?: number }).code !== 409) throw err;
  }
  const replaced = policy === 'Replace' && running.length > 0 ? `, replacing running Job ${names}` : '';
  const suspended =
    cj.spec?.suspend === true ? '; the CronJob is suspended, run anyway (--run-suspended-cronjobs)' : '';
  return {
    replaced: 0,
    summary: `created Job ${jobName} from the CronJob's jobTemplate (concurrencyPolicy ${policy}${replaced})${suspended}`,
  };
}
