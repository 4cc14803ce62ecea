// Job reload records (core/job-spec-record.ts) as ConfigMaps in the service's own namespace, one per
// Job being recreated, named <release>-job-<hash of namespace/name>. Never in a tenant namespace: a
// tenant must not be able to edit what the service will create. Only the leader writes them; each
// write is refused once the leadership term that made it has ended.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { decodeRecord, encodeRecord, type JobSpecRecord, recordName } from '../core/job-spec-record.ts';
import type { CoreApi } from './api.ts';
import { CLUSTER_ID_LABEL, ownedSelectors } from './ledger.ts';

export const JOB_RECORD_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'gitops-reloader',
  'app.kubernetes.io/component': 'job-spec',
});

export interface StoredRecord {
  /** The ConfigMap holding it. */
  configMap: string;
  record: JobSpecRecord;
}

export class JobSpecStore {
  readonly namespace: string;
  readonly prefix: string;
  /** Hub mode: the cluster id its records are labelled with, and listed by (ledger.ts CLUSTER_ID_LABEL). */
  readonly owner: string | undefined;
  readonly #labels: Record<string, string>;
  readonly #core: CoreApi;
  readonly #warn: (msg: string, fields: Record<string, unknown>) => void;
  readonly #unlabelledMayExist: () => Promise<boolean>;

  constructor(o: {
    core: CoreApi;
    namespace: string;
    prefix: string;
    owner?: string;
    /** Hub mode: whether records without the cluster label may exist (the hub asks once); default yes. */
    unlabelledMayExist?: () => Promise<boolean>;
    warn: (msg: string, fields: Record<string, unknown>) => void;
  }) {
    this.owner = o.owner;
    this.#unlabelledMayExist = o.unlabelledMayExist ?? (async () => true);
    this.#labels = {
      ...JOB_RECORD_LABELS,
      ...(o.owner === undefined ? {} : { [CLUSTER_ID_LABEL]: o.owner }),
    };
    this.#core = o.core;
    this.namespace = o.namespace;
    this.prefix = o.prefix;
    this.#warn = o.warn;
  }

  nameFor(namespace: string, name: string): string {
    return recordName(this.prefix, namespace, name);
  }

  /** The record for this Job, if one is stored and valid. */
  async get(namespace: string, name: string): Promise<JobSpecRecord | undefined> {
    const configMap = this.nameFor(namespace, name);
    try {
      const cm = await this.#core.readNamespacedConfigMap({ name: configMap, namespace: this.namespace });
      return this.#decode(cm)?.record;
    } catch (err) {
      if ((err as { code?: number }).code === 404) return undefined;
      throw err;
    }
  }

  /**
   * Every valid record of this release. In hub mode, those labelled with its cluster id, and those
   * written before the label existed (unlabelled, told by name): records live only while their Job is
   * recreated, so the unlabelled ones are gone after the first reloads of an upgraded install; they are
   * listed only while the hub has seen some.
   */
  async list(): Promise<StoredRecord[]> {
    const out: StoredRecord[] = [];
    const selectors = ownedSelectors('job-spec', this.owner);
    for (const [i, labelSelector] of selectors.entries()) {
      if (i > 0 && !(await this.#unlabelledMayExist())) continue;
      let cont: string | undefined;
      do {
        const page = await this.#core.listNamespacedConfigMap({
          namespace: this.namespace,
          labelSelector,
          limit: 50,
          _continue: cont,
        });
        for (const cm of page.items) {
          const d = this.#decode(cm);
          if (d) out.push(d);
        }
        cont = page.metadata?._continue || undefined;
      } while (cont);
    }
    return out;
  }

  /** Creates or replaces the record (before the old Job is deleted). */
  async save(r: JobSpecRecord, signal: AbortSignal): Promise<void> {
    const name = this.nameFor(r.namespace, r.name);
    const data = encodeRecord(r);
    signal.throwIfAborted();
    try {
      await this.#core.createNamespacedConfigMap(
        { namespace: this.namespace, body: { metadata: { name, labels: { ...this.#labels } }, data } },
        { signal },
      );
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
      signal.throwIfAborted();
      await this.#core.patchNamespacedConfigMap(
        { name, namespace: this.namespace, body: { metadata: { labels: { ...this.#labels } }, data } },
        { signal },
      );
    }
  }

  /**
   * Marks the record `creating`, right before the new Job is created. Written whole (created again if
   * it went meanwhile), so the create that follows is always recorded first.
   */
  async markCreating(r: JobSpecRecord, signal: AbortSignal): Promise<JobSpecRecord> {
    const next: JobSpecRecord = { ...r, phase: 'creating', creatingAt: new Date().toISOString() };
    await this.save(next, signal);
    return next;
  }

  /** Deletes the record, once the new Job exists (or cannot be made). Absent already: done. */
  async remove(r: Pick<JobSpecRecord, 'namespace' | 'name'>, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    await this.#core
      .deleteNamespacedConfigMap(
        { name: this.nameFor(r.namespace, r.name), namespace: this.namespace },
        { signal },
      )
      .catch((err: { code?: number }) => {
        if (err.code !== 404) throw err;
      });
  }

  #decode(cm: V1ConfigMap): StoredRecord | undefined {
    const name = cm.metadata?.name ?? '';
    // Another release's records in the same namespace are not ours (recordName's form, exactly).
    if (
      !name.startsWith(`${this.prefix}-job-`) ||
      !/^[0-9a-f]{20}$/.test(name.slice(this.prefix.length + 5))
    ) {
      return undefined;
    }
    if (cm.metadata?.labels?.['app.kubernetes.io/name'] !== JOB_RECORD_LABELS['app.kubernetes.io/name']) {
      return undefined;
    }
    const d = decodeRecord(cm.data);
    if (!d.ok) {
      this.#warn('Job reload record skipped', { configMap: name, reason: d.reason });
      return undefined;
    }
    // The name is derived from the Job: a record moved to another name is not trusted.
    if (this.nameFor(d.record.namespace, d.record.name) !== name) {
      this.#warn('Job reload record skipped', { configMap: name, reason: 'its name does not match its Job' });
      return undefined;
    }
    return { configMap: name, record: d.record };
  }
}
