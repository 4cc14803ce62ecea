// POST /api/v1/argocd/notifications: the target of Argo CD's notification webhook. Checks the
// bearer token (constant time, read from the mounted Secret file on each request so a rotated token
// takes effect), the content type and a 1 MiB body limit, validates the body, and hands it to the
// SyncGate. Answers: 202 accepted (also for a duplicate delivery, which does nothing), 400 with the
// offending field, 401, 413, 415.
import { readFile } from 'node:fs/promises';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from '../log.ts';
import { endpointErrors, MAX_BODY_BYTES, problem, sameSecret } from '../webhook-http.ts';
import type { NotifyResult } from './gate.ts';
import { InboxFull } from './inbox.ts';
import { InvalidNotification, parseNotification, type SyncNotification } from './notification.ts';

export const WEBHOOK_PATH = '/api/v1/argocd/notifications';

export interface WebhookOptions {
  /** File holding the bearer token (a mounted Secret key). Trailing whitespace is ignored. */
  tokenFile: string;
  notify(n: SyncNotification): Promise<NotifyResult>;
  log: Logger;
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
  endpointErrors(router, WEBHOOK_PATH, o.log, 'Argo CD notification failed');
  return router;
}
