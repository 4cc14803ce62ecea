// Evicts one pod through the Eviction API (policy/v1), so PodDisruptionBudgets are honoured: a 429
// is retried with exponential backoff until a deadline and reported at each refusal; a pod that no
// longer exists counts as evicted; anything else is an error that names the pod.
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1Eviction } from '@kubernetes/client-node';
import type { CoreApi } from './api.ts';

/** What evictPod needs of a CoreApi (a CoreApi from KubeConfig.makeApiClient fits). */
export type EvictionClient = Pick<CoreApi, 'createNamespacedPodEviction' | 'readNamespacedPod'>;

/** Why the API server refused with 429. */
export type BlockCause =
  /** A PodDisruptionBudget allows no disruption now, or is still being computed. */
  | 'disruption-budget'
  /** Any other 429, e.g. API Priority and Fairness shedding load. */
  | 'throttled';

export interface EvictionBlock {
  namespace: string;
  pod: string;
  /** 1 for the first request. */
  attempt: number;
  cause: BlockCause;
  /** The server's words: its message, then the messages of its causes (which name the PDB). */
  message: string;
  /** When the next attempt will be made, or undefined when the deadline has passed and we give up. */
  retryInMs: number | undefined;
}

export type EvictionResult =
  /** The API server accepted the eviction (with dryRun: it would have). The pod is now terminating. */
  | { outcome: 'evicted'; attempts: number; dryRun: boolean }
  /** The pod (or, given a uid, that incarnation of it) no longer exists: nothing left to evict. */
  | { outcome: 'gone'; attempts: number }
  /** Still refused with 429 when the deadline passed; `last` is the final refusal. */
  | { outcome: 'blocked'; attempts: number; last: EvictionBlock }
  /**
   * Given a resourceVersion: the pod changed since that version (409), and nothing was evicted. The
   * caller decided on an old view of it (e.g. that it was not Ready); it decides again on a new one.
   */
  | { outcome: 'changed'; attempts: number };

export interface EvictOptions {
  /** Epoch ms until which a 429 is retried. Default: no retry, a 429 returns 'blocked' at once. */
  deadline?: number;
  /**
   * The uid the caller planned to evict. Sent as a precondition, so a pod recreated under the same
   * name is never evicted by mistake; that case returns 'gone'. Recommended.
   */
  uid?: string;
  /**
   * The resourceVersion of the pod the caller decided on. Sent as a precondition, so a pod that
   * changed since (became Ready, say) is not evicted on a decision it no longer fits: 'changed'.
   */
  resourceVersion?: string;
  /** Ask the server to validate the eviction (PDBs included) without acting: dryRun=All. */
  dryRun?: boolean;
  /** Overrides the pod's terminationGracePeriodSeconds. */
  gracePeriodSeconds?: number;
  /** Called at each 429, before the backoff; the caller logs it and reports a stall. */
  onBlocked?: (block: EvictionBlock) => void;
  /** First backoff after a 429 (default 1000 ms); it doubles up to maxBackoffMs (default 30 000 ms). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Aborts a pending backoff (leadership lost, shutdown): evictPod then rejects with the abort reason. */
  signal?: AbortSignal;
}

/** An eviction that failed for a reason other than a PDB: permissions, a conflict, the network… */
export class EvictionError extends Error {
  override readonly name = 'EvictionError';
  readonly namespace: string;
  readonly pod: string;
  /** HTTP status, when the API server answered. */
  readonly status: number | undefined;
  /** The Status reason (Conflict, Forbidden, …) when the server gave one. */
  readonly reason: string | undefined;

  constructor(
    namespace: string,
    pod: string,
    status: number | undefined,
    reason: string | undefined,
    message: string,
    cause: unknown,
  ) {
    super(`evicting pod ${namespace}/${pod}: ${status !== undefined ? `HTTP ${status}: ` : ''}${message}`, {
      cause,
    });
    this.namespace = namespace;
    this.pod = pod;
    this.status = status;
    this.reason = reason;
  }
}

interface ServerStatus {
  message?: string;
  reason?: string;
  details?: { causes?: { reason?: string; message?: string }[]; retryAfterSeconds?: number };
}

interface ApiFailure {
  code: number | undefined;
  status: ServerStatus;
}

// Our KubeHttpError and client-node 2.x's ApiException both carry `code` and the raw answer as `body`.
function apiFailure(err: unknown): ApiFailure {
  const e = err as { code?: unknown; body?: unknown } | null;
  const code = typeof e?.code === 'number' ? e.code : undefined;
  let status: ServerStatus = {};
  if (typeof e?.body === 'string') {
    try {
      const parsed: unknown = JSON.parse(e.body);
      if (parsed && typeof parsed === 'object') status = parsed as ServerStatus;
    } catch {
      // Not a Status object (a proxy's HTML page, say): the text itself is the best message we have.
      status = { message: e.body.trim().slice(0, 500) };
    }
  } else if (e?.body && typeof e.body === 'object') {
    status = e.body as ServerStatus;
  }
  return { code, status };
}

