// A loopback proxy between one service process and the real API server. To the service it is the API
// server (TLS on 127.0.0.1 with its own certificate); it forwards every request unchanged, records
// what was asked (method, path, status, when it was sent and answered), and can cut the link: a
// partition in which every open connection drops and new ones hang until healed. It can also make
// chosen responses lag: each of their chunks reaches the client a fixed time after it left the API
// server (a watch that falls behind, as one does on a loaded machine), in order. And it can lose the
// response of one chosen request: the API server gets and applies it, the client's connection drops
// before the answer (a timeout after the write landed). And it can hold the answer to one chosen
// request until the test releases it (a slow LIST, for as long as the test needs).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';

const exec = promisify(execFile);

export interface ProxiedRequest {
  method: string;
  path: string;
  /** Set once the upstream answered; undefined if it never did (cut, or still open). */
  status?: number;
  /** ms since the epoch. */
  sentAt: number;
  answeredAt?: number;
  /** When the exchange ended, answered or not (a cut drops it); after it, the request cannot land. */
  endedAt?: number;
  /** The request body, for writes of small objects (Leases), parsed as JSON when it is JSON. */
  body?: unknown;
  /** Its answer was dropped on purpose (loseResponse). */
  lost?: boolean;
  /**
   * Who asked: a digest of its Authorization header (bearerCredential gives a token's), so a test can
   * tell which credentials reached the API server without keeping them.
   */
  credential?: string;
}

const digestOf = (authorization: string) =>
  createHash('sha256').update(authorization).digest('hex').slice(0, 16);

/** What `credential` of a request that carried this bearer token is. */
export const bearerCredential = (token: string): string => digestOf(`Bearer ${token}`);

let certPromise: Promise<{ cert: string; key: string }> | undefined;

/** A self-signed certificate for 127.0.0.1, made once per test process with the openssl CLI. */
export function proxyCert(): Promise<{ cert: string; key: string }> {
  certPromise ??= (async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'gr-proxy-pki-'));
    await exec(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        'proxy.key',
        '-out',
        'proxy.crt',
        '-days',
        '2',
        '-subj',
        '/CN=gitops-reloader-test-api-proxy',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
      ],
      { cwd: dir },
    );
    return {
      cert: await readFile(path.join(dir, 'proxy.crt'), 'utf8'),
      key: await readFile(path.join(dir, 'proxy.key'), 'utf8'),
    };
  })();
  return certPromise;
}

/** The upstream API server (URL and CA) from an admin kubeconfig. */
function upstreamOf(kc: KubeConfig): { url: URL; ca?: string | Buffer } {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('no current cluster in the kubeconfig');
  const ca = cluster.caData
    ? Buffer.from(cluster.caData, 'base64')
    : cluster.caFile
      ? readFileSync(cluster.caFile)
      : undefined;
  return { url: new URL(cluster.server), ca };
}

/** Copies `from` to `to`, each chunk `ms` after it arrived (timers of equal delay fire in order). */
function delayed(from: IncomingMessage, to: ServerResponse, ms: number): void {
  from.on('data', (chunk: Buffer) => {
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk);
    }, ms);
  });
  from.on('end', () => setTimeout(() => to.end(), ms));
}

export class ApiProxy {
  readonly requests: ProxiedRequest[] = [];
  readonly #server: https.Server;
  readonly #sockets = new Set<Socket>();
  readonly #upstream: { url: URL; ca?: string | Buffer };
  readonly #agent: https.Agent;
  #cut = false;
  #lags: { match: (path: string) => boolean; ms: number }[] = [];
  #lose: ((r: ProxiedRequest) => boolean) | undefined;
  #hold: { match: (r: ProxiedRequest) => boolean; seen: () => void; released: Promise<void> } | undefined;
  /** Requests that arrived while cut, held open (a partition drops packets; it does not refuse). */
  readonly #parked = new Set<ServerResponse>();

