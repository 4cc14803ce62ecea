// Raw HTTP to the API server: one request with a JSON answer, a LIST item by item, and a WATCH as a
// stream of lines.
// No typed client and no ObjectSerializer, so objects stay plain JSON and nothing is converted to models.
// Credentials come from ClusterAccess.applyToHTTPSOptions on every request, so rotated tokens are
// picked up.
import http from 'node:http';
import type { ClientHttp2Stream } from 'node:http2';
import https from 'node:https';
import { ListScanner } from '../core/list-scanner.ts';
import { apiRequestURL } from '../core/repo-url.ts';
import type { ClusterAccess, InProcessServer } from './access.ts';
import { h2Sessions } from './h2-sessions.ts';

/** A non-2xx answer from the API server, with the Status message when it sent one. */
export class KubeHttpError extends Error {
  readonly status: number;
  readonly reason: string | undefined;
  /** The raw answer (a Status object, usually), at most 4 KiB. */
  readonly body: string;
  constructor(status: number, reason: string | undefined, message: string, body = '') {
    super(message);
    this.name = 'KubeHttpError';
    this.status = status;
    this.reason = reason;
    this.body = body;
  }
  /** The HTTP status under the name client-node's ApiException uses, so callers handle both alike. */
  get code(): number {
    return this.status;
  }
}

/**
 * Connections to the API server are kept open between requests for 30 s (Node's default agent keeps
 * them 5 s), under the API server's own 90 s idle timeout. A reload's requests (its two views, the
 * pending write, the first eviction or surge pod) then find warm connections instead of paying a TLS
 * handshake each on the way to the first action. LIFO reuse keeps the pool as small as the traffic.
 */
const IDLE_KEEP_MS = 30_000;
const HTTPS_AGENT = new https.Agent({ keepAlive: true, timeout: IDLE_KEEP_MS, scheduling: 'lifo' });
const HTTP_AGENT = new http.Agent({ keepAlive: true, timeout: IDLE_KEEP_MS, scheduling: 'lifo' });

async function open(
  kc: ClusterAccess,
  pathAndQuery: string,
  signal: AbortSignal,
  method = 'GET',
  contentType?: string,
  contentLength?: number,
): Promise<http.ClientRequest> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster');
  // server may carry a path prefix (API proxies such as Rancher's), so append rather than resolve.
  const url = apiRequestURL(server, pathAndQuery);
  const ours: Record<string, string> = {
    Accept: 'application/json',
    ...(contentType ? { 'Content-Type': contentType } : {}),
    // Node frames a body without a length in chunks only for methods that usually carry one: a
    // DELETE body (DeleteOptions) would go out unframed and be read as the next request.
    ...(contentLength !== undefined ? { 'Content-Length': String(contentLength) } : {}),
  };
  // The access sees the whole request (method, path, headers) and adds TLS options and credentials.
  const opts: https.RequestOptions = { method, path: url.pathname + url.search, headers: { ...ours } };
  await kc.applyToHTTPSOptions(opts);
  signal.throwIfAborted();
  const request = url.protocol === 'http:' ? http.request : https.request;
  const agent = url.protocol === 'http:' ? HTTP_AGENT : HTTPS_AGENT;
  const req = request(url, { ...opts, agent, method, headers: { ...opts.headers, ...ours }, signal });
  const observe = kc.observeRequest?.bind(kc);
  if (observe) {
    const started = performance.now();
    let seen = false;
    const report = (code: string) => {
      if (seen) return;
      seen = true;
      observe(method, url.host, code, (performance.now() - started) / 1000);
    };
    req.once('response', (res) => report(String(res.statusCode ?? '<error>')));
    req.once('error', () => report('<error>'));
  }
  return req;
}

function statusError(method: string, path: string, status: number, body: string): KubeHttpError {
  let reason: string | undefined;
  let detail = body.slice(0, 500);
  try {
    const st = JSON.parse(body) as { reason?: unknown; message?: unknown };
    if (typeof st.reason === 'string') reason = st.reason;
    if (typeof st.message === 'string') detail = st.message;
  } catch {
    // Not a Status object (a proxy's HTML page, say): the raw text is the best detail there is.
  }
  const bare = path.split('?')[0];
  return new KubeHttpError(
    status,
    reason,
    `${method} ${bare}: HTTP ${status}${reason ? ` ${reason}` : ''}: ${detail}`,
    body.slice(0, 4096),
  );
}

