// The service's one HTTP port (node:http, no framework): /metrics, /healthz (liveness), /readyz
// (readiness), and routes added later (the Argo CD notification webhook). Liveness fails only when the process is
// wedged: the event loop blocked, or a watch loop that stopped cycling. Anything a restart would
// not fix (the API server down, RBAC denied) keeps /healthz green and shows in logs and metrics.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import { HttpError } from './http-body.ts';
import type { Logger } from './log.ts';

/** Answers one request. A thrown HttpError is answered with its status; anything else with 500. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** Sends `body` with `status`; `type` defaults to plain text. */
export function send(
  res: ServerResponse,
  status: number,
  body: string,
  type = 'text/plain; charset=utf-8',
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { ...headers, 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** Sends `value` as JSON with `status`. */
export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
): void {
  send(res, status, JSON.stringify(value), 'application/json; charset=utf-8', headers);
}

/** The path of a request, without its query. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Where to listen: `:8080` (every interface), `127.0.0.1:8080`, `[::1]:8080`, `localhost:0`. */
export interface HttpAddress {
  /** Undefined: every interface (IPv6 and IPv4 where the host has both). */
  host?: string;
  port: number;
}

/** Parses an --http-address value; throws an Error whose message names the flag and the value. */
export function parseHttpAddress(value: string): HttpAddress {
  const bad = (why: string) => new Error(`invalid value ${JSON.stringify(value)} for --http-address: ${why}`);
  const m = /^(?:\[([0-9A-Fa-f:.%a-zA-Z]+)\]|([^:[\]\s]*)):(\d{1,5})$/.exec(value.trim());
  if (!m) throw bad('expected [host]:port, e.g. :8080, 127.0.0.1:8080 or [::1]:8080');
  const port = Number(m[3]);
  if (port > 65_535) throw bad('port must be 0-65535');
  const host = m[1] ?? m[2];
  return host ? { host, port } : { port };
}

/**
 * The largest event-loop delay seen in the current and the previous window, from perf_hooks'
 * monitorEventLoopDelay. A single long block is remembered for one to two windows, so a probe that
 * runs in between the blocks still sees it.
 */
export class EventLoopLag {
  readonly #h: ELDHistogram;
  readonly #timer: ReturnType<typeof setInterval>;
  #previousMaxNs = 0;

  constructor(o: { windowMs?: number; resolutionMs?: number } = {}) {
    this.#h = monitorEventLoopDelay({ resolution: o.resolutionMs ?? 20 });
    this.#h.enable();
    this.#timer = setInterval(() => {
      this.#previousMaxNs = this.#h.max;
      this.#h.reset();
    }, o.windowMs ?? 10_000);
    this.#timer.unref();
  }

  maxLagMs(): number {
    return Math.max(this.#previousMaxNs, this.#h.max) / 1e6;
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#h.disable();
  }
}

/**
 * Tracks whether every watch loop is still cycling. The service calls beat(watch) from each
 * watch's handlers and failure hook. A healthy loop beats at least once per relist interval
 * (a periodic relist is reported even on a quiet resource), and a failing loop beats on every
 * retry, so silence longer than `staleAfterMs` means the loop itself is stuck.
 */
export class WatchProgress {
  readonly #last = new Map<string, number>();
  readonly #staleAfterMs: number;
  readonly #now: () => number;

  constructor(staleAfterMs: number, now: () => number = Date.now) {
    if (!(staleAfterMs > 0)) throw new Error(`staleAfterMs must be > 0, got ${staleAfterMs}`);
    this.#staleAfterMs = staleAfterMs;
    this.#now = now;
  }

  /** Registers a watch (call when it starts) or records that it made progress. */
  beat(watch: string): void {
    this.#last.set(watch, this.#now());
  }

  /** A watch that was stopped on purpose. */
  forget(watch: string): void {
    this.#last.delete(watch);
  }

