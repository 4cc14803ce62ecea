import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { pending, waitFor } from '../test/support/wait-for.ts';
import {
  countResponses,
  EventLoopLag,
  type HttpServer,
  type HttpServerOptions,
  parseHttpAddress,
  startHttpServer,
  WatchProgress,
} from './http.ts';
import { Metrics } from './metrics.ts';

const servers: HttpServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function start(o: Partial<HttpServerOptions> = {}): Promise<HttpServer> {
  const s = await startHttpServer({
    address: '127.0.0.1:0',
    metrics: new Metrics({ defaultMetrics: false }),
    isReady: () => true,
    eventLoopLagMs: () => 0,
    ...o,
  });
  servers.push(s);
  return s;
}

describe('parseHttpAddress', () => {
  it('reads every interface, IPv4, IPv6 and host names', () => {
    expect(parseHttpAddress(':8080')).toEqual({ port: 8080 });
    expect(parseHttpAddress('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseHttpAddress('[::1]:9090')).toEqual({ host: '::1', port: 9090 });
    expect(parseHttpAddress('localhost:80')).toEqual({ host: 'localhost', port: 80 });
  });

  it('rejects values without a port, with a bad port, or unbracketed IPv6, naming the flag', () => {
    for (const bad of ['8080', '', 'host:', ':70000', '::1:8080', ':http', 'a b:80']) {
      expect(() => parseHttpAddress(bad), bad).toThrow(/--http-address/);
    }
  });
});

describe('the HTTP server', () => {
  it('serves Prometheus metrics', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    metrics.setLeader(true);
    const s = await start({ metrics });
    const res = await fetch(`${s.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toMatch(/^gitops_reloader_leader 1$/m);
  });

  it('is ready only once the caches are synced, and no longer once draining', async () => {
    let ready = false;
    const s = await start({ isReady: () => ready });
    let res = await fetch(`${s.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ready: false, status: 'caches not synced' });
    ready = true;
    res = await fetch(`${s.url}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ready: true, status: 'ready' });
    s.drain();
    res = await fetch(`${s.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ready: false, status: 'shutting down' });
    // Liveness and metrics still answer while draining, so the kubelet does not kill a stopping pod.
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${s.url}/metrics`)).status).toBe(200);
  });

  it('is live while the caches are not synced: liveness does not depend on readiness', async () => {
    const s = await start({ isReady: () => false });
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });

  it("answers liveness on Stakater Reloader's path /live too", async () => {
    const s = await start();
    const res = await fetch(`${s.url}/live`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true });
  });

  it('fails liveness when the event loop was blocked longer than the limit', async () => {
    let lag = 12;
    const s = await start({ eventLoopLagMs: () => lag, maxEventLoopLagMs: 1_000 });
    let res = await fetch(`${s.url}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      ok: true,
      checks: { eventLoop: { ok: true, maxLagMs: 12, limitMs: 1_000 }, watches: { ok: true } },
    });
    lag = 4_000;
    res = await fetch(`${s.url}/healthz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { checks: { eventLoop: unknown } }).checks.eventLoop).toEqual({
      ok: false,
      maxLagMs: 4_000,
      limitMs: 1_000,
    });
  });

  it('fails liveness when a watch loop stopped progressing', async () => {
    let progressing = true;
    const s = await start({ watchesProgressing: () => progressing });
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    progressing = false;
    const res = await fetch(`${s.url}/healthz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { checks: unknown }).checks).toMatchObject({ watches: { ok: false } });
  });

  it('serves a route mounted after start, and counts its responses', async () => {
    const s = await start();
    const codes: number[] = [];
    s.routes.post(
      '/api/v1/argocd/notifications',
      countResponses((c) => codes.push(c)),
      express.json({ limit: '1kb' }),
      (req, res) => {
        if (req.get('authorization') !== 'Bearer t') {
          res.status(401).send('no');
          return;
        }
        res.status(202).json({ got: (req.body as { app?: string }).app });
      },
    );
    const url = `${s.url}/api/v1/argocd/notifications`;
    const post = (body: string, token = 't') =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body,
      });
    let res = await post('{"app":"demo"}');
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ got: 'demo' });
    expect((await post('{}', 'wrong')).status).toBe(401);
    res = await post('{not json');
    expect(res.status).toBe(400);
    expect(await res.text()).not.toMatch(/at .*\.js/); // no stack trace
    expect((await post(JSON.stringify({ app: 'x'.repeat(5_000) }))).status).toBe(413);
    expect((await fetch(`${s.url}/nothing-here`)).status).toBe(404);
    await waitFor(() => (codes.length === 4 ? codes : pending(codes)), { describe: '4 counted responses' });
    expect(codes).toEqual([202, 401, 400, 413]);
  });

  it('mount() adds middleware under a path prefix', async () => {
    const s = await start();
    s.mount('/hooks', (req, res) => {
      res.type('text/plain').send(`hook ${req.method} ${req.path}`);
    });
    expect(await (await fetch(`${s.url}/hooks/a`)).text()).toBe('hook GET /a');
  });

  it('answers 500 without details when a handler throws', async () => {
    const s = await start();
    s.routes.get('/boom', async () => {
      throw new Error('secret detail');
    });
    const res = await fetch(`${s.url}/boom`);
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('internal error\n');
  });

  it('lets a request in flight finish on close, then refuses connections', async () => {
    const s = await start({ closeTimeoutMs: 30_000 });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let arrived!: () => void;
    const inFlight = new Promise<void>((r) => (arrived = r));
    s.routes.get('/slow', async (_req, res) => {
      arrived();
      await released;
      res.send('done');
    });
    const slow = fetch(`${s.url}/slow`);
    await inFlight;
    const closed = s.close();
    expect(s.close()).toBe(closed);
    release();
    const res = await slow;
    expect(await res.text()).toBe('done');
    await closed;
    await expect(fetch(`${s.url}/healthz`)).rejects.toThrow();
  });

  it('drops a request that outlives the close timeout', async () => {
    const s = await start({ closeTimeoutMs: 50 });
    let arrived!: () => void;
    const inFlight = new Promise<void>((r) => (arrived = r));
    s.routes.get('/hang', () => arrived()); // never answers
    const hung = fetch(`${s.url}/hang`).then(
      () => 'answered',
      () => 'dropped',
    );
    await inFlight;
    await s.close();
    expect(await hung).toBe('dropped');
  });

  it('names the flag when the address cannot be bound', async () => {
    const s = await start();
    await expect(
      startHttpServer({
        address: `127.0.0.1:${s.address.port}`,
        metrics: new Metrics({ defaultMetrics: false }),
        isReady: () => true,
      }),
    ).rejects.toThrow(/cannot listen on --http-address 127\.0\.0\.1:\d+: .*EADDRINUSE/);
  });
});

