// POST /api/v1/flux/events: the address of a Flux notification-controller Provider of type
// `generic-hmac` (or `generic` with an Authorization header). Reads the token file on each request
// (a rotated token takes effect), checks the signature or bearer token in constant time, the 1 MiB
// body limit and the content type, parses the event once (event.ts) and hands it over. Answers: 202
// accepted or duplicate, 202 ignored (a kind we do not act on), 400 with the field, 401, 413, 415,
// 500 without a usable token file, 503 when it could not be recorded.
//
// Facts it relies on, from notification-controller v1.9.0 in the Go module cache:
//  - internal/notifier/forwarder.go (Forwarder.Post, sign): `generic-hmac` sends
//    "X-Signature: sha256=<lower-case hex>", HMAC-SHA256 keyed with the Provider Secret's `token`
//    over the exact JSON body it posts; no other algorithm is ever sent (the sha1/sha512 forms are
//    only accepted by notification-controller's own Receivers, receiver_handlers.go). It also sets
//    "Gotk-Component: <reportingController>", then each header of the Secret's `headers`, then
//    X-Signature last.
//  - internal/notifier/client.go (postMessage): POST with "Content-Type: application/json", the
//    body json.Marshal(event); go-retryablehttp v0.7.8 retries 429 and 5xx (not 501) up to 4
//    times, never a 4xx.
//  - internal/notifier/factory.go: `generic` is a Forwarder without a key, `generic-hmac` one keyed
//    with opts.Token; internal/server/event_handlers.go extractAuthFromSecret: the Secret's `headers`
//    key is YAML "Name: value" lines, set on every request, for both types; the token comes from
//    fluxcd/pkg/runtime v0.110.0 secrets.TokenAuthFromSecret, not trimmed. So a `generic` Provider
//    authenticates with a Secret `headers: "Authorization: Bearer <token>"`.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import type { Logger } from '../log.ts';
import { endpointErrors, MAX_BODY_BYTES, problem, sameSecret } from '../webhook-http.ts';
import { type FluxEvent, InvalidFluxEvent, parseFluxEvent } from './event.ts';

export const FLUX_WEBHOOK_PATH = '/api/v1/flux/events';

export type FluxNotifyResult = { outcome: 'accepted'; action: string } | { outcome: 'duplicate' };

export interface FluxWebhookOptions {
  /** File holding the shared token (the Provider Secret's `token`, mounted). */
  tokenFile: string;
  notify(e: FluxEvent): Promise<FluxNotifyResult>;
  log: Logger;
}

/** What authenticate leaves for the steps after the body is read. */
interface Pending {
  /** The signature to check against the raw body, with every key the token file allows. */
  signature?: { mac: Buffer; keys: Buffer[] };
}

const SIGNATURE = /^sha256=([0-9a-f]{64})$/i;
const BEARER = /^Bearer[ ]+(\S+)[ ]*$/i;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function unauthorized(res: Response, error: string) {
  res.set('WWW-Authenticate', 'Bearer realm="gitops-reloader"');
  problem(res, 401, error);
}

/** Trailing ASCII whitespace removed (a token file written by hand ends in a newline). */
function trimEnd(b: Buffer): Buffer {
  let end = b.length;
  while (end > 0 && [0x20, 0x09, 0x0a, 0x0d].includes(b[end - 1] as number)) end--;
  return b.subarray(0, end);
}

