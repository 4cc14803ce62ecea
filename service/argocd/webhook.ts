// POST /api/v1/argocd/notifications: the target of Argo CD's notification webhook. Checks the
// bearer token (constant time, read from the mounted Secret file on each request so a rotated token
// takes effect), the content type and a 1 MiB body limit, validates the body, and hands it to the
// SyncGate. Answers: 202 accepted (also for a duplicate delivery, which does nothing), 400 with the
// offending field, 401, 413, 415.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
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

function problem(res: Response, status: number, error: string, extra: Record<string, unknown> = {}) {
  res.status(status).json({ error, ...extra });
}

export function argocdWebhookRouter(o: WebhookOptions): Router {
  const router = express.Router();

  const authenticate = async (req: Request, res: Response, next: NextFunction) => {
    let expected: string;
    try {
      expected = (await readFile(o.tokenFile, 'utf8')).replace(/\s+$/, '');
    } catch (err) {
      o.log.error({ err: (err as Error).message }, 'cannot read --webhook-token-file');
      problem(res, 500, 'the webhook token is not available');
      return;
    }
    if (expected === '') {
      o.log.error({}, '--webhook-token-file is empty; every notification is refused');
      problem(res, 500, 'the webhook token is not available');
      return;
    }
    const m = /^Bearer[ ]+(\S+)[ ]*$/i.exec(req.get('authorization') ?? '');
    if (!m || !sameSecret(m[1] as string, expected)) {
      res.set('WWW-Authenticate', 'Bearer realm="gitops-reloader"');
      problem(res, 401, 'a valid bearer token is required');
      return;
    }
    next();
  };

  const jsonOnly = (req: Request, res: Response, next: NextFunction) => {
    if (req.is('application/json') !== 'application/json') {
      problem(res, 415, 'the body must be application/json', {
        contentType: req.get('content-type') ?? null,
      });
      return;
    }
    next();
  };

  const parse = express.json({ limit: MAX_BODY_BYTES, strict: false, inflate: false, type: () => true });

  const handle = async (req: Request, res: Response) => {
    let n: SyncNotification;
    try {
      n = parseNotification(req.body);
    } catch (err) {
      if (err instanceof InvalidNotification) {
        o.log.info({ field: err.field, err: err.message }, 'Argo CD notification rejected');
        problem(res, 400, err.message, { field: err.field });
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
      res
        .status(202)
        .json(
          r.outcome === 'duplicate'
            ? { status: 'duplicate', app, startedAt: n.startedAt }
            : { status: 'accepted', app, startedAt: n.startedAt, action: r.action },
        );
    } catch (err) {
      if (err instanceof InboxFull) {
        o.log.warn({ app, err: err.message }, 'Argo CD notification refused: too many waiting');
        res.set('Retry-After', '30');
        problem(res, 429, err.message);
        return;
      }
      // Only when neither the leader could act on it nor it could be recorded (the API server is
      // unreachable from this replica): say so, and that a retry may succeed.
      o.log.error({ app, err: (err as Error).message }, 'Argo CD notification could not be recorded');
      res.set('Retry-After', '10');
      problem(res, 503, 'the notification could not be recorded; try again');
    }
  };

  router.post(WEBHOOK_PATH, authenticate, jsonOnly, parse, handle);
  router.all(WEBHOOK_PATH, (_req, res) => {
    res.set('Allow', 'POST');
    problem(res, 405, 'only POST is allowed');
  });
  // Errors of the body parser, for this path only.
  router.use(WEBHOOK_PATH, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
    const e = err as { type?: string; status?: number; message?: string };
    if (res.headersSent) {
      next(err);
      return;
    }
    switch (e.type) {
      case 'entity.too.large':
        problem(res, 413, `the body is larger than ${MAX_BODY_BYTES} bytes`);
        return;
      case 'entity.parse.failed':
        problem(res, 400, `the body is not valid JSON: ${e.message ?? ''}`, { field: '(body)' });
        return;
      case 'charset.unsupported':
      case 'encoding.unsupported':
        problem(res, 415, e.message ?? 'unsupported encoding');
        return;
      case 'request.aborted':
      case 'request.size.invalid':
        problem(res, 400, e.message ?? 'the request body is incomplete', { field: '(body)' });
        return;
      default:
        o.log.error({ err: e.message ?? String(err) }, 'Argo CD notification failed');
        problem(res, e.status && e.status >= 400 && e.status < 500 ? e.status : 500, 'request failed');
    }
  });
  return router;
}
