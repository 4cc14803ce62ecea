// Finishes the Job reloads that a crash, a leader change or a reload's deadline cut between deleting
// the old Job and creating the new one (job-recreate.ts, docs/adr/0025), and reports each as an Event
// on the Job. Run by the leader at start, when a Job with a pending reload is deleted, and with the
// surge-pod sweep.
import type { JobSpecRecord } from '../core/job-spec-record.ts';
import type { BatchApi } from '../kube/api.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { JobSpecStore } from '../kube/job-spec-store.ts';
import type { Logger } from '../log.ts';
import { type FinishOutcome, finishRecreate } from './job-recreate.ts';

/** What resumeJobRecreates reports per record it acted on. */
export interface ResumeReport {
  record: JobSpecRecord;
  outcome: FinishOutcome | { kind: 'abandoned' } | { kind: 'failed'; error: string };
}

/**
 * Finishes every recorded recreate no reload is running for (after a crash, a leader change or a
 * reload's deadline): each Job is created once its old one is gone. A record whose old Job still
 * exists, not being deleted, with no reload pending for it, belongs to a reload that no longer runs
 * (dropped, opted out): it is removed, and the Job is left as it is.
 */
export async function resumeJobRecreates(o: {
  batch: BatchApi;
  store: JobSpecStore;
  signal: AbortSignal;
  log: Logger;
  /** True while a reload of this workload id runs here (it finishes its own record). */
  busy(workloadId: string): boolean;
  /** True when the ledger holds a pending reload for this workload id. */
  pending(workloadId: string): boolean;
}): Promise<ResumeReport[]> {
  const reports: ResumeReport[] = [];
  for (const { record } of await o.store.list()) {
    if (o.signal.aborted) break;
    const id = `Job/${record.namespace}/${record.name}`;
    if (o.busy(id)) continue;
    const f = { workload: `Job/${record.name}`, namespace: record.namespace };
    try {
      const outcome = await finishRecreate({ batch: o.batch, store: o.store, signal: o.signal }, record);
      if (outcome.kind === 'waiting') {
        // Not busy again: a reload may have started since, and saved this record just now.
        if (!outcome.terminating && !o.pending(id) && !o.busy(id)) {
          await o.store.remove(record, o.signal);
          o.log.info(f, 'Job reload record removed: its Job was never deleted and no reload is pending');
          reports.push({ record, outcome: { kind: 'abandoned' } });
        }
        continue;
      }
      o.log.info({ ...f, outcome: outcome.kind }, 'Job reload resumed from its record');
      reports.push({ record, outcome });
    } catch (err) {
      // Never the record's content: the Job spec may hold literal env values.
      o.log.warn(
        { ...f, err: (err as Error).message },
        'could not resume a Job reload; the next sweep retries',
      );
      reports.push({ record, outcome: { kind: 'failed', error: (err as Error).message } });
    }
  }
  return reports;
}

export interface JobResumerDeps {
  batch: BatchApi;
  store: JobSpecStore;
  events: Pick<EventRecorder, 'emit'>;
  log: Logger;
}

/** What one run asks the leader's reconciler, with the term it acts for. */
export interface ResumeHooks {
  signal: AbortSignal;
  busy(workloadId: string): boolean;
  pending(workloadId: string): boolean;
}

/**
 * Runs resumeJobRecreates one at a time (a request during a run makes one more run, with the hooks of
 * the latest request: a new term's request is not lost to the ended term's run). Never throws.
 */
export class JobResumer {
  readonly #d: JobResumerDeps;
  #running: Promise<void> | undefined;
  #again = false;
  #hooks: ResumeHooks | undefined;

  constructor(d: JobResumerDeps) {
    this.#d = d;
  }

  run(h: ResumeHooks): Promise<void> {
    this.#hooks = h;
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #loop(): Promise<void> {
    const d = this.#d;
    do {
      this.#again = false;
      const h = this.#hooks as ResumeHooks;
      try {
        for (const report of await resumeJobRecreates({ ...d, ...h })) await this.#report(report);
      } catch (err) {
        d.log.warn(
          { err: (err as Error).message },
          'Job reload records could not be read; the next sweep retries',
        );
      }
    } while (this.#again && !(this.#hooks as ResumeHooks).signal.aborted);
  }

  async #report({ record: r, outcome }: ResumeReport): Promise<void> {
    const target = { apiVersion: 'batch/v1', kind: 'Job', namespace: r.namespace, name: r.name };
    const events = this.#d.events;
    if (outcome.kind === 'created' && !outcome.already) {
      await events.emit(
        { ...target, ...(outcome.uid ? { uid: outcome.uid } : {}) },
        'Reloaded',
        `created Job ${r.name} again with the spec recorded before its old Job was deleted (the reload was interrupted)`,
      );
    } else if (outcome.kind === 'taken') {
      await events.emit(
        target,
        'ReloadSkipped',
        `a Job named ${r.name} was created by someone else after the old one was deleted; none was created again`,
      );
    } else if (outcome.kind === 'uncertain') {
      await events.emit(
        target,
        'ReloadFailed',
        `Job ${r.name} was deleted for a reload, and the new one may already have run and been removed by its ttlSecondsAfterFinished; it was not created again`,
        'Warning',
      );
    }
  }
}