/** GETs a path (a LIST, in messages) and parses the JSON body. Rejects with KubeHttpError on a non-2xx status. */
export function getJson(
  kc: ClusterAccess,
  pathAndQuery: string,
  signal: AbortSignal,
  timeoutMs: number,
): Promise<unknown> {
  return requestJson(kc, 'GET', pathAndQuery, undefined, signal, timeoutMs, 'LIST');
}

/** A LIST page without its items (they went to onItem one by one). */
export interface ListHead {
  kind?: string;
  apiVersion?: string;
  metadata?: { resourceVersion?: string; continue?: string };
}

/**
 * LISTs a path and hands each item to `onItem` as soon as its text has arrived, parsed on its own:
 * the page is never held whole, so a page of large objects (Helm release Secrets are up to 1 MiB
 * each) costs one object's size at a time. `head` is what of the page's own fields was read before
 * the item (kind and apiVersion come first in the API server's answer). Rejects with KubeHttpError on
 * a non-2xx status.
 */
export async function listItems(
  kc: ClusterAccess,
  pathAndQuery: string,
  signal: AbortSignal,
  timeoutMs: number,
  onItem: (item: unknown, head: () => string) => void,
): Promise<ListHead> {
  const bare = pathAndQuery.split('?')[0] ?? '';
  if (kc.inProcess) throw new Error(`LIST ${bare}: no item-by-item LIST from an in-process API server`);
  const timeout = new AbortController();
  const timer = setTimeout(
    () => timeout.abort(new Error(`LIST ${bare} took longer than ${timeoutMs} ms`)),
    timeoutMs,
  );
  // The only reference to the caller's callback. A keep-alive socket goes back to the agent's pool still
  // holding this request and its listeners until the socket's next request; cleared below, so that the
  // callback's closure (the caller's whole listing, in watch.ts) is not kept alive by an idle socket.
  let sink: typeof onItem | undefined = onItem;
  try {
    const both = AbortSignal.any([signal, timeout.signal]);
    const read = (
      res: NodeJS.ReadableStream & { destroy(err?: Error): void },
      status: number,
      complete: () => boolean,
      fail: (err: unknown) => void,
      resolve: (head: ListHead) => void,
    ) => {
      res.setEncoding('utf8');
      const ok = status >= 200 && status <= 299;
      const errorText: string[] = [];
      const scanner = new ListScanner((text) => {
        try {
          sink?.(JSON.parse(text), () => scanner.outerSoFar());
        } catch (err) {
          res.destroy(err as Error);
        }
      });
      res.on('data', (c: string) => {
        if (ok) scanner.feed(c);
        else if (errorText.length < 64) errorText.push(c);
      });
      res.on('error', fail);
      res.on('end', () => {
        if (!ok) {
          fail(statusError('LIST', pathAndQuery, status, errorText.join('')));
          return;
        }
        try {
          resolve(scanner.end());
        } catch (err) {
          fail(new Error(`LIST ${bare}: ${(err as Error).message}`));
        }
      });
      res.on('close', () => {
        if (!complete()) fail(new Error(`LIST ${bare}: connection closed mid-body`));
      });
    };
    // Over HTTP/2 when the server speaks it: a stream of the watches' connection (h2-sessions.ts).
    const h2 = await openH2Get(kc, pathAndQuery, both);
    if (h2 !== 'http/1.1') {
      return await new Promise<ListHead>((resolve, reject) => {
        const fail = (err: unknown) => {
          h2.stream.destroy();
          reject(both.aborted ? both.reason : err);
        };
        h2.stream.on('error', fail);
        h2.stream.once('end', () => {
          h2.ended = true;
        });
        h2.stream.once('response', (headers) => {
          const status = Number(headers[':status'] ?? 0);
          h2.report(String(status));
          read(h2.stream, status, () => h2.ended, fail, resolve);
        });
      });
    }
    const req = await open(kc, pathAndQuery, both, 'GET');
    return await new Promise<ListHead>((resolve, reject) => {
      const fail = (err: unknown) => reject(both.aborted ? both.reason : err);
      req.on('error', fail);
      req.on('response', (res) => read(res, res.statusCode ?? 0, () => res.complete, fail, resolve));
      req.end();
    });
  } finally {
    clearTimeout(timer);
    sink = undefined;
  }
}

