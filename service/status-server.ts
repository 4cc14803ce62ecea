// The status endpoint (--status-address): GET /status answers what the engine does now as JSON
// (engine/status.ts), and GET / is a small page that shows it (status-page.ts). Its own listener, loopback by default, so that it is reached by port-forward
// and never through the Service that carries the Argo CD webhook: it names workloads and configs of
// every namespace, which no tenant should read. Nothing here writes. A request whose Host is a DNS
// name other than localhost is refused (DNS rebinding).

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseHttpAddress } from './http.ts';
import type { Logger } from './log.ts';
import { STATUS_HTML, STATUS_JS, STATUS_PAGE_CSP } from './status-page.ts';

/**
 * Whether a request's Host header names this listener by address: `localhost` or an IP literal, with
 * or without a port. A DNS name is refused: a page of an attacker's domain that resolves to 127.0.0.1
 * (DNS rebinding through a `kubectl port-forward`) would otherwise read the status with the browser of
 * whoever forwarded it. Pure.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (host === undefined) return false;
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return /^\[[0-9a-f:.]+\](:\d{1,5})?$/.test(h);
  const m = /^([^:]*)(:\d{1,5})?$/.exec(h);
  const name = m?.[1] ?? '';
  return name === 'localhost' || /^\d{1,3}(\.\d{1,3}){3}$/.test(name);
}

export interface StatusServer {
  url: string;
  close(): Promise<void>;
}

export async function startStatusServer(
  address: string,
  status: () => unknown,
  log: Logger,
): Promise<StatusServer> {
  const { host, port } = parseHttpAddress(address);
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (!hostAllowed(req.headers.host)) {
      res
        .writeHead(421, { 'Content-Type': 'text/plain' })
        .end('misdirected request: reach the status by localhost or an IP address\n');
      return;
    }
    if (req.method !== 'GET') {
      res.writeHead(405, { 'Content-Type': 'text/plain', Allow: 'GET' }).end('method not allowed\n');
      return;
    }
    const page = { 'Content-Security-Policy': STATUS_PAGE_CSP, 'X-Content-Type-Options': 'nosniff' };
    if (path === '/') {
      res.writeHead(200, { ...page, 'Content-Type': 'text/html; charset=utf-8' }).end(STATUS_HTML);
      return;
    }
    if (path === '/status.js') {
      res.writeHead(200, { ...page, 'Content-Type': 'text/javascript; charset=utf-8' }).end(STATUS_JS);
      return;
    }
    if (path !== '/status') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
      return;
    }
    let body: string;
    try {
      body = JSON.stringify(status());
    } catch (err) {
      log.error({ err: (err as Error).message }, 'could not build the status');
      res.writeHead(500, { 'Content-Type': 'text/plain' }).end('status unavailable\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const a = server.address() as AddressInfo;
  const url = `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
  log.info({ url }, 'status listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
