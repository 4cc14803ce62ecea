// Sends chat alerts without ever holding up a reload: notify() only puts the alert in a bounded queue
// and returns; one loop posts them in order, each within --alert-timeout, and never retries (a late
// alert about an old reload is noise). A full queue drops the new alert, counted and logged. Logs name
// the webhook by scheme and host only.

import type { AlertConfig } from '../config/alert-flags.ts';
import {
  type AlertSink,
  alertAccepted,
  alertRequest,
  alertText,
  type ReloadAlert,
} from '../core/alert-message.ts';
import type { Logger } from '../log.ts';
import { type PostOptions, postAlert } from './post.ts';

/** Alerts waiting to be sent; past this the newest are dropped. */
export const ALERT_QUEUE_SIZE = 100;

export type AlertResult = 'sent' | 'failed' | 'dropped';

export interface AlertSenderDeps {
  log: Pick<Logger, 'info' | 'warn'>;
  /** Counts each alert's end (gitops_reloader_alerts_total). */
  count?(sink: AlertSink, result: AlertResult): void;
  /** The POST; the real one by default (tests hand in a slow or failing one). */
  post?(o: PostOptions, req: { contentType: string; body: string }): Promise<number>;
}

export class AlertSender {
  readonly #cfg: AlertConfig;
  readonly #d: AlertSenderDeps;
  readonly #queue: ReloadAlert[] = [];
  #running = false;
  #idle: Promise<void> = Promise.resolve();

  constructor(cfg: AlertConfig, d: AlertSenderDeps) {
    this.#cfg = cfg;
    this.#d = d;
  }

  notify(a: ReloadAlert): void {
    if (a.outcome === 'failed' && !this.#cfg.onFailure) return;
    if (this.#queue.length >= ALERT_QUEUE_SIZE) {
      this.#d.count?.(this.#cfg.sink, 'dropped');
      this.#d.log.warn(
        {
          ...this.#where(),
          workload: `${a.workload.kind}/${a.workload.name}`,
          namespace: a.workload.namespace,
        },
        'alert dropped: the alert queue is full',
      );
      return;
    }
    this.#queue.push(a);
    if (!this.#running) {
      this.#running = true;
      this.#idle = this.#drain();
    }
  }

  /** Resolves when every queued alert has been sent or has failed (tests, shutdown). */
  idle(): Promise<void> {
    return this.#idle;
  }

  #where() {
    return { alertSink: this.#cfg.sink, alertWebhook: this.#cfg.webhook.origin };
  }

  async #drain(): Promise<void> {
    const post = this.#d.post ?? postAlert;
    const c = this.#cfg;
    for (let a = this.#queue.shift(); a; a = this.#queue.shift()) {
      const f = {
        ...this.#where(),
        workload: `${a.workload.kind}/${a.workload.name}`,
        namespace: a.workload.namespace,
        outcome: a.outcome,
      };
      const req = alertRequest(c.sink, alertText(a, c.additionalInfo), a.outcome);
      try {
        const status = await post(
          { webhook: c.webhook, ...(c.proxy ? { proxy: c.proxy } : {}), timeoutMs: c.timeoutMs },
          req,
        );
        if (alertAccepted(c.sink, status)) {
          this.#d.count?.(c.sink, 'sent');
          this.#d.log.info({ ...f, status }, 'alert sent');
        } else {
          this.#d.count?.(c.sink, 'failed');
          this.#d.log.warn({ ...f, status }, `alert not accepted: HTTP ${status}`);
        }
      } catch (err) {
        this.#d.count?.(c.sink, 'failed');
        this.#d.log.warn({ ...f, err: (err as Error).message }, 'alert not sent');
      }
    }
    this.#running = false;
  }
}
