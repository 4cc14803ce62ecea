// What the two webhook endpoints (Argo CD's notifications, service/argocd/webhook.ts, and Flux's
// events, service/flux/webhook.ts) share: the body limit, constant-time secret comparison, the JSON
// problem answer, 405 for other methods, and the answers to the body reader's errors.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response, Router } from 'express';
import type { Logger } from './log.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

/** Constant-time equality of two secrets of any length (both are hashed to 32 bytes first). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected)) && expected.length > 0;
}

/** A JSON error answer: `{ error, ...extra }`. */
export function problem(res: Response, status: number, error: string, extra: Record<string, unknown> = {}) {
  res.status(status).json({ error, ...extra });
}

/**
 * After the path's POST handlers: 405 for any other method, and the body reader's errors (too large,
 * not JSON, an unsupported encoding, an aborted body) as 4xx; anything else is logged as `failed`.
 */
export function endpointErrors(router: Router, path: string, log: Logger, failed: string): void {
  router.all(path, (_req, res) => {
    res.set('Allow', 'POST');
    problem(res, 405, 'only POST is allowed');
  });
  router.use(path, (err: unknown, _req: Request, res: Response, next: NextFunction) => {
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
        log.error({ err: e.message ?? String(err) }, failed);
        problem(res, e.status && e.status >= 400 && e.status < 500 ? e.status : 500, 'request failed');
    }
  });
}
