// The notification inbox (docs/adr/0013): any replica that receives an Argo CD notification while it
// does not act records it as a ConfigMap in the release namespace; the acting leader reads every
// record (its watch), hands it to its SyncGate, and deletes it. A record outlives the replica that
// wrote it and a leader change, so a notification sent to a standby, to a just-demoted leader, or
// during a failover takes effect exactly once, on whichever replica leads next. Processing is
// idempotent on (app, startedAt, running/ended), so a record seen twice does nothing the second time.
import { createHash } from 'node:crypto';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { CoreApi } from '../kube/api.ts';
import type { Logger } from '../log.ts';
import { UNWATCHED_MAX_HOLD_MS } from './gate.ts';
import { parseNotification, type SyncNotification } from './notification.ts';
import { isTerminal } from './sync-tracker.ts';
import { appKeyString } from './tracking.ts';

/** The labels every release's inbox records carry; `isInboxRecord` tells them from other ConfigMaps. */
export const INBOX_LABELS: Readonly<Record<string, string>> = Object.freeze({
  'app.kubernetes.io/name': 'gitops-reloader',
  'app.kubernetes.io/component': 'notification',
});
/** The label naming the release a record belongs to: two releases may share a namespace. */
export const INBOX_RELEASE_LABEL = 'app.kubernetes.io/instance';

/** The labels of one release's records. */
export function inboxLabels(release: string): Record<string, string> {
  return { ...INBOX_LABELS, [INBOX_RELEASE_LABEL]: release };
}

/** The label selector of one release's records (its watch, its count against INBOX_LIMIT). */
export function inboxSelector(release: string): string {
  return Object.entries(inboxLabels(release))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
const DATA_KEY = 'notification';
/** Records kept at most; beyond it a notification is refused (429) rather than filling etcd. */
export const INBOX_LIMIT = 500;

/** The notification could not be recorded because the inbox is full. */
export class InboxFull extends Error {
  override name = 'InboxFull';
}

/**
 * How old a record may get, by default, before the leader deletes it whatever it says
 * (--notification-record-max-age): the SyncGate stops holding an app's changes after this long without
 * an end (gate.ts), so a running record older than that holds nothing, and an end record that old was
 * acted on long ago. The leader expires records continuously (expiryIntervalMs), not only when it
 * starts, so records whose sync never ends (a lost end notification) cannot pile up to INBOX_LIMIT
 * and turn every notification into a 429.
 */
export const INBOX_MAX_AGE_MS = UNWATCHED_MAX_HOLD_MS;

/** How often the acting leader looks for expired records: often enough to keep within the age by a tenth. */
export function expiryIntervalMs(maxAgeMs: number): number {
  return Math.max(1000, Math.min(30_000, Math.floor(maxAgeMs / 10)));
}

/** The records (name and creation time, ms) older than `maxAgeMs` at `now`, oldest first. */
export function expiredRecords(
  recs: Iterable<{ name: string; created: number }>,
  now: number,
  maxAgeMs: number,
): string[] {
  return [...recs]
    .filter((r) => now - r.created > maxAgeMs)
    .sort((a, b) => a.created - b.created)
    .map((r) => r.name);
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
  /** The release: records are named `<prefix>-notify-<hash>` and labelled with it. */
  prefix: string;
  /** How many records exist now (the watch's count). */
  size(): number;
  /** Records older than this are deleted by expire(); default INBOX_MAX_AGE_MS. */
  maxAgeMs?: number;
}

export class NotificationInbox {
  readonly #o: InboxOptions;

  constructor(o: InboxOptions) {
    this.#o = o;
  }

  get maxAgeMs(): number {
    return this.#o.maxAgeMs ?? INBOX_MAX_AGE_MS;
  }

  /** Records a notification for the leader. Resolves false when the same one is already recorded. */
  async record(n: SyncNotification): Promise<boolean> {
    if (this.#o.size() >= INBOX_LIMIT) {
      throw new InboxFull(
        `${INBOX_LIMIT} notifications are waiting for the leader in namespace ${this.#o.namespace}; try again later`,
      );
    }
    const body: V1ConfigMap = {
      metadata: { name: recordName(this.#o.prefix, n), labels: inboxLabels(this.#o.prefix) },
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

  /**
   * Deletes the records older than maxAgeMs (the acting leader calls it every expiryIntervalMs) and
   * returns their names. A failed delete is retried next time.
   */
  async expire(recs: Iterable<{ name: string; created: number }>, now: number): Promise<string[]> {
    const gone: string[] = [];
    for (const name of expiredRecords(recs, now, this.maxAgeMs)) {
      await this.done(name);
      gone.push(name);
    }
    return gone;
  }

  /**
   * Every expiryIntervalMs, while `acting()`, deletes the expired ones among `records()` (the inbox
   * watch's), so records whose sync never ends cannot fill the inbox. Returns the stop function.
   */
  expireWhile(
    acting: () => boolean,
    records: () => Iterable<{ name: string; created: number }>,
    log: Pick<Logger, 'info' | 'warn'>,
  ): () => void {
    const timer = setInterval(() => {
      if (!acting()) return;
      this.expire(records(), Date.now()).then(
        (gone) => {
          if (gone.length > 0) log.info({ records: gone }, 'expired notification records deleted');
        },
        (err: Error) =>
          log.warn({ err: err.message }, 'could not expire notification records; retried later'),
      );
    }, expiryIntervalMs(this.maxAgeMs));
    timer.unref();
    return () => clearInterval(timer);
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