function serverMessage(s: ServerStatus, fallback: unknown): string {
  const causes = (s.details?.causes ?? []).map((c) => c.message).filter((m): m is string => Boolean(m));
  const head = s.message ?? (fallback instanceof Error ? fallback.message : String(fallback));
  return causes.length > 0 ? `${head} (${causes.join('; ')})` : head;
}

/**
 * Evicts `namespace/name` with the Eviction API. Resolves 'evicted', 'gone' (404, or the uid
 * precondition found a different pod), or 'blocked' (still 429 at the deadline). Rejects with
 * EvictionError for anything else, e.g. 403, 500 "more than one PodDisruptionBudget", or a 409
 * the uid does not explain.
 */
export async function evictPod(
  core: EvictionClient,
  namespace: string,
  name: string,
  opts: EvictOptions = {},
): Promise<EvictionResult> {
  const deadline = opts.deadline ?? Date.now();
  const maxBackoff = opts.maxBackoffMs ?? 30_000;
  let backoff = Math.min(opts.initialBackoffMs ?? 1000, maxBackoff);
  const deleteOptions: NonNullable<V1Eviction['deleteOptions']> = {};
  if (opts.uid || opts.resourceVersion) {
    deleteOptions.preconditions = {
      ...(opts.uid ? { uid: opts.uid } : {}),
      ...(opts.resourceVersion ? { resourceVersion: opts.resourceVersion } : {}),
    };
  }
  if (opts.gracePeriodSeconds !== undefined) deleteOptions.gracePeriodSeconds = opts.gracePeriodSeconds;
  // In the body, not only as the query parameter: the service's own API adapter (service/kube/api.ts)
  // sends no query parameters, and a dry run that is not one would evict the pod.
  if (opts.dryRun) deleteOptions.dryRun = ['All'];
  const body: V1Eviction = {
    apiVersion: 'policy/v1',
    kind: 'Eviction',
    metadata: { name, namespace },
    ...(Object.keys(deleteOptions).length > 0 ? { deleteOptions } : {}),
  };

  for (let attempt = 1; ; attempt++) {
    opts.signal?.throwIfAborted();
    try {
      await core.createNamespacedPodEviction(
        { name, namespace, body, ...(opts.dryRun ? { dryRun: 'All' } : {}) },
        opts.signal ? { signal: opts.signal } : undefined,
      );
      return { outcome: 'evicted', attempts: attempt, dryRun: Boolean(opts.dryRun) };
    } catch (err) {
      const { code, status } = apiFailure(err);
      if (code === 404) return { outcome: 'gone', attempts: attempt };
      if (code === 409 && opts.uid && (await replacedOrGone(core, namespace, name, opts.uid))) {
        return { outcome: 'gone', attempts: attempt };
      }
      // The same pod, changed since the version we were given (the API server does not retry that).
      if (code === 409 && opts.resourceVersion) return { outcome: 'changed', attempts: attempt };
      if (code !== 429) {
        throw new EvictionError(namespace, name, code, status.reason, serverMessage(status, err), err);
      }
      const cause: BlockCause = status.details?.causes?.some((c) => c.reason === 'DisruptionBudget')
        ? 'disruption-budget'
        : 'throttled';
      const remaining = deadline - Date.now();
      // A PDB's Retry-After is a fixed guess (0 or 10 s); our backoff is the better pace. A throttling
      // 429 asks the whole client to slow down, so honour it.
      const asked = cause === 'throttled' ? (status.details?.retryAfterSeconds ?? 0) * 1000 : 0;
      const retryInMs = remaining > 0 ? Math.min(Math.max(backoff, asked), remaining) : undefined;
      const block: EvictionBlock = {
        namespace,
        pod: name,
        attempt,
        cause,
        message: serverMessage(status, err),
        retryInMs,
      };
      opts.onBlocked?.(block);
      if (retryInMs === undefined) return { outcome: 'blocked', attempts: attempt, last: block };
      try {
        await sleep(retryInMs, undefined, opts.signal ? { signal: opts.signal } : undefined);
      } catch (abort) {
        // timers/promises rejects with its own AbortError; the caller's reason says more.
        opts.signal?.throwIfAborted();
        throw abort;
      }
      backoff = Math.min(backoff * 2, maxBackoff);
    }
  }
}

// A 409 on an eviction with a uid precondition normally means the name now belongs to another pod.
// Confirm it rather than trusting the message text.
async function replacedOrGone(
  core: EvictionClient,
  namespace: string,
  name: string,
  uid: string,
): Promise<boolean> {
  try {
    const pod = await core.readNamespacedPod({ name, namespace });
    return pod.metadata?.uid !== uid;
  } catch (err) {
    if (apiFailure(err).code === 404) return true;
    throw new EvictionError(
      namespace,
      name,
      apiFailure(err).code,
      undefined,
      'reading the pod after a 409 failed',
      err,
    );
  }
}