  private constructor(server: https.Server, upstream: { url: URL; ca?: string | Buffer }) {
    this.#server = server;
    this.#upstream = upstream;
    this.#agent = new https.Agent({ keepAlive: true, ca: upstream.ca });
    server.on('connection', (s: Socket) => {
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
    });
    server.on('request', (req, res) => this.#handle(req, res));
  }

  static async start(admin: KubeConfig): Promise<ApiProxy> {
    const { cert, key } = await proxyCert();
    const server = https.createServer({ cert, key });
    const proxy = new ApiProxy(server, upstreamOf(admin));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The CA a client must trust to talk to the proxy (its own self-signed certificate). */
  async caData(): Promise<string> {
    return Buffer.from((await proxyCert()).cert).toString('base64');
  }

  /**
   * A kubeconfig that reaches the API server through this proxy as `user`'s current user (a token: a
   * proxy that ends TLS cannot pass a client certificate on).
   */
  async kubeConfigFor(user: KubeConfig): Promise<KubeConfig> {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'proxy', server: this.url, caData: await this.caData() }],
      users: user.users,
      contexts: [{ name: 'proxy', cluster: 'proxy', user: user.getCurrentUser()?.name ?? '' }],
      currentContext: 'proxy',
    });
    return kc;
  }

  /** Partitions the service from the API server: open connections drop, new requests hang. */
  cut(): void {
    this.#cut = true;
    for (const s of this.#sockets) s.destroy();
  }

  /** Ends the partition; requests held while cut are dropped (their clients time out and retry). */
  heal(): void {
    this.#cut = false;
    for (const res of this.#parked) res.socket?.destroy();
    this.#parked.clear();
  }

  /**
   * From now on, responses to requests whose path matches reach the client `ms` late, chunk by chunk
   * and in order (a lagging watch). Requests already open are not affected.
   */
  lag(match: (path: string) => boolean, ms: number): void {
    this.#lags.push({ match, ms });
  }

  /**
   * The next request that `match` accepts (its body is parsed, as in `requests`) goes to the API
   * server, which answers it; the answer is dropped and the client's connection closed. Once only.
   */
  loseResponse(match: (r: ProxiedRequest) => boolean): void {
    this.#lose = match;
  }

  /**
   * The next request that `match` accepts goes to the API server; its answer reaches the client only
   * once `release` is called. `held` resolves when that request has arrived. Once only.
   */
  hold(match: (r: ProxiedRequest) => boolean): { held: Promise<void>; release: () => void } {
    let seen!: () => void;
    let release!: () => void;
    const held = new Promise<void>((r) => {
      seen = r;
    });
    const released = new Promise<void>((r) => {
      release = r;
    });
    this.#hold = { match, seen, released };
    return { held, release };
  }

  get isCut(): boolean {
    return this.#cut;
  }

  async close(): Promise<void> {
    this.#cut = true;
    for (const s of this.#sockets) s.destroy();
    this.#agent.destroy();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.#cut) {
      this.#parked.add(res);
      res.once('close', () => this.#parked.delete(res));
      return;
    }
    const record: ProxiedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', sentAt: Date.now() };
    if (req.headers.authorization) record.credential = digestOf(req.headers.authorization);
    this.requests.push(record);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (body.length > 0 && body.length < 64 * 1024 && record.method !== 'GET') {
        try {
          record.body = JSON.parse(body.toString('utf8'));
        } catch {
          record.body = undefined;
        }
      }
      const headers = { ...req.headers, host: this.#upstream.url.host };
      const up = https.request(
        {
          protocol: this.#upstream.url.protocol,
          hostname: this.#upstream.url.hostname,
          port: this.#upstream.url.port,
          method: req.method,
          path: req.url,
          headers,
          agent: this.#agent,
        },
        (upRes) => {
          record.status = upRes.statusCode;
          record.answeredAt = Date.now();
          if (this.#lose?.(record)) {
            this.#lose = undefined;
            record.lost = true;
            upRes.resume();
            res.socket?.destroy();
            return;
          }
          const hold = this.#hold?.match(record) ? this.#hold : undefined;
          if (hold) {
            this.#hold = undefined;
            upRes.pause();
            hold.seen();
            void hold.released.then(() => this.#answer(record, upRes, res));
            return;
          }
          this.#answer(record, upRes, res);
        },
      );
      up.on('error', () => res.socket?.destroy());
      res.once('close', () => {
        record.endedAt ??= Date.now();
        up.destroy();
      });
      up.end(body);
    });
  }

  /** Passes the upstream answer on: at once, or lagging if a lag matches. */
  #answer(record: ProxiedRequest, upRes: IncomingMessage, res: ServerResponse): void {
    if (res.destroyed) return;
    res.writeHead(upRes.statusCode ?? 502, upRes.headers);
    const lag = this.#lags.find((l) => l.match(record.path))?.ms;
    if (lag === undefined) upRes.pipe(res);
    else delayed(upRes, res, lag);
    res.once('close', () => upRes.destroy());
  }
}
