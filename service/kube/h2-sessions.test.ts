// The HTTP/2 sessions' liveness (docs/adr/0046), against real loopback servers with short timings: a
// server that never finishes the TLS handshake is given up, and a connection that goes silent (a
// partition: a relay between client and server stops passing bytes) is destroyed when a ping gets no
// answer, so every watch on it fails at once and is re-opened by its owner on a new connection. The
// suites that cut connections run through the tests' API proxy, which speaks HTTP/1.1, so they never
// reach this path. Measured on the 2-core machine: about 1 s.
import http2 from 'node:http2';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { proxyCert } from '../../test/support/api-proxy.ts';
import { pending, waitFor } from '../../test/support/wait-for.ts';
import { H2Sessions } from './h2-sessions.ts';

const closers: Array<() => void> = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
});

function listen(server: net.Server): Promise<number> {
  closers.push(() => server.close());
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
  );
}

/** An HTTP/2 server whose /watch answers one line and keeps the stream open. */
async function watchServer() {
  const { cert, key } = await proxyCert();
  const server = http2.createSecureServer({ cert, key });
  let pings = 0;
  const sessions = { opened: 0, closed: 0 };
  server.on('session', (s) => {
    sessions.opened++;
    s.on('ping', () => pings++);
    s.on('close', () => sessions.closed++);
  });
  server.on('stream', (stream) => {
    stream.respond({ ':status': 200 });
    stream.write('{"type":"ADDED"}\n');
  });
  server.on('session', (s) => closers.push(() => s.destroy()));
  return { port: await listen(server), pings: () => pings, sessions };
}

/** A TCP relay to `port` whose open connections can be made silent (no byte passes either way). */
async function relay(port: number) {
  const pairs: Array<{ silent: boolean; a: net.Socket; b: net.Socket }> = [];
  const server = net.createServer((a) => {
    const b = net.connect(port, '127.0.0.1');
    const pair = { silent: false, a, b };
    pairs.push(pair);
    a.on('data', (d) => pair.silent || b.write(d));
    b.on('data', (d) => pair.silent || a.write(d));
    for (const [x, y] of [
      [a, b],
      [b, a],
    ] as const) {
      x.on('error', () => y.destroy());
      x.on('close', () => y.destroy());
    }
    closers.push(() => a.destroy());
  });
  return {
    port: await listen(server),
    silence: () => {
      for (const p of pairs) p.silent = true;
    },
  };
}

async function caOf(): Promise<string> {
  return (await proxyCert()).cert;
}

/** Opens a watch stream and collects its lines and its end. */
async function openWatch(sessions: H2Sessions, port: number, stop = new AbortController()) {
  closers.push(() => stop.abort());
  const stream = await sessions.stream(
    new URL(`https://127.0.0.1:${port}`),
    { ca: await caOf() },
    {},
    '/watch',
    stop.signal,
  );
  if (stream === 'http/1.1') throw new Error('the server did not choose h2');
  const lines: string[] = [];
  const end: { err?: Error; closed: boolean } = { closed: false };
  stream.setEncoding('utf8');
  stream.on('data', (d: string) => lines.push(...d.split('\n').filter(Boolean)));
  stream.on('error', (err) => (end.err = err));
  stream.on('close', () => (end.closed = true));
  return { lines, end };
}

describe('HTTP/2 session liveness', () => {
  it('a connection that goes silent is destroyed by an unanswered ping; its watches fail, and the next one connects anew', async () => {
    const sessions = new H2Sessions({ pingEveryMs: 100, pingTimeoutMs: 200 });
    closers.push(() => sessions.closeAll());
    const server = await watchServer();
    const r = await relay(server.port);
    const w1 = await openWatch(sessions, r.port);
    const w2 = await openWatch(sessions, r.port);
    await waitFor(async () => (w1.lines.length > 0 && w2.lines.length > 0) || pending([w1.lines, w2.lines]), {
      describe: 'both watches answered',
      timeout: 10_000,
    });
    expect(sessions.open).toBe(1);
    // Answered pings keep it: three pings (more than a ping timeout) with both watches open.
    await waitFor(async () => server.pings() >= 3 || pending(server.pings()), {
      describe: 'three pings answered',
      timeout: 10_000,
    });
    expect([w1.end, w2.end, sessions.open]).toEqual([{ closed: false }, { closed: false }, 1]);
    r.silence();
    await waitFor(async () => (w1.end.closed && w2.end.closed) || pending([w1.end, w2.end]), {
      describe: 'both watches ended by the dead connection',
      timeout: 10_000,
    });
    for (const w of [w1, w2]) expect(w.end.err?.message).toBe('HTTP/2 session: no answer to a ping');
    await waitFor(async () => sessions.open === 0 || pending(sessions.open), {
      describe: 'the dead session forgotten',
      timeout: 10_000,
    });
    // A new watch of the same server opens a new connection, which works.
    const w3 = await openWatch(sessions, r.port);
    await waitFor(async () => w3.lines.length > 0 || pending(w3.lines), {
      describe: 'the new watch answered',
      timeout: 10_000,
    });
    expect(sessions.open).toBe(1);
  });

  it('a server that never finishes the TLS handshake is given up within the connect timeout', async () => {
    // Reads the client's hello and never answers it.
    const silent = net.createServer((socket) => socket.resume());
    const port = await listen(silent);
    const sessions = new H2Sessions({ connectTimeoutMs: 300 });
    const stop = new AbortController();
    const started = Date.now();
    await expect(
      sessions.stream(new URL(`https://127.0.0.1:${port}`), { ca: await caOf() }, {}, '/watch', stop.signal),
    ).rejects.toThrow(/no TLS connection to 127\.0\.0\.1:\d+ within 0\.3s/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(sessions.open).toBe(0);
    // Its connection is closed, not left open.
    const connections = () => new Promise<number>((r) => silent.getConnections((_e, n) => r(n)));
    await waitFor(async () => (await connections()) === 0 || pending(await connections()), {
      describe: 'the connection closed',
      timeout: 10_000,
    });
  });

  it('a session with no stream left is closed after the idle time; a watch opened before that reuses it', async () => {
    const sessions = new H2Sessions({ idleCloseMs: 300 });
    closers.push(() => sessions.closeAll());
    const server = await watchServer();
    const stop1 = new AbortController();
    const w1 = await openWatch(sessions, server.port, stop1);
    await waitFor(async () => w1.lines.length > 0 || pending(w1.lines), {
      describe: 'the watch answered',
      timeout: 10_000,
    });
    stop1.abort();
    await waitFor(async () => w1.end.closed || pending(w1.end), {
      describe: 'the watch ended',
      timeout: 10_000,
    });
    // Re-opened at once (a watch's re-list): the same connection.
    const stop2 = new AbortController();
    const w2 = await openWatch(sessions, server.port, stop2);
    await waitFor(async () => w2.lines.length > 0 || pending(w2.lines), {
      describe: 'the second watch answered',
      timeout: 10_000,
    });
    expect(server.sessions).toEqual({ opened: 1, closed: 0 });
    stop2.abort();
    await waitFor(async () => server.sessions.closed === 1 || pending(server.sessions), {
      describe: 'the idle session closed',
      timeout: 10_000,
    });
    expect(sessions.open).toBe(0);
  });
});
