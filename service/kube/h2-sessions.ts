// Watches over HTTP/2 (docs/adr/0046): every watch of one API server, with one set of TLS
// credentials, is a stream of one shared TLS connection, as client-go's are, instead of a connection
// each. A watch's connection is its largest cost in memory (about 90 KB of TLS and socket buffers),
// and an engine keeps one watch per kind and namespace, so in hub mode, where a replica runs dozens of
// engines, connections were most of a replica's memory and of each spoke's connection count.
//
// The protocol is chosen by TLS ALPN on the first connection: a server (or a proxy in front of it)
// that does not choose h2 is remembered, and its watches use HTTP/1.1 as before. Plain-HTTP servers
// always use HTTP/1.1. A session pings every 30 s and is destroyed when an answer does not come within
// 15 s (H2Timings; a dead connection would otherwise stall every watch on it at once);
// its watches then fail and are re-opened by their owners, on a new session.
import { createHash } from 'node:crypto';
import http2 from 'node:http2';
import { isIP } from 'node:net';
import tls from 'node:tls';

/**
 * Streams one connection carries at most, or the server's own limit when lower (kube-apiserver's
 * --http2-max-streams-per-connection; it announces 100). More open another connection.
 */
const MAX_STREAMS = 100;

/** The TLS parts of a request's options, as ClusterAccess.applyToHTTPSOptions sets them. */
export type TlsOptions = Pick<
  tls.ConnectionOptions,
  'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'
>;

interface Entry {
  session: http2.ClientHttp2Session;
  streams: number;
  idleTimer?: NodeJS.Timeout;
  pingTimer: NodeJS.Timeout;
}

/** Objects that are not bytes (a KeyObject) are told apart by identity. */
const objectIds = new WeakMap<object, number>();
let nextObjectId = 0;
const part = (v: unknown): string =>
  v === undefined
    ? ''
    : (Array.isArray(v) ? v : [v])
        .map((x: unknown) => {
          if (typeof x === 'string' || Buffer.isBuffer(x)) return x.toString();
          if (typeof x !== 'object' || x === null) return String(x);
          if (!objectIds.has(x)) objectIds.set(x, nextObjectId++);
          return `#object${objectIds.get(x)}`;
        })
        .join('\0');

/** The pool key: the origin and a digest of the TLS options (credentials never kept in clear). */
export function sessionKey(origin: string, t: TlsOptions): string {
  const digest = createHash('sha256')
    .update(
      [part(t.ca), part(t.cert), part(t.key), t.servername ?? '', String(t.rejectUnauthorized ?? true)].join(
        '\n',
      ),
    )
    .digest('hex');
  return `${origin}#${digest}`;
}

/** The liveness timings (tests shorten them). */
export interface H2Timings {
  /** How often a session pings its server. */
  pingEveryMs: number;
  /** A ping unanswered this long destroys the session (a dead connection). */
  pingTimeoutMs: number;
  /** A connection whose TLS handshake has not finished by then is given up (a partition, a stuck proxy). */
  connectTimeoutMs: number;
  /** A session with no stream left is closed after this long (a watch re-opened meanwhile reuses it). */
  idleCloseMs: number;
}

const DEFAULT_TIMINGS: H2Timings = {
  pingEveryMs: 30_000,
  pingTimeoutMs: 15_000,
  connectTimeoutMs: 15_000,
  idleCloseMs: 30_000,
};

export class H2Sessions {
  readonly #t: H2Timings;
  /** Sessions by key: a new one opens when every open one carries its most streams. */
  readonly #sessions = new Map<string, Entry[]>();
  readonly #connecting = new Map<string, Promise<Entry | 'http/1.1'>>();
  /** Keys whose server did not choose h2: their watches use HTTP/1.1. */
  readonly #http1 = new Set<string>();
  #enabled = true;

  constructor(timings: Partial<H2Timings> = {}) {
    this.#t = { ...DEFAULT_TIMINGS, ...timings };
  }

  /** Turns HTTP/2 for watches off (--watch-http2=false): every watch uses HTTP/1.1. */
  set enabled(on: boolean) {
    this.#enabled = on;
  }