  /** Watches that have not made progress for staleAfterMs. */
  stale(): string[] {
    const now = this.#now();
    return [...this.#last].filter(([, t]) => now - t > this.#staleAfterMs).map(([w]) => w);
  }

  progressing(): boolean {
    return this.stale().length === 0;
  }
}

/** Counts every response of `handler`, e.g. for gitops_reloader_webhook_requests_total. */
export function countResponses(record: (status: number) => void, handler: Handler): Handler {
  return (req, res) => {
    res.once('finish', () => record(res.statusCode));
    return handler(req, res);
  };
}

export interface HttpServerOptions {
  /** The --http-address value, e.g. ":8080". */
  address: string;
  /** The /metrics source: Metrics from metrics.ts, or anything with the same two members. */
  metrics: { readonly contentType: string; text(): Promise<string> };
  /** Readiness: caches synced and start-up decisions made. */
  isReady: () => boolean;
  /** Liveness: false when a watch loop has stopped cycling (see WatchProgress). Default: always true. */
  watchesProgressing?: () => boolean;
  /** Liveness fails while the event loop was blocked longer than this, recently. Default 5 s. */
  maxEventLoopLagMs?: number;
  /** The lag source; default an EventLoopLag owned (and stopped) by the server. */
  eventLoopLagMs?: () => number;
  /** close() waits this long for requests in flight, then drops their connections. Default 5 s. */
  closeTimeoutMs?: number;
  log?: Logger;
}

export interface HealthReport {
  ok: boolean;
  checks: {
    eventLoop: { ok: boolean; maxLagMs: number; limitMs: number };
    watches: { ok: boolean };
  };
}

export interface HttpServer {
  /**
   * Serves `path` (exactly, any query, every method: the handler checks the method) with `handler`.
   * Throws if the path is already served.
   */
  route(path: string, handler: Handler): void;
  /** The address actually bound (port resolved when 0 was asked for). */
  readonly address: AddressInfo;
  /** A base URL for loopback clients, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  /** /readyz answers 503 from now on, so Services stop sending webhooks here; everything else still works. */
  drain(): void;
  /** drain(), stop accepting connections, let requests in flight finish (up to closeTimeoutMs). Idempotent. */
  close(): Promise<void>;
}

/** Builds the app and listens on `address`. Rejects if the address cannot be bound. */
export async function startHttpServer(o: HttpServerOptions): Promise<HttpServer> {
  const { host, port } = parseHttpAddress(o.address);
  const limitMs = o.maxEventLoopLagMs ?? 5_000;
  const ownLag = o.eventLoopLagMs ? undefined : new EventLoopLag();
  const lagMs = o.eventLoopLagMs ?? (() => ownLag?.maxLagMs() ?? 0);
  const watchesProgressing = o.watchesProgressing ?? (() => true);
  let draining = false;
  let closing: Promise<void> | undefined;

  const health = (): HealthReport => {
    const maxLagMs = Math.round(lagMs());
    const eventLoop = { ok: maxLagMs <= limitMs, maxLagMs, limitMs };
    const watches = { ok: watchesProgressing() };
    return { ok: eventLoop.ok && watches.ok, checks: { eventLoop, watches } };
  };

  const cacheless = { 'Cache-Control': 'no-store' };
  const builtin: Record<string, Handler> = {
    '/metrics': async (_req, res) => {
      const body = await o.metrics.text();
      send(res, 200, body, o.metrics.contentType, cacheless);
    },
    '/healthz': (_req, res) => {
      const report = health();
      sendJson(res, report.ok ? 200 : 503, report, cacheless);
    },
    '/readyz': (_req, res) => {
      const ready = !draining && o.isReady();
      const status = draining ? 'shutting down' : ready ? 'ready' : 'caches not synced';
      sendJson(res, ready ? 200 : 503, { ready, status }, cacheless);
    },
  };
  const routes = new Map<string, Handler>();
  for (const [path, probe] of Object.entries(builtin)) {
    routes.set(path, (req, res) => {
      if (req.method === 'GET' || req.method === 'HEAD') return probe(req, res);
      send(res, 405, 'only GET is allowed\n', undefined, { Allow: 'GET, HEAD' });
    });
  }

  // Responses in flight when close() starts are sent with "Connection: close", so the client's
  // keep-alive socket does not hold shutdown open until it times out.
  const inFlight = new Set<ServerResponse>();
  const failed = (req: IncomingMessage, res: ServerResponse, err: unknown) => {
    const status = err instanceof HttpError && err.status >= 400 && err.status < 500 ? err.status : 500;
    if (status >= 500)
      o.log?.error({ path: pathOf(req), err: String((err as Error)?.message ?? err) }, 'http handler failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    send(res, status, `${status >= 500 ? 'internal error' : (err as HttpError).message}\n`);
  };
  const dispatch = (req: IncomingMessage, res: ServerResponse) => {
    if (closing) res.setHeader('Connection', 'close');
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
    const handler = routes.get(pathOf(req));
    if (!handler) {
      send(res, 404, 'not found\n');
      return;
    }
    try {
      const done = handler(req, res);
      if (done) done.catch((err: unknown) => failed(req, res, err));
    } catch (err) {
      failed(req, res, err);
    }
  };

  const server = createServer(dispatch);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch((err: Error) => {
    ownLag?.stop();
    throw new Error(`cannot listen on --http-address ${o.address}: ${err.message}`);
  });
  server.on('error', (err) => o.log?.error({ err: err.message }, 'http server error'));
  // A slow or idle client must not keep a connection forever, nor hold up shutdown.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;

  const address = server.address() as AddressInfo;
  const loopback = address.family === 'IPv6' ? '[::1]' : '127.0.0.1';
  const urlHost =
    host && host !== '0.0.0.0' && host !== '::'
      ? address.family === 'IPv6'
        ? `[${address.address}]`
        : address.address
      : loopback;

  const close = () => {
    closing ??= new Promise<void>((resolve) => {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      const force = setTimeout(() => {
        o.log?.warn({ timeoutMs: o.closeTimeoutMs ?? 5_000 }, 'http requests still open; closing them');
        server.closeAllConnections();
      }, o.closeTimeoutMs ?? 5_000);
      force.unref();
      server.close(() => {
        clearTimeout(force);
        ownLag?.stop();
        resolve();
      });
      server.closeIdleConnections();
    });
    return closing;
  };

  return {
    route: (path, handler) => {
      if (routes.has(path)) throw new Error(`${path} is already served`);
      routes.set(path, handler);
    },
    address,
    url: `http://${urlHost}:${address.port}`,
    drain: () => {
      draining = true;
    },
    close,
  };
}
