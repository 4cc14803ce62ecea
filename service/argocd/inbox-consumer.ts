// The acting leader's side of the notification inbox (docs/adr/0013): recorded notifications are
// handed to the sync gate, oldest first, and the records that are done are removed. Every replica
// watches the inbox, so a new leader finds at once what was recorded while another replica led.

import type { Logger } from '../log.ts';
import type { NotifyResult } from './gate.ts';
import { type NotificationInbox, readRecord, recordName } from './inbox.ts';
import type { SyncNotification } from './notification.ts';
import { isTerminal } from './sync-tracker.ts';

export interface InboxRecord {
  name: string;
  created: number;
  data: Record<string, string>;
}

/** A watched inbox ConfigMap as the consumer reads it. */
export function inboxRecordOf(raw: unknown, now: number): InboxRecord {
  const o = raw as {
    metadata?: { name?: string; creationTimestamp?: string };
    data?: Record<string, string>;
  };
  return {
    name: o.metadata?.name ?? '',
    created: Date.parse(String(o.metadata?.creationTimestamp ?? '')) || now,
    data: o.data ?? {},
  };
}

export interface InboxConsumerDeps {
  releaseName: string;
  log: Logger;
  inbox(): NotificationInbox | undefined;
  /** True while this replica acts; a replica that does not act takes nothing. */
  acting(): boolean;
  /** Hands a notification to the sync gate. */
  notify(n: SyncNotification): Promise<NotifyResult>;
  now?(): number;
}

export async function takeFromInbox(d: InboxConsumerDeps, recs: InboxRecord[]): Promise<void> {
  const { log } = d;
  const now = d.now ?? Date.now;
  for (const rec of recs.sort((a, b) => a.created - b.created)) {
    const inbox = d.inbox();
    if (!d.acting() || !inbox) return;
    try {
      let n: SyncNotification;
      try {
        n = readRecord(rec);
      } catch (err) {
        log.warn({ record: rec.name, err: (err as Error).message }, 'invalid notification record; deleted');
        await inbox.done(rec.name);
        continue;
      }
      const r = await d.notify(n);
      if (r.outcome !== 'duplicate') {
        log.info(
          {
            app: `${n.app.namespace}/${n.app.name}`,
            phase: n.phase,
            startedAt: n.startedAt,
            record: rec.name,
          },
          'Argo CD notification taken from the inbox',
        );
      }
      // A running sync's record stays until its end is recorded (a leader after us needs it to hold
      // the app's changes), or until it is older than --notification-record-max-age (the gate would have stopped holding).
      if (isTerminal(n.phase)) {
        await inbox.done(rec.name);
        await inbox.done(recordName(d.releaseName, { ...n, phase: 'Running' }));
      } else if (now() - rec.created > inbox.maxAgeMs) {
        await inbox.done(rec.name);
      }
    } catch (err) {
      log.warn(
        { record: rec.name, err: (err as Error).message },
        'could not take a notification from the inbox',
      );
    }
  }
}
