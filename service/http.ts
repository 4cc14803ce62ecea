// The service's one HTTP port (express): /metrics, /healthz (liveness), /readyz (readiness), and
// routes mounted later (the Argo CD notification webhook). Liveness fails when the process is wedged:
// the event loop blocked, a watch loop that stopped cycling, or one that has failed without a single
// success for as long as a stuck one (docs/adr/0027); a failure now and then never fails it.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import express, { type ErrorRequestHandler, type Express, type RequestHandler, type Router } from 'express';
import type { Logger } from './log.ts';

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
 * Tracks each watch loop: whether it still cycles, and whether it keeps failing (docs/adr/0027).
 * The service calls beat(watch) when a watch makes progress (a list, an event, a relist or a
 * reconnect: each proves the API server answers it) and failed(watch) for a failed list or watch. A
 * healthy loop beats at least once per relist interval (a periodic relist is reported even on a quiet
 * resource), and a failing loop reports every retry, so silence longer than `staleAfterMs` means the
 * loop itself is stuck. A watch whose failures have gone on, with no success in between, for longer
 * than `staleAfterMs` counts as stuck too: its cache is that old, and a restart (new connections,
 * credentials read afresh) is the remedy left. `failing(ms)` names the watches failing for longer than
 * `ms`, for readiness. One failure, or a few, followed by a success, count for nothing.
 */
export class WatchProgress {
  readonly #last = new Map<string, number>();
  /** When the current run of failures began, per watch; absent while it succeeds. */
  readonly #failingSince = new Map<string, number>();
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
    this.#failingSince.delete(watch);
  }

  /** The loop cycled without proving anything either way (e.g. a handler threw, a 410 to relist from). */
  cycled(watch: string): void {
    this.#last.set(watch, this.#now());
  }

  /** A list or watch request failed: the loop cycles, and the run of failures goes on (or begins). */
  failed(watch: string): void {
    const now = this.#now();
    this.#last.set(watch, now);
    if (!this.#failingSince.has(watch)) this.#failingSince.set(watch, now);
  }

  /**
   * What a watch's failure report says of its progress: a failed request starts (or continues) a run
   * of failures; a relist or reconnect ends it; anything else is a cycle.
   */
  report(f: { path: string; mode: string }): void {
    if (f.mode === 'list-failed' || f.mode === 'watch-failed') this.failed(f.path);
    else if (f.mode === 'relist' || f.mode === 'reconnect') this.beat(f.path);
    else this.cycled(f.path);
  }

  /** A watch that was stopped on purpose. */
  forget(watch: string): void {
    this.#last.delete(watch);
    this.#failingSince.delete(watch);
  }

  /** Watches whose failures have gone on, without a success, for longer than `ms`. */
  failing(ms: number): string[] {
    const now = this.#now();
    return [...this.#failingSince].filter(([, t]) => now - t > ms).map(([w]) => w);
  }

  /** Watches that have not cycled, or only failed, for staleAfterMs. */
  stale(): string[] {
    const now = this.#now();
    const silent = [...this.#last].filter(([, t]) => now - t > this.#staleAfterMs).map(([w]) => w);
    return [...new Set([...silent, ...this.failing(this.#staleAfterMs)])];
  }

  progressing(): boolean {
    return this.stale().length === 0;
  }
}

/** Counts every response of the routes after it, e.g. for gitops_reloader_webhook_requests_total. */
export function countResponses(record: (status: number) => void): RequestHandler {
  return (_req, res, next) => {
    res.once('finish', () => record(res.statusCode));
    next();
  };
}

export interface HttpServerOptions {
  /** The --http-address value, e.g. ":8080". */
  address: string;
  /** The /metrics source: Metrics from metrics.ts, or anything with the same two members. */
  metrics: { readonly contentType: string; text(): Promise<string> };
  /** Readiness: caches synced and start-up decisions made. */
  isReady: () => boolean;
  /** Why this replica is not ready, for /readyz's body (default: its caches are not synced). */
  notReadyBecause?: () => string;
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
  /** The express app, for anything the helpers below do not cover. */
  readonly app: Express;
  /** Routes added here are served before the 404 fallback, e.g. routes.post(WEBHOOK_PATH, ...). */
  readonly routes: Router;
  /** Shorthand for routes.use(path, ...handlers). */
  mount(path: string, ...handlers: RequestHandler[]): void;
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

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // Responses in flight when close() starts are sent with "Connection: close", so the client's
  // keep-alive socket does not hold shutdown open until it times out.
  const inFlight = new Set<ServerResponse>();
  app.use((_req, res, next) => {
    if (closing) res.set('Connection', 'close');
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
    next();
  });

  app.get('/metrics', async (_req, res) => {
    const body = await o.metrics.text();
    res.set('Content-Type', o.metrics.contentType).set('Cache-Control', 'no-store').send(body);
  });
  // /live is Stakater Reloader's liveness path: probes copied from a Reloader install keep working.
  app.get(['/healthz', '/live'], (_req, res) => {
    const report = health();
    res
      .status(report.ok ? 200 : 503)
      .set('Cache-Control', 'no-store')
      .json(report);
  });
  app.get('/readyz', (_req, res) => {
    const ready = !draining && o.isReady();
    const status = draining
      ? 'shutting down'
      : ready
        ? 'ready'
        : (o.notReadyBecause?.() ?? 'caches not synced');
    res
      .status(ready ? 200 : 503)
      .set('Cache-Control', 'no-store')
      .json({ ready, status });
  });

  const routes = express.Router();
  app.use(routes);
  app.use((_req, res) => {
    res.status(404).type('text/plain').send('not found\n');
  });
  const onError: ErrorRequestHandler = (err, req, res, _next) => {
    // body-parser and friends set a 4xx status on errors that are the client's fault.
    const e = err as { status?: unknown; statusCode?: unknown; expose?: unknown; message?: unknown };
    const raw = typeof e.status === 'number' ? e.status : e.statusCode;
    const status = typeof raw === 'number' && raw >= 400 && raw < 600 ? raw : 500;
    if (status >= 500) o.log?.error({ path: req.path, err: String(e.message ?? err) }, 'http handler failed');
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const message = status < 500 && e.expose !== false && typeof e.message === 'string' ? e.message : '';
    res
      .status(status)
      .type('text/plain')
      .send(`${message || (status >= 500 ? 'internal error' : 'bad request')}\n`);
  };
  app.use(onError);

  const server = createServer(app);
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
    app,
    routes,
    mount: (path, ...handlers) => {
      routes.use(path, ...handlers);
    },
    address,
    url: `http://${urlHost}:${address.port}`,
    drain: () => {
      draining = true;
    },
    close,
  };
}
