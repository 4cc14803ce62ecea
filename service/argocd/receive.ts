// What a replica does with a notification that reached its webhook (docs/adr/0013): it records the
// notification in the inbox, where whichever replica leads (now or next) reads it, and, when this
// replica is the acting leader, also acts on it at once.
//
// The leader acts *before* its own record can come back through the inbox watch: the gate marks the
// notification seen synchronously, so the copy the watch brings back is the duplicate, and the sender
// is told what was done with its notification rather than "duplicate" (a race a loaded machine won).
import type { NotifyResult } from './gate.ts';
import type { SyncNotification } from './notification.ts';

export interface ReceiveDeps {
  /** Records the notification; true if this call created the record, false if it was there already. */
  record(n: SyncNotification): Promise<boolean>;
  /** The acting leader's gate. */
  act(n: SyncNotification): Promise<NotifyResult>;
  /** Does this replica act now? */
  acting(): boolean;
}

export async function receiveNotification(n: SyncNotification, d: ReceiveDeps): Promise<NotifyResult> {
  // Started before acting, so a leader that dies right after answering has still left the record.
  const recording = d.record(n).then(
    (created) => ({ created }),
    (err: unknown) => ({ err }),
  );
  if (d.acting()) {
    const r = await d.act(n);
    // The leader has acted: a record that could not be written is not the sender's failure.
    await recording;
    return r;
  }
  const rec = await recording;
  if ('err' in rec) throw rec.err;
  return rec.created ? { outcome: 'accepted', action: 'recorded for the leader' } : { outcome: 'duplicate' };
}