const VERB: Record<string, string> = {
  GET: 'GET',
  POST: 'CREATE',
  DELETE: 'DELETE',
  PATCH: 'PATCH',
  PUT: 'UPDATE',
};

/**
 * requestJson to an API server in this process (ClusterAccess.inProcess): the write fence runs at the
 * same point, immediately before the request leaves, and an abort rejects with its reason.
 */
function sendInProcess(
  kc: ClusterAccess,
  server: InProcessServer,
  method: string,
  pathAndQuery: string,
  payload: string | undefined,
  signal: AbortSignal,
): Promise<{ status: number; text: string }> {
  signal.throwIfAborted();
  if (method !== 'GET') kc.beforeSend?.();
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    server.request(method, pathAndQuery, payload, signal).then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? signal.reason : err);
      },
    );
  });
}

/**
 * Sends one request with an optional JSON body (POST for a create, PATCH with a merge patch) and
 * parses the JSON answer. Rejects with KubeHttpError on a non-2xx status. `verb` names the request in
 * messages (default from the method; a GET of a collection is better called LIST).
 */
export async function requestJson(
  kc: ClusterAccess,
  method: 'GET' | 'POST' | 'DELETE' | 'PATCH' | 'PUT',
  pathAndQuery: string,
  body: unknown,
  signal: AbortSignal,
  timeoutMs: number,
  verb: string = VERB[method] ?? method,
): Promise<unknown> {
  // A write waits for its turn under the write rate limit first; the timeout is for the request.
  if (method !== 'GET') await kc.beforeWrite?.(signal);
  const bare = pathAndQuery.split('?')[0] ?? '';
  const timeout = new AbortController();
  const timer = setTimeout(
    () => timeout.abort(new Error(`${verb} ${bare} took longer than ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    const both = AbortSignal.any([signal, timeout.signal]);
    const contentType =
      body === undefined
        ? undefined
        : method === 'PATCH'
          ? 'application/merge-patch+json'
          : 'application/json';
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const length = payload === undefined ? undefined : Buffer.byteLength(payload);
    if (kc.inProcess) {
      const r = await sendInProcess(kc, kc.inProcess, method, pathAndQuery, payload, both);
      if (r.status < 200 || r.status > 299) throw statusError(verb, pathAndQuery, r.status, r.text);
      return r.text ? JSON.parse(r.text) : undefined;
    }
    const req = await open(kc, pathAndQuery, both, method, contentType, length);
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const fail = (err: unknown) => reject(both.aborted ? both.reason : err);
      req.on('error', fail);
      req.on('response', (res) => {
        // Decoded chunk by chunk: a LIST page is about 1 MiB, and one Buffer of that size per page,
        // freed at once, fragments the native heap for good (docs/operations.md, Sizing).
        res.setEncoding('utf8');
        const chunks: string[] = [];
        res.on('data', (c: string) => chunks.push(c));
        res.on('error', fail);
        res.on('end', () => {
          // Emptied: the pooled socket keeps this listener's closure until its next request.
          const text = chunks.join('');
          chunks.length = 0;
          resolve({ status: res.statusCode ?? 0, text });
        });
        res.on('close', () => {
          if (!res.complete) fail(new Error(`${verb} ${bare}: connection closed mid-body`));
        });
      });
      if (method !== 'GET') {
        try {
          // The last moment before the request leaves (its headers go with end()): the write fence.
          kc.beforeSend?.();
        } catch (err) {
          req.destroy(err as Error);
          return;
        }
      }
      req.end(payload);
    });
    if (status < 200 || status > 299) throw statusError(verb, pathAndQuery, status, text);
    return text ? JSON.parse(text) : undefined;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Opens a watch and calls onLine for every complete line. Resolves when the server ends the stream;
 * rejects with KubeHttpError on a non-200 status, with the signal's reason when aborted, or with the
 * network error.
 */
export async function streamLines(
  kc: ClusterAccess,
  pathAndQuery: string,
  signal: AbortSignal,
  onLine: (line: string) => void,
): Promise<void> {
  if (kc.inProcess) {
    signal.throwIfAborted();
    const refused = await kc.inProcess.watch(pathAndQuery, signal, onLine);
    if (refused) throw statusError('WATCH', pathAndQuery, refused.status, refused.text);
    return;
  }
  // Over HTTP/2 when the server speaks it: one connection for every watch (h2-sessions.ts).
  const h2 = await openH2Get(kc, pathAndQuery, signal);
  if (h2 !== 'http/1.1') {
    await new Promise<void>((resolve, reject) => {
      const lines = lineReader(pathAndQuery, signal, onLine, h2.close.bind(h2), resolve, reject);
      h2.stream.on('error', lines.fail);
      h2.stream.once('response', (headers) => {
        const status = Number(headers[':status'] ?? 0);
        h2.report(String(status));
        lines.read(h2.stream, status, () => h2.ended);
      });
      h2.stream.once('end', () => {
        h2.ended = true;
      });
    });
    return;
  }
  const req = await open(kc, pathAndQuery, signal);
  await new Promise<void>((resolve, reject) => {
    const lines = lineReader(pathAndQuery, signal, onLine, () => req.destroy(), resolve, reject);
    req.on('error', lines.fail);
    req.on('response', (res) => lines.read(res, res.statusCode ?? 0, () => res.complete));
    req.end();
  });
}

/** A GET (a watch, a LIST) as a stream of a shared HTTP/2 session, or 'http/1.1' when the server does not speak HTTP/2. */
async function openH2Get(
  kc: ClusterAccess,
  pathAndQuery: string,
  signal: AbortSignal,
): Promise<
  'http/1.1' | { stream: ClientHttp2Stream; close(): void; report(code: string): void; ended: boolean }
> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('the kubeconfig has no current cluster');
  const url = apiRequestURL(server, pathAndQuery);
  if (url.protocol !== 'https:') return 'http/1.1';
  const opts: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  signal.throwIfAborted();
  const started = performance.now();
  const stream = await h2Sessions.stream(
    url,
    opts,
    opts.headers as Record<string, string>,
    url.pathname + url.search,
    signal,
  );
  if (stream === 'http/1.1') return stream;
  let reported = false;
  const report = (code: string) => {
    if (reported) return;
    reported = true;
    kc.observeRequest?.('GET', url.host, code, (performance.now() - started) / 1000);
  };
  stream.once('error', () => report('<error>'));
  return { stream, close: () => stream.close(), report, ended: false };
}

/**
 * Reads a watch's answer line by line: calls onLine for every complete line, settles once. `read` is
 * given the answer (an HTTP/1.1 response or an HTTP/2 stream) with its status and whether it ended.
 */
function lineReader(
  pathAndQuery: string,
  signal: AbortSignal,
  onLine: (line: string) => void,
  destroy: () => void,
  resolve: () => void,
  reject: (err: unknown) => void,
) {
  let settled = false;
  const fail = (err: unknown) => {
    if (settled) return;
    settled = true;
    destroy();
    reject(signal.aborted ? signal.reason : err);
  };
  const succeed = () => {
    if (settled) return;
    settled = true;
    resolve();
  };
  const read = (res: NodeJS.ReadableStream, status: number, complete: () => boolean) => {
    res.setEncoding('utf8');
    if (status !== 200) {
      let body = '';
      res.on('data', (c: string) => {
        if (body.length < 4096) body += c;
      });
      res.on('end', () => fail(statusError('WATCH', pathAndQuery, status, body)));
      res.on('error', fail);
      return;
    }
    // Scan each byte once: a large object can arrive in many chunks.
    let buffer = '';
    let scanned = 0;
    res.on('data', (chunk: string) => {
      buffer += chunk;
      let start = 0;
      let nl = buffer.indexOf('\n', scanned);
      try {
        while (nl >= 0 && !settled) {
          const line = buffer.slice(start, nl);
          start = nl + 1;
          if (line.trim()) onLine(line);
          nl = buffer.indexOf('\n', start);
        }
      } catch (err) {
        fail(err);
        return;
      }
      buffer = buffer.slice(start);
      scanned = buffer.length;
    });
    res.on('error', fail);
    res.on('end', () => {
      try {
        if (buffer.trim() && !settled) onLine(buffer);
      } catch (err) {
        fail(err);
        return;
      }
      succeed();
    });
    res.on('close', () => {
      if (!complete()) fail(new Error(`WATCH ${pathAndQuery.split('?')[0]}: connection closed mid-stream`));
    });
  };
  return { fail, read };
}
