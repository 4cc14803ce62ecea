// --webhook-url: instead of reloading a workload, POST what would have been reloaded to a URL
// (Stakater Reloader's flag of the same name). One POST per reload (one workload, one batch), with a
// timeout, retries with backoff on failures that may pass, and an HMAC-SHA256 signature of the body
// when a key is configured. The body names configs and the workload, never config data: configHash
// is the keyed digest git mode writes, not a hash of Secret data.
import { createHmac, randomUUID } from 'node:crypto';
import { pause } from './types.ts';

export const SIGNATURE_HEADER = 'X-Gitops-Reloader-Signature';
export const DELIVERY_HEADER = 'X-Gitops-Reloader-Delivery';
export const EVENT_HEADER = 'X-Gitops-Reloader-Event';

/** Waits between attempts; the last value repeats. */
export const DEFAULT_BACKOFF_MS = [1_000, 2_000, 5_000, 10_000];

export interface ReloadNotice {
  /** The kind of notice: always "reload" for now; lets receivers tell future kinds apart. */
  event: 'reload';
  workload: { kind: string; namespace: string; name: string };
  /** The strategy the reload would have run (restart, annotate, git). */
  strategy: string;
  /** The configs whose change caused it, e.g. "ConfigMap/app". */
  changed: string[];
  /** Pods created before this instant run the old config (RFC 3339). */
  cutoff: string;
  /** Keyed digest of every config the workload reads (the value git mode would commit). */
  configHash: string;
  /** When this notice was first sent (RFC 3339); the same on every retry. */
  timestamp: string;
}

export interface ReloadWebhookOptions {
  url: string;
  /** Signs the body when set. */
  key?: Buffer;
  timeoutMs: number;
  /** Attempts after the first. */
  retries: number;
  backoffMs?: readonly number[];
}

/** The webhook did not accept the notice within the allowed attempts. */
export class WebhookDeliveryError extends Error {
  override name = 'WebhookDeliveryError';
  readonly attempts: number;
  constructor(message: string, attempts: number) {
    super(message);
    this.attempts = attempts;
  }
}

/** The hex HMAC-SHA256 of `body` under `key`, as sent in the signature header after "sha256=". */
export function signature(key: Buffer, body: string): string {
  return createHmac('sha256', key).update(body).digest('hex');
}

type Outcome = { ok: true; status: number } | { ok: false; retry: boolean; why: string };

async function attempt(
  o: ReloadWebhookOptions,
  body: string,
  delivery: string,
  signal: AbortSignal,
): Promise<Outcome> {
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': 'gitops-reloader',
    [EVENT_HEADER]: 'reload',
    [DELIVERY_HEADER]: delivery,
  };
  if (o.key) headers[SIGNATURE_HEADER] = `sha256=${signature(o.key, body)}`;
  const timeout = AbortSignal.timeout(o.timeoutMs);
  try {
    const res = await fetch(o.url, {
      method: 'POST',
      headers,
      body,
      // A redirect would resend the notice (and its signature) to a host nobody configured.
      redirect: 'manual',
      signal: AbortSignal.any([signal, timeout]),
    });
    // The body is not used; drain it so the connection can be reused.
    await res.arrayBuffer().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { ok: true, status: res.status };
    const retry = res.status === 429 || res.status >= 500;
    return { ok: false, retry, why: `HTTP ${res.status}` };
  } catch (err) {
    if (signal.aborted) throw signal.reason;
    if (timeout.aborted) return { ok: false, retry: true, why: `no answer within ${o.timeoutMs}ms` };
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return { ok: false, retry: true, why: cause?.code ?? cause?.message ?? (err as Error).message };
  }
}

/**
 * POSTs `notice` until the URL answers 2xx: retries network errors, timeouts, 429 and 5xx up to
 * `retries` times with backoff; any other answer fails at once. Resolves with the attempts used;
 * rejects with WebhookDeliveryError, or with the abort reason when `signal` aborts.
 */
export async function sendReloadNotice(
  o: ReloadWebhookOptions,
  notice: ReloadNotice,
  signal: AbortSignal,
  onRetry?: (attempt: number, why: string) => void,
): Promise<{ attempts: number; status: number }> {
  const body = JSON.stringify(notice);
  const delivery = randomUUID();
  const backoff = o.backoffMs ?? DEFAULT_BACKOFF_MS;
  for (let n = 1; ; n++) {
    const r = await attempt(o, body, delivery, signal);
    if (r.ok) return { attempts: n, status: r.status };
    if (!r.retry || n > o.retries) {
      throw new WebhookDeliveryError(
        `webhook ${redact(o.url)} failed after ${n} attempt${n === 1 ? '' : 's'}: ${r.why}`,
        n,
      );
    }
    onRetry?.(n, r.why);
    await pause(backoff[Math.min(n - 1, backoff.length - 1)] ?? 1_000, signal);
  }
}

/** The URL without credentials or query (which may carry a token), for messages and Events. */
export function redact(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '(invalid URL)';
  }
}
