// A tiny forward HTTP proxy on loopback, for tests of clients that must go through one: absolute-form
// requests (http://host/path in the request line) are forwarded, CONNECT opens a TCP tunnel. It
// records what it was asked, so a test can tell the client used it, and can require credentials.
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';

export interface HttpProxy {
  url: string;
  /** "POST http://127.0.0.1:1234/x" or "CONNECT 127.0.0.1:1234", in order. */
  seen: string[];
  /** The Proxy-Authorization header of each request, in order. */
  auth: (string | undefined)[];
  close(): Promise<void>;
}

/** Starts the proxy; with `credentials` ("user:password") it answers 407 to any request without them. */
export async function startHttpProxy(credentials?: string): Promise<HttpProxy> {
  const seen: string[] = [];
  const auth: (string | undefined)[] = [];
  const expected = credentials ? `Basic ${Buffer.from(credentials).toString('base64')}` : undefined;
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    auth.push(req.headers['proxy-authorization']);
    if (expected && req.headers['proxy-authorization'] !== expected) {
      res.writeHead(407).end();
      req.resume();
      return;
    }
    const target = new URL(req.url ?? '');
    const { 'proxy-authorization': _, ...headers } = req.headers;
    const out = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: `${target.pathname}${target.search}`,
        headers,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => res.writeHead(502).end());
    req.pipe(out);
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    seen.push(`CONNECT ${req.url}`);
    auth.push(req.headers['proxy-authorization']);
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    if (expected && req.headers['proxy-authorization'] !== expected) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n');
      return;
    }
    const [host, port] = (req.url ?? '').split(/:(?=\d+$)/);
    const up = net.connect(Number(port), (host ?? '').replace(/^\[|\]$/g, ''), () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    up.on('error', () => client.destroy());
    client.on('error', () => up.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    auth,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