describe('EventLoopLag', () => {
  it('sees a blocked event loop, and forgets it after two windows', async () => {
    const lag = new EventLoopLag({ windowMs: 200, resolutionMs: 10 });
    try {
      // The monitor records delays between its own samples: let it take a first one.
      await waitFor(() => (lag.maxLagMs() > 0 ? true : pending(0)), { describe: 'a first sample' });
      const until = performance.now() + 300;
      while (performance.now() < until) {
        // Block the event loop on purpose, as a runaway computation would.
      }
      await waitFor(() => (lag.maxLagMs() >= 250 ? true : pending(lag.maxLagMs())), {
        describe: 'a lag of at least 250 ms',
      });
      await waitFor(() => (lag.maxLagMs() < 250 ? true : pending(lag.maxLagMs())), {
        describe: 'the lag to be forgotten',
      });
    } finally {
      lag.stop();
    }
  });
});

describe('WatchProgress', () => {
  it('reports a watch that has been silent for longer than the limit', () => {
    let now = 0;
    const p = new WatchProgress(1_000, () => now);
    p.beat('/api/v1/configmaps');
    p.beat('/api/v1/secrets');
    now = 900;
    p.beat('/api/v1/secrets');
    expect(p.progressing()).toBe(true);
    now = 1_500;
    expect(p.stale()).toEqual(['/api/v1/configmaps']);
    expect(p.progressing()).toBe(false);
    p.beat('/api/v1/configmaps');
    expect(p.progressing()).toBe(true);
    now = 5_000;
    p.forget('/api/v1/configmaps');
    p.forget('/api/v1/secrets');
    expect(p.progressing()).toBe(true);
  });

  it('counts a run of failures with no success in between, and forgets it at the first success', () => {
    let now = 0;
    const p = new WatchProgress(10_000, () => now);
    p.beat('/api/v1/configmaps');
    p.failed('/api/v1/configmaps');
    now = 5_000;
    p.failed('/api/v1/configmaps');
    p.cycled('/api/v1/configmaps');
    expect(p.failing(4_000)).toEqual(['/api/v1/configmaps']);
    expect(p.progressing()).toBe(true);
    // Still failing (and still cycling) past the stale limit: stuck, for liveness.
    now = 10_001;
    p.failed('/api/v1/configmaps');
    expect(p.stale()).toEqual(['/api/v1/configmaps']);
    p.beat('/api/v1/configmaps');
    expect(p.failing(0)).toEqual([]);
    expect(p.progressing()).toBe(true);
    // One failure followed by a success counts for nothing.
    p.failed('/api/v1/secrets');
    now = 30_000;
    p.beat('/api/v1/secrets');
    p.beat('/api/v1/configmaps');
    expect(p.failing(0)).toEqual([]);
  });

  it('rejects a limit that is not positive', () => {
    expect(() => new WatchProgress(0)).toThrow(/staleAfterMs/);
  });
});
