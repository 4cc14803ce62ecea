// A counting proxy between the service and the API server, so the bench knows exactly which requests
// the service sent without touching the shared control plane (no audit log needed). The service gets
// a kubeconfig for http://127.0.0.1:<port>; the proxy forwards every request over TLS with the
// bench's own credentials and counts it by verb and resource, as an audit log would.
//
// Runs as its own process (`node bench/api-proxy.ts <kubeconfig>`), so its work never competes with
// the bench's event loop; it prints {"port":N} once listening and serves its counts on /__bench/counts.
import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';

export type Counts = Record<string, number>;

const COUNTS_PATH = '/__bench/counts';

/**
 * The audit-style verb and resource of a request: `list configmaps`, `watch pods`, `create
 * pods/eviction`, `update leases`, `get /apis` (discovery).
 */
export function classify(method: string, url: string): string {
  const u = new URL(url, 'http://x');
  const parts = u.pathname.split('/').filter(Boolean);
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) rest = parts.slice(2);
  else if (parts[0] === 'apis' && parts.length >= 3) rest = parts.slice(3);
  else return `${method.toLowerCase()} discovery`;
  if (rest.length === 0) return `${method.toLowerCase()} discovery`;
  let resource: string | undefined;
  let name: string | undefined;
  let sub: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) [, , resource, name, sub] = rest;
  else if (rest[0] === 'watch') return `watch ${rest.at(-1)}`;
  else [resource, name, sub] = rest;
  const what = `${resource}${sub ? `/${sub}` : ''}`;
  const watch = u.searchParams.get('watch');
  switch (method) {
    case 'GET':
      if (watch === 'true' || watch === '1') return `watch ${what}`;
      return `${name ? 'get' : 'list'} ${what}`;
    case 'POST':
      return `create ${what}`;
    case 'PUT':
      return `update ${what}`;
    case 'PATCH':
      return `patch ${what}`;
    case 'DELETE':
      return `${name ? 'delete' : 'deletecollection'} ${what}`;
    default:
      return `${method.toLowerCase()} ${what}`;
  }
}

/** Sums counts whose key passes `keep`. */
export function total(c: Counts, keep: (key: string) => boolean = () => true): number {
  return Object.entries(c).reduce((n, [k, v]) => (keep(k) ? n + v : n), 0);
}

export function diff(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'host',
]);

async function serveProxy(kubeconfig: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error(`${kubeconfig} has no current cluster`);
  const upstream = new URL(server);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const agent = new https.Agent({
    keepAlive: true,
    ca: opts.ca,
    cert: opts.cert,
    key: opts.key,
    rejectUnauthorized: opts.rejectUnauthorized,
  });
  const auth = (opts.headers ?? {}) as Record<string, string>;
  const counts: Counts = {};

  const proxy = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === COUNTS_PATH) {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(counts));
      return;
    }
    const key = classify(req.method ?? 'GET', url);
    counts[key] = (counts[key] ?? 0) + 1;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers))
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    const up = https.request(
      {
        protocol: 'https:',
        hostname: upstream.hostname,
        port: upstream.port || 443,
        path: upstream.pathname.replace(/\/+$/, '') + url,
        method: req.method,
        headers: { ...headers, ...auth },
        agent,
      },
      (upRes) => {
        const out: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(upRes.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
        res.writeHead(upRes.statusCode ?? 502, out);
        res.flushHeaders();
        upRes.pipe(res);
        upRes.on('error', () => res.destroy());
      },
    );
    up.on('error', (err) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`bench proxy: ${err.message}\n`);
      } else res.destroy();
    });
    // The service hung up (an aborted watch): drop the upstream request too.
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    req.pipe(up);
  });
  proxy.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const port = (proxy.address() as { port: number }).port;
  process.stdout.write(`${JSON.stringify({ port })}\n`);
  process.on('SIGTERM', () => process.exit(0));
}

export interface ApiProxy {
  /** A kubeconfig (YAML text) that points at the proxy. */
  kubeconfig: string;
  counts(): Promise<Counts>;
  stop(): Promise<void>;
}

/** Starts the proxy process for the bench and waits until it listens. */
export async function startApiProxy(upstreamKubeconfig: string): Promise<ApiProxy> {
  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url), upstreamKubeconfig], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      const line = buf.split('\n')[0];
      if (buf.includes('\n') && line) {
        try {
          resolve((JSON.parse(line) as { port: number }).port);
        } catch (err) {
          reject(err);
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`the API proxy exited (${code}) before listening`)));
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    kubeconfig: [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: bench-proxy`,
      '  cluster:',
      `    server: ${base}`,
      // Plain HTTP on loopback; client-node only accepts http:// with this set.
      '    insecure-skip-tls-verify: true',
      'users:',
      '- name: bench',
      '  user: {}',
      'contexts:',
      '- name: bench-proxy',
      '  context: {cluster: bench-proxy, user: bench}',
      'current-context: bench-proxy',
      '',
    ].join('\n'),
    counts: async () => {
      const r = await fetch(`${base}${COUNTS_PATH}`);
      return (await r.json()) as Counts;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node bench/api-proxy.ts <kubeconfig>\n');
    process.exit(2);
  }
  serveProxy(file).catch((err: unknown) => {
    process.stderr.write(`bench api-proxy: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
