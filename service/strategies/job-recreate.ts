// A Job reload, with Reloader's meaning: a Job's pod template cannot change, so the Job is deleted and
// created again with the same spec, and runs again with the new config. Unlike Reloader, the old Job
// is deleted in the foreground and the new one created only once it and its pods are gone, so the
// two never run at once. The template is copied as it is, without the labels the API server adds
// to it (they name the old Job's uid and are added again for the new one).
import type { V1Job } from '@kubernetes/client-node';
import { KEYS } from '../core/annotations.ts';
import { openLiveView } from '../kube/live-view.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

/** Labels the API server puts on a Job and its pod template, naming that Job (batch/v1 Job defaults). */
const GENERATED_LABELS = [
  'controller-uid',
  'job-name',
  'batch.kubernetes.io/controller-uid',
  'batch.kubernetes.io/job-name',
];

function withoutGenerated(labels: Record<string, string> | undefined): Record<string, string> | undefined {
  if (!labels) return undefined;
  const out = Object.fromEntries(Object.entries(labels).filter(([k]) => !GENERATED_LABELS.includes(k)));
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The Job to create again: the old one's spec and metadata, without what the API server owns. */
export function recreated(old: V1Job, changed: readonly string[], cutoffMs: number): V1Job {
  const spec = structuredClone(old.spec) as NonNullable<V1Job['spec']>;
  if (!spec.manualSelector) {
    // The selector and the template labels are generated from the Job's uid: let them be again.
    delete spec.selector;
    const labels = withoutGenerated(spec.template.metadata?.labels);
    spec.template.metadata = { ...spec.template.metadata, labels };
    if (!labels) delete spec.template.metadata.labels;
  }
  const m = old.metadata ?? {};
  const labels = withoutGenerated(m.labels);
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: m.name,
      namespace: m.namespace,
      ...(labels ? { labels } : {}),
      annotations: {
        ...m.annotations,
        [KEYS.reloadedFor]: changed.join(','),
        [KEYS.reloadCutoff]: new Date(cutoffMs).toISOString(),
      },
      ...(m.ownerReferences?.length ? { ownerReferences: m.ownerReferences } : {}),
    },
    spec,
  };
}

const JOB_GONE_MS = 5 * 60_000;

export async function recreateJob(
  ctx: StrategyContext,
  req: ReloadRequest,
  changed: readonly string[],
): Promise<StrategyResult> {
  const { namespace, name, uid } = req.workload.ref;
  const cutoff = new Date(req.cutoffMs).toISOString();
  const view = openLiveView<V1Job>(ctx.kc, {
    path: `/apis/batch/v1/namespaces/${encodeURIComponent(namespace)}/jobs`,
    fieldSelector: `metadata.name=${name}`,
    transform: (raw: RawObject) => raw as unknown as V1Job,
    signal: ctx.signal,
  });
  try {
    await view.ready;
    const live = view.items.get(name);
    // Recreated by an attempt that crashed before recording it.
    if (live && live.metadata?.annotations?.[KEYS.reloadCutoff] === cutoff && live.metadata.uid !== uid) {
      return { replaced: 0, summary: `Job ${name} was already created again`, uid: live.metadata.uid };
    }
    if (!live || live.metadata?.uid !== uid) {
      throw new Error(
        `Job ${namespace}/${name} was deleted or replaced by someone else; nothing was recreated`,
      );
    }
    const body = recreated(live, changed, req.cutoffMs);
    await ctx.begin();
    if (!live.metadata?.deletionTimestamp) {
      await ctx.batch
        .deleteNamespacedJob({
          name,
          namespace,
          body: { propagationPolicy: 'Foreground', preconditions: { uid } },
        })
        .catch((err: { code?: number }) => {
          if (err.code !== 404) throw err;
        });
    }
    const gone = await view.until((items) => items.get(name)?.metadata?.uid !== uid, JOB_GONE_MS);
    if (!gone) {
      throw new Error(`Job ${namespace}/${name} was not deleted within ${JOB_GONE_MS / 60_000} minutes`);
    }
    const made = await ctx.batch.createNamespacedJob({ namespace, body });
    return {
      replaced: 0,
      summary: `deleted Job ${name} and its pods, and created it again with the same spec`,
      ...(made.metadata?.uid ? { uid: made.metadata.uid } : {}),
    };
  } finally {
    await view.stop();
  }
}
