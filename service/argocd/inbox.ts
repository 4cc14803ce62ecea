// The notification inbox (docs/adr/0013): any replica that receives an Argo CD notification while it
// does not act records it as a ConfigMap in the release namespace; the acting leader reads every
// record (its watch), hands it to its SyncGate, and deletes it. A record outlives the replica that
// wrote it and a leader change, so a notification sent to a standby, to a just-demoted leader, or
// during a failover takes effect exactly once, on whichever replica leads next. Processing is
// idempotent on (app, startedAt, running/ended), so a record seen twice does nothing the second time.
import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { CoreApi } from '../kube/api.ts';
import { parseNotification, type SyncNotification } from './notification.ts';
import { isTerminal } from './sync-tracker.ts';
import { appKeyString } from './tracking.ts';

export const INBOX_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'gitops-reloader',
  'app.kubernetes.io/component': 'notification',
});
export const INBOX_SELECTOR = Object.entries(INBOX_LABELS)
  .map(([k, v]) => `${k}=${v}`)
  .join(',');
const DATA_KEY = 'notification';
/** Records kept at most; beyond it a notification is refused (429) rather than filling etcd. */
export const INBOX_LIMIT = 500;

/** The notification could not be recorded because the inbox is full. */
export class InboxFull extends Error {
  override name = 'InboxFull';
}

/** Is this ConfigMap an inbox record (of any release)? */
export function isInboxRecord(labels: Record<string, string> | undefined): boolean {
  return Object.entries(INBOX_LABELS).every(([k, v]) => labels?.[k] === v);
}

/** The record's name: one per (app, startedAt, running/ended), so a repeated delivery is one record. */
export function recordName(prefix: string, n: SyncNotification): string {
  const key = `${appKeyString(n.app)}@${n.startedAt}#${isTerminal(n.phase) ? 'end' : 'run'}`;
  return `${prefix}-notify-${createHash('sha256').update(key).digest('hex').slice(0, 20)}`;
}

/**
 * What is kept of a notification: the SyncGate reads only the app, the phase, the start time and the
 * ConfigMaps and Secrets among the resources, so the record stays small whatever the app's size.
 */
export function recordBody(n: SyncNotification): string {
  const resources = n.resources.filter(
    (r) => r.group === '' && (r.kind === 'ConfigMap' || r.kind === 'Secret') && r.namespace !== '',
  );
  return JSON.stringify({
    version: 1,
    app: n.app,
    phase: n.phase,
    startedAt: n.startedAt,
    ...(n.finishedAt ? { finishedAt: n.finishedAt } : {}),
    resources,
  });
}

/** Reads a record back, validated as a webhook body is (the record is input like any other). */
export function readRecord(cm: { data?: Record<string, string> | null }): SyncNotification {
  return parseNotification(JSON.parse(cm.data?.[DATA_KEY] ?? 'null'));
}

export interface InboxOptions {
  core: CoreApi;
  namespace: string;
  /** Records are named `<prefix>-notify-<hash>`. */
  prefix: string;
  /** How many records exist now (the watch's count). */
  size(): number;
}

export class NotificationInbox {
  readonly #o: InboxOptions;

  constructor(o: InboxOptions) {
    this.#o = o;
  }

  /** Records a notification for the leader. Resolves false when the same one is already recorded. */
  async record(n: SyncNotification): Promise<boolean> {
    if (this.#o.size() >= INBOX_LIMIT) {
      throw new InboxFull(
        `${INBOX_LIMIT} notifications are waiting for the leader in namespace ${this.#o.namespace}; try again later`,
      );
    }
    const body: V1ConfigMap = {
      metadata: { name: recordName(this.#o.prefix, n), labels: { ...INBOX_LABELS } },
      data: { [DATA_KEY]: recordBody(n) },
    };
    try {
      await this.#o.core.createNamespacedConfigMap({ namespace: this.#o.namespace, body });
      return true;
    } catch (err) {
      if ((err as { code?: number }).code === 409) return false;
      throw err;
    }
  }

  /** Deletes a record the leader has handled (gone already is fine). */
  async done(name: string): Promise<void> {
    try {
      await this.#o.core.deleteNamespacedConfigMap({ name, namespace: this.#o.namespace });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
    }
  }
}