  /** Open sessions (connections), for tests and the bench. */
  get open(): number {
    let n = 0;
    for (const list of this.#sessions.values()) n += list.length;
    return n;
  }

  /**
   * A stream for `path` on the shared session of `origin` with these TLS options, or 'http/1.1' when
   * the server does not speak HTTP/2 (or it is turned off). Rejects with the connection's error.
   */
  async stream(
    origin: URL,
    t: TlsOptions,
    headers: Record<string, string>,
    path: string,
    signal: AbortSignal,
  ): Promise<http2.ClientHttp2Stream | 'http/1.1'> {
    if (!this.#enabled || origin.protocol !== 'https:') return 'http/1.1';
    const key = sessionKey(origin.origin, t);
    if (this.#http1.has(key)) return 'http/1.1';
    // A session with room for one more stream (the server's SETTINGS_MAX_CONCURRENT_STREAMS, at most
    // MAX_STREAMS): a stream over the limit would wait, unanswered, for another to end.
    let entry = this.#withRoom(key);
    while (!entry) {
      let connecting = this.#connecting.get(key);
      if (!connecting) {
        connecting = this.#connect(key, origin, t).finally(() => this.#connecting.delete(key));
        this.#connecting.set(key, connecting);
      }
      const got = await abortable(connecting, signal);
      if (got === 'http/1.1') return got;
      // Others waiting for the same connection may have filled it meanwhile.
      entry = this.#withRoom(key);
    }
    signal.throwIfAborted();
    const e = entry;
    const lower: http2.OutgoingHttpHeaders = { ':method': 'GET', ':path': path };
    for (const [k, v] of Object.entries(headers)) lower[k.toLowerCase()] = v;
    const stream = e.session.request(lower, { endStream: true, signal });
    e.streams++;
    e.session.ref();
    if (e.idleTimer) {
      clearTimeout(e.idleTimer);
      e.idleTimer = undefined;
    }
    stream.once('close', () => {
      e.streams--;
      if (e.streams === 0 && !e.session.destroyed) {
        // An idle session keeps no process alive (a stopped service exits by itself).
        e.session.unref();
        e.idleTimer = setTimeout(() => this.#drop(key, e), this.#t.idleCloseMs);
        e.idleTimer.unref();
      }
    });
    return stream;
  }

  #withRoom(key: string): Entry | undefined {
    return this.#sessions
      .get(key)
      ?.find(
        (e) =>
          !e.session.closed &&
          !e.session.destroyed &&
          e.streams < Math.min(MAX_STREAMS, e.session.remoteSettings?.maxConcurrentStreams ?? MAX_STREAMS),
      );
  }

  #connect(key: string, origin: URL, t: TlsOptions): Promise<Entry | 'http/1.1'> {
    const host = origin.hostname.replace(/^\[|\]$/g, '');
    const port = Number(origin.port || 443);
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        host,
        port,
        ca: t.ca,
        cert: t.cert,
        key: t.key,
        ...(t.rejectUnauthorized === false ? { rejectUnauthorized: false } : {}),
        servername: t.servername ?? (isIP(host) ? undefined : host),
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      const fail = (err: Error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(
        () =>
          fail(
            new Error(
              `HTTP/2: no TLS connection to ${origin.host} within ${this.#t.connectTimeoutMs / 1000}s`,
            ),
          ),
        this.#t.connectTimeoutMs,
      );
      timer.unref();
      socket.once('error', fail);
      socket.once('secureConnect', () => {
        clearTimeout(timer);
        socket.off('error', fail);
        if (socket.alpnProtocol !== 'h2') {
          // Remembered for the process: the server (or a proxy before it) speaks HTTP/1.1 only.
          this.#http1.add(key);
          socket.destroy();
          resolve('http/1.1');
          return;
        }
        const session = http2.connect(origin.origin, { createConnection: () => socket });
        const entry: Entry = {
          session,
          streams: 0,
          pingTimer: setInterval(() => {
            const timeout = setTimeout(
              () => session.destroy(new Error('HTTP/2 session: no answer to a ping')),
              this.#t.pingTimeoutMs,
            );
            timeout.unref();
            try {
              session.ping((err) => {
                clearTimeout(timeout);
                if (err && !session.destroyed) session.destroy(err);
              });
            } catch (err) {
              clearTimeout(timeout);
              session.destroy(err as Error);
            }
          }, this.#t.pingEveryMs),
        };
        entry.pingTimer.unref();
        // Errors reach the streams; the session is only forgotten.
        session.on('error', () => this.#drop(key, entry));
        session.on('goaway', () => this.#drop(key, entry));
        session.on('close', () => this.#drop(key, entry));
        this.#sessions.set(key, [...(this.#sessions.get(key) ?? []), entry]);
        resolve(entry);
      });
    });
  }

  #drop(key: string, e: Entry) {
    clearInterval(e.pingTimer);
    if (e.idleTimer) clearTimeout(e.idleTimer);
    const rest = (this.#sessions.get(key) ?? []).filter((x) => x !== e);
    if (rest.length > 0) this.#sessions.set(key, rest);
    else this.#sessions.delete(key);
    if (!e.session.closed && !e.session.destroyed) e.session.close();
  }

  /** Closes every session (shutdown, tests). */
  closeAll(): void {
    for (const [key, list] of [...this.#sessions]) for (const e of list) this.#drop(key, e);
  }
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** The process's sessions: every watch of the service shares them. */
export const h2Sessions = new H2Sessions();