export function fluxWebhookRouter(o: FluxWebhookOptions): Router {
  const router = express.Router();

  const authenticate = async (req: Request, res: Response, next: NextFunction) => {
    let raw: Buffer;
    try {
      raw = await readFile(o.tokenFile);
    } catch (err) {
      o.log.error({ err: (err as Error).message }, 'cannot read --flux-webhook-token-file');
      problem(res, 500, 'the webhook token is not available');
      return;
    }
    const token = trimEnd(raw);
    if (token.length === 0) {
      o.log.error({}, '--flux-webhook-token-file is empty; every Flux event is refused');
      problem(res, 500, 'the webhook token is not available');
      return;
    }
    const pending: Pending = {};
    const signature = req.get('x-signature');
    if (signature !== undefined) {
      const m = SIGNATURE.exec(signature.trim());
      if (!m) {
        o.log.info({}, 'Flux event refused: X-Signature is not sha256=<hex>');
        unauthorized(res, 'X-Signature must be sha256=<64 hex digits> (HMAC-SHA256 of the body)');
        return;
      }
      // Flux keys the HMAC with the Secret's token exactly; a token file written apart from the
      // Secret may have gained a final newline, so its trimmed form is a key too.
      const keys = raw.length === token.length ? [raw] : [raw, token];
      pending.signature = { mac: Buffer.from(m[1] as string, 'hex'), keys };
    } else {
      const m = BEARER.exec(req.get('authorization') ?? '');
      if (!m || !sameSecret(m[1] as string, token.toString('utf8'))) {
        unauthorized(res, 'an X-Signature or a valid bearer token is required');
        return;
      }
    }
    res.locals.flux = pending;
    next();
  };

  const rawBody = express.raw({ limit: MAX_BODY_BYTES, inflate: false, type: () => true });

  const verify = (req: Request, res: Response, next: NextFunction) => {
    const sig = (res.locals.flux as Pending).signature;
    if (sig) {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      let ok = false;
      for (const key of sig.keys) {
        const mac = createHmac('sha256', key).update(body).digest();
        if (timingSafeEqual(mac, sig.mac)) ok = true;
      }
      if (!ok) {
        o.log.info({}, 'Flux event refused: the signature does not match the body and token');
        unauthorized(res, 'the X-Signature does not match the body');
        return;
      }
    }
    next();
  };

  const jsonOnly = (req: Request, res: Response, next: NextFunction) => {
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.get('content-type') ?? '')?.[1];
    if (req.is('application/json') !== 'application/json' || (charset && !/^utf-?8$/i.test(charset))) {
      problem(res, 415, 'the body must be application/json in UTF-8', {
        contentType: req.get('content-type') ?? null,
      });
      return;
    }
    next();
  };

  const handle = async (req: Request, res: Response) => {
    let parsed: ReturnType<typeof parseFluxEvent>;
    try {
      let json: unknown;
      try {
        json = JSON.parse(utf8.decode(Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)));
      } catch (err) {
        throw new InvalidFluxEvent('(body)', `is not valid JSON: ${(err as Error).message}`);
      }
      parsed = parseFluxEvent(json);
    } catch (err) {
      if (err instanceof InvalidFluxEvent) {
        o.log.info({ field: err.field, err: err.message }, 'Flux event rejected');
        problem(res, 400, err.message, { field: err.field });
        return;
      }
      throw err;
    }
    if ('ignored' in parsed) {
      o.log.debug({ why: parsed.ignored }, 'Flux event ignored');
      res.status(202).json({ outcome: 'ignored', why: parsed.ignored });
      return;
    }
    const e = parsed;
    const flux = `${e.object.kind}/${e.object.namespace}/${e.object.name}`;
    const about = {
      flux,
      namespace: e.object.namespace,
      severity: e.severity,
      reason: e.reason,
      revision: e.revision,
      changes: e.changes.length,
    };
    try {
      const r = await o.notify(e);
      o.log.info(
        { ...about, outcome: r.outcome },
        r.outcome === 'duplicate' ? 'Flux event was a duplicate' : 'Flux event accepted',
      );
      res
        .status(202)
        .json(
          r.outcome === 'duplicate' ? { outcome: 'duplicate' } : { outcome: 'accepted', action: r.action },
        );
    } catch (err) {
      // notification-controller retries a 5xx up to 4 times.
      o.log.error({ ...about, err: (err as Error).message }, 'Flux event could not be recorded');
      res.set('Retry-After', '10');
      problem(res, 503, 'the event could not be recorded; try again');
    }
  };

  router.post(FLUX_WEBHOOK_PATH, authenticate, rawBody, verify, jsonOnly, handle);
  endpointErrors(router, FLUX_WEBHOOK_PATH, o.log, 'Flux event failed');
  return router;
}
