// A Job reload, with Reloader's meaning: a Job's pod template cannot change, so the Job is deleted and
// created again with the same spec, and runs again with the new config. Unlike Reloader, the old Job
// is deleted in the foreground and the new one created only once it and its pods are gone, so the
// two never run at once. The template is copied as it is, without the labels the API server adds
// to it (they name the old Job's uid and are added again for the new one).
// Between the delete and the create the new Job exists only as a record in the service's namespace
// (core/job-spec-record.ts, docs/adr/0025), written before the delete: an attempt cut by a crash, a
// lost Lease or the deadline is finished by the next one, or by resumeJobRecreates, exactly once.
import type { V1Job } from '@kubernetes/client-node';
import { KEYS } from '../core/annotations.ts';
import { createDecision, type JobSpecRecord } from '../core/job-spec-record.ts';
import type { BatchApi } from '../kube/api.ts';
import type { JobSpecStore } from '../kube/job-spec-store.ts';
import { openLiveView } from '../kube/live-view.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import {
  type ReloadRequest,
  type StrategyContext,
  type StrategyResult,
  StrategyUnsupported,
} from './types.ts';

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

/** What finishing a recorded recreate found or did. */
export type FinishOutcome =
  /** The old Job still exists (terminating, or not yet deleted). */
  | { kind: 'waiting'; terminating: boolean }
  /** The new Job exists: created now, or by an earlier attempt (`already`). */
  | { kind: 'created'; uid: string | undefined; already: boolean }
  /** A Job of that name that is not ours exists (someone created it meanwhile): nothing created. */
  | { kind: 'taken' }
  /** The new Job may have run and been removed by its TTL already: not created again. */
  | { kind: 'uncertain' };

export interface FinishDeps {
  batch: BatchApi;
  store: JobSpecStore;
  signal: AbortSignal;
  now?: () => number;
}

const madeBy = (job: V1Job | undefined, cutoff: string) =>
  job?.metadata?.annotations?.[KEYS.reloadCutoff] === cutoff;

async function readJob(batch: BatchApi, namespace: string, name: string): Promise<V1Job | undefined> {
  try {
    return await batch.readNamespacedJob({ name, namespace });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

/**
 * Creates the recorded Job once the old one is gone, and removes the record. Safe to run again at any
 * point: the API server keeps one Job per name, so two runs cannot both create it, and a Job of that
 * name carrying the record's cutoff is the one a run already made.
 */
export async function finishRecreate(d: FinishDeps, r: JobSpecRecord): Promise<FinishOutcome> {
  const { batch, store, signal } = d;
  const current = await readJob(batch, r.namespace, r.name);
  if (current) {
    if (current.metadata?.uid === r.oldUid) {
      return { kind: 'waiting', terminating: Boolean(current.metadata?.deletionTimestamp) };
    }
    await store.remove(r, signal);
    return madeBy(current, r.cutoff)
      ? { kind: 'created', uid: current.metadata?.uid, already: true }
      : { kind: 'taken' };
  }
  if (createDecision(r, (d.now ?? Date.now)()) === 'uncertain') {
    await store.remove(r, signal);
    return { kind: 'uncertain' };
  }
  if (r.phase !== 'creating') await store.markCreating(r, signal);
  signal.throwIfAborted();
  let made: V1Job;
  try {
    made = await batch.createNamespacedJob({ namespace: r.namespace, body: r.job as V1Job });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
    // Created meanwhile: by an attempt of ours (our cutoff), or by someone else.
    const now = await readJob(batch, r.namespace, r.name);
    if (now?.metadata?.uid === r.oldUid) return { kind: 'waiting', terminating: true };
    await store.remove(r, signal);
    return madeBy(now, r.cutoff)
      ? { kind: 'created', uid: now?.metadata?.uid, already: true }
      : { kind: 'taken' };
  }
  await store.remove(r, signal);
  return { kind: 'created', uid: made.metadata?.uid, already: false };
}

export async function recreateJob(
  ctx: StrategyContext,
  req: ReloadRequest,
  changed: readonly string[],
): Promise<StrategyResult> {
  const { namespace, name, uid } = req.workload.ref;
  const store = ctx.jobSpecs;
  if (!store) throw new StrategyUnsupported('no store for Job reload records; nothing was changed');
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
    const saved = await store.get(namespace, name);
    // Recreated by an attempt of this reload that was cut before recording it.
    if (live && madeBy(live, cutoff) && live.metadata?.uid !== saved?.oldUid) {
      if (saved) await store.remove(saved, ctx.signal);
      return { replaced: 0, summary: `Job ${name} was already created again`, uid: live.metadata?.uid };
    }
    let record: JobSpecRecord;
    if (saved && (saved.oldUid === uid || live?.metadata?.uid !== uid)) {
      // An earlier attempt recorded the Job before deleting it: that spec is the one to create.
      record = saved;
    } else if (live && live.metadata?.uid === uid) {
      record = {
        namespace,
        name,
        oldUid: uid,
        cutoff,
        phase: 'deleting',
        job: jobBody(live, changed, req.cutoffMs),
      };
      try {
        await store.save(record, ctx.signal);
      } catch (err) {
        if (err instanceof RangeError) {
          throw new StrategyUnsupported(
            `${err.message}, so it was not deleted (it could not be created again safely)`,
          );
        }
        throw err;
      }
    } else {
      throw new Error(
        `Job ${namespace}/${name} was deleted or replaced by someone else; nothing was recreated`,
      );
    }
    await ctx.begin();
    const current = view.items.get(name);
    if (current?.metadata?.uid === record.oldUid && !current.metadata?.deletionTimestamp) {
      ctx.signal.throwIfAborted();
      await ctx.batch
        .deleteNamespacedJob({
          name,
          namespace,
          body: { propagationPolicy: 'Foreground', preconditions: { uid: record.oldUid } },
        })
        .catch((err: { code?: number }) => {
          if (err.code !== 404) throw err;
        });
    }
    const gone = await view.until((items) => items.get(name)?.metadata?.uid !== record.oldUid, JOB_GONE_MS);
    if (!gone) {
      throw new Error(
        `Job ${namespace}/${name} was not deleted within ${JOB_GONE_MS / 60_000} minutes; its spec is kept, and it is created once the old Job is gone`,
      );
    }
    const out = await finishRecreate({ batch: ctx.batch, store, signal: ctx.signal }, record);
    return resultOf(out, name);
  } finally {
    await view.stop();
  }
}

function jobBody(live: V1Job, changed: readonly string[], cutoffMs: number): Record<string, unknown> {
  return recreated(live, changed, cutoffMs) as unknown as Record<string, unknown>;
}

function resultOf(out: FinishOutcome, name: string): StrategyResult {
  switch (out.kind) {
    case 'created':
      return {
        replaced: 0,
        summary: out.already
          ? `Job ${name} was already created again`
          : `deleted Job ${name} and its pods, and created it again with the same spec`,
        ...(out.uid ? { uid: out.uid } : {}),
      };
    case 'taken':
      return {
        replaced: 0,
        summary: `deleted Job ${name} and its pods; a Job of that name was created by someone else meanwhile, so none was created again`,
      };
    case 'uncertain':
      throw new Error(
        `Job ${name} was deleted, and the new one may already have run and been removed by its ttlSecondsAfterFinished; it was not created again`,
      );
    case 'waiting':
      throw new Error(`Job ${name} still exists; it is created again once it is gone`);
  }
}
