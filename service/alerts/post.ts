// One alert POST over HTTP(S), directly or through a proxy: for an http webhook the request goes to
// the proxy with the absolute URL (as Go's http.Transport sends it, what Reloader does); for an https
// webhook a CONNECT tunnel is opened through the proxy and TLS runs inside it. Redirects are not
// followed (Reloader refuses them too: a webhook that redirects is misconfigured). Errors name the
// webhook by origin only: its path is its secret.

import http from 'node:http';
import https from 'node:https';
import { isIP, type Socket } from 'node:net';
import tls from 'node:tls';
import type { AlertEndpoint } from '../config/alert-flags.ts';
import type { AlertRequest } from '../core/alert-message.ts';

export interface PostOptions {
  webhook: AlertEndpoint;
  proxy?: AlertEndpoint;
  timeoutMs: number;
}

/** The webhook's HTTP status; rejects on a network error or the timeout, never naming the URL's path. */
export async function postAlert(o: PostOptions, req: AlertRequest): Promise<number> {
  const signal = AbortSignal.timeout(o.timeoutMs);
  try {
    return await send(o, req, signal);
  } catch (err) {
    const why = signal.aborted ? `no answer within ${o.timeoutMs}ms` : (err as Error).message;
    throw new Error(scrub(why, o));
  }
}

/** Removes any trace of the webhook's path (and credentials) from an error text. */
function scrub(text: string, o: PostOptions): string {
  let out = text;
  for (const secret of [o.webhook.path, o.webhook.auth, o.proxy?.auth]) {
    if (secret && secret !== '/' && secret.length > 1) out = out.split(secret).join('/…');
  }
  return out;
}

const basic = (auth: string) => `Basic ${Buffer.from(auth).toString('base64')}`;

function send(o: PostOptions, req: AlertRequest, signal: AbortSignal): Promise<number> {
  const w = o.webhook;
  const headers: Record<string, string | number> = {
    'content-type': req.contentType,
    'content-length': Buffer.byteLength(req.body),
    'user-agent': 'gitops-reloader',
    host: w.host,
    ...(w.auth ? { authorization: basic(w.auth) } : {}),
  };
  const p = o.proxy;
  if (p && !w.secure) {
    // The absolute URL in the request line, to the proxy.
    return request(
      p.secure ? https.request : http.request,
      {
        host: p.hostname,
        port: p.port,
        method: 'POST',
        path: `${w.origin}${w.path}`,
        headers: { ...headers, ...(p.auth ? { 'proxy-authorization': basic(p.auth) } : {}) },
        signal,
      },
      req.body,
    );
  }
  const target = { host: w.hostname, port: w.port, method: 'POST', path: w.path, headers, signal };
  if (!p) return request(w.secure ? https.request : http.request, target, req.body);
  return tunnel(p, w, signal).then((socket) =>
    request(
      https.request,
      {
        ...target,
        // One request per tunnel: no agent, the TLS socket runs over the CONNECT stream.
        agent: false,
        createConnection: () =>
          tls.connect({
            socket,
            // The certificate is checked against the webhook's host, as without a proxy.
            host: w.hostname,
            ...(isIP(w.hostname) === 0 ? { servername: w.hostname } : {}),
          }),
      },
      req.body,
    ),
  );
}

/** Opens a CONNECT tunnel to the webhook through the proxy. */
function tunnel(p: AlertEndpoint, w: AlertEndpoint, signal: AbortSignal): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const authority = `${w.hostname.includes(':') ? `[${w.hostname}]` : w.hostname}:${w.port}`;
    const r = (p.secure ? https.request : http.request)({
      host: p.hostname,
      port: p.port,
      method: 'CONNECT',
      path: authority,
      headers: { host: authority, ...(p.auth ? { 'proxy-authorization': basic(p.auth) } : {}) },
      signal,
    });
    r.on('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        reject(new Error(`proxy ${p.origin} refused the tunnel to ${w.origin}: HTTP ${res.statusCode}`));
        return;
      }
      resolve(socket);
    });
    r.on('error', reject);
    r.end();
  });
}

function request(
  fn: typeof http.request,
  opts: http.RequestOptions & { createConnection?: () => Socket },
  body: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const r = fn(opts, (res) => {
      // Drain the answer: only its status matters.
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end(body);
  });
}
