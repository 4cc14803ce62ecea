// POST /api/v1/argocd/notifications: the target of Argo CD's notification webhook. Checks the
// bearer token (constant time, read from the mounted Secret file on each request so a rotated token
// takes effect), the content type and a 1 MiB body limit, validates the body, and hands it to the
// SyncGate. Answers: 202 accepted (also for a duplicate delivery, which does nothing), 400 with the
// offending field, 401, 413, 415.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Handler } from '../http.ts';
import { sendJson } from '../http.ts';
import { HttpError, mediaType, readJson } from '../http-body.ts';
import type { Logger } from '../log.ts';
import type { NotifyResult } from './gate.ts';
import { InboxFull } from './inbox.ts';
import { InvalidNotification, parseNotification, type SyncNotification } from './notification.ts';

export const WEBHOOK_PATH = '/api/v1/argocd/notifications';
export const MAX_BODY_BYTES = 1024 * 1024;

export interface WebhookOptions {
  /** File holding the bearer token (a mounted Secret key). Trailing whitespace is ignored. */
  tokenFile: string;
  notify(n: SyncNotification): Promise<NotifyResult>;
  log: Logger;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time equality of two secrets of any length (both are hashed to 32 bytes first). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected)) && expected.length > 0;
}

function problem(
  res: ServerResponse,
  status: number,
  error: string,
  extra: Record<string, unknown> = {},
  headers: Record<string, string> = {},
) {
  sendJson(res, status, { error, ...extra }, headers);
}

/** The webhook's handler, to be served at WEBHOOK_PATH. */
export function argocdWebhookHandler(o: WebhookOptions): Handler {
  /** True when the request carries the current token; answers 401 or 500 itself otherwise. */
  const authenticated = async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    let expected: string;
    try {
      expected = (await readFile(o.tokenFile, 'utf8')).replace(/\s+$/, '');
    } catch (err) {
      o.log.error({ err: (err as Error).message }, 'cannot read --webhook-token-file');
      problem(res, 500, 'the webhook token is not available');
      return false;
    }
    if (expected === '') {
      o.log.error({}, '--webhook-token-file is empty; every notification is refused');
      problem(res, 500, 'the webhook token is not available');
      return false;
    }
    const m = /^Bearer[ ]+(\S+)[ ]*$/i.exec(req.headers.authorization ?? '');
    if (!m || !sameSecret(m[1] as string, expected)) {
      problem(
        res,
        401,
        'a valid bearer token is required',
        {},
        { 'WWW-Authenticate': 'Bearer realm="gitops-reloader"' },
      );
      return false;
    }
    return true;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    let n: SyncNotification;
    try {
      n = parseNotification(await readJson(req, MAX_BODY_BYTES));
    } catch (err) {
      if (err instanceof InvalidNotification) {
        o.log.info({ field: err.field, err: err.message }, 'Argo CD notification rejected');
        problem(res, 400, err.message, { field: err.field });
        return;
      }
      if (err instanceof HttpError) {
        o.log.info({ status: err.status, err: err.message }, 'Argo CD notification rejected');
        problem(res, err.status, err.message, err.extra);
        return;
      }
      throw err;
    }
    const app = `${n.app.namespace}/${n.app.name}`;
    try {
      const r = await o.notify(n);
      o.log.info(
        { app, phase: n.phase, startedAt: n.startedAt, outcome: r.outcome, resources: n.resources.length },
        r.outcome === 'duplicate' ? 'Argo CD notification was a duplicate' : 'Argo CD notification accepted',
      );
      sendJson(
        res,
        202,
        r.outcome === 'duplicate'
          ? { status: 'duplicate', app, startedAt: n.startedAt }
          : { status: 'accepted', app, startedAt: n.startedAt, action: r.action },
      );
    } catch (err) {
      if (err instanceof InboxFull) {
        o.log.warn({ app, err: err.message }, 'Argo CD notification refused: too many waiting');
        problem(res, 429, err.message, {}, { 'Retry-After': '30' });
        return;
      }
      // Only when neither the leader could act on it nor it could be recorded (the API server is
      // unreachable from this replica): say so, and that a retry may succeed.
      o.log.error({ app, err: (err as Error).message }, 'Argo CD notification could not be recorded');
      problem(res, 503, 'the notification could not be recorded; try again', {}, { 'Retry-After': '10' });
    }
  };

  return async (req, res) => {
    if (req.method !== 'POST') {
      problem(res, 405, 'only POST is allowed', {}, { Allow: 'POST' });
      return;
    }
    // The token is checked before the body is read.
    if (!(await authenticated(req, res))) return;
    const type = req.headers['content-type'];
    if (mediaType(type) !== 'application/json') {
      problem(res, 415, 'the body must be application/json', { contentType: type ?? null });
      return;
    }
    await handle(req, res);
  };
}
