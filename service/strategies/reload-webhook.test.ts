// The reload webhook against a real HTTP server on loopback: body, signature, retries, timeout.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DELIVERY_HEADER,
  type ReloadNotice,
  redact,
  SIGNATURE_HEADER,
  sendReloadNotice,
  signature,
  WebhookDeliveryError,
} from './reload-webhook.ts';

interface Seen {
  headers: IncomingMessage['headers'];
  body: string;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A loopback server answering each request with the next handler (the last one repeats). */
async function server(
  ...answers: Array<(res: ServerResponse) => void>
): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      seen.push({ headers: req.headers, body });
      (answers[Math.min(seen.length - 1, answers.length - 1)] as (res: ServerResponse) => void)(res);
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/hooks/reload`, seen };
}

const status = (code: number) => (res: ServerResponse) => res.writeHead(code).end();
const notice: ReloadNotice = {
  event: 'reload',
  workload: { kind: 'Deployment', namespace: 'shop', name: 'web' },
  strategy: 'restart',
  changed: ['ConfigMap/app'],
  cutoff: '2026-12-03T06:00:00.000Z',
  configHash: 'abc',
  timestamp: '2026-12-03T06:00:01.000Z',
};
const key = Buffer.alloc(32, 7);
const fast = { timeoutMs: 2_000, retries: 3, backoffMs: [10] };

describe('sendReloadNotice', () => {
  it('POSTs the notice as JSON with an HMAC-SHA256 signature of the exact body', async () => {
    const { url, seen } = await server(status(204));
    const r = await sendReloadNotice({ url, key, ...fast }, notice, new AbortController().signal);
    expect(r).toEqual({ attempts: 1, status: 204 });
    expect(seen).toHaveLength(1);
    const [req] = seen as [Seen];
    expect(JSON.parse(req.body)).toEqual(notice);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers[SIGNATURE_HEADER.toLowerCase()]).toBe(`sha256=${signature(key, req.body)}`);
    // A receiver holding another key computes another signature.
    expect(signature(Buffer.alloc(32, 8), req.body)).not.toBe(signature(key, req.body));
  });

  it('sends no signature header without a key', async () => {
    const { url, seen } = await server(status(200));
    await sendReloadNotice({ url, ...fast }, notice, new AbortController().signal);
    expect(seen[0]?.headers[SIGNATURE_HEADER.toLowerCase()]).toBeUndefined();
  });

  it('retries 5xx and 429 with the same delivery id until a 2xx', async () => {
    const { url, seen } = await server(status(503), status(429), status(200));
    const retries: string[] = [];
    const r = await sendReloadNotice({ url, key, ...fast }, notice, new AbortController().signal, (_n, why) =>
      retries.push(why),
    );
    expect(r.attempts).toBe(3);
    expect(retries).toEqual(['HTTP 503', 'HTTP 429']);
    const ids = new Set(seen.map((s) => s.headers[DELIVERY_HEADER.toLowerCase()]));
    expect(ids.size).toBe(1);
  });

  it('gives up after the retries, with an error naming the URL without its query', async () => {
    const { url, seen } = await server(status(500));
    const p = sendReloadNotice(
      { url: `${url}?token=s3cret`, ...fast, retries: 2 },
      notice,
      new AbortController().signal,
    );
    await expect(p).rejects.toThrow(WebhookDeliveryError);
    await expect(p).rejects.toThrow(
      /webhook http:\/\/127\.0\.0\.1:\d+\/hooks\/reload failed after 3 attempts: HTTP 500/,
    );
    await p.catch((err: Error) => expect(err.message).not.toMatch(/s3cret/));
    expect(seen).toHaveLength(3);
  });

  it('does not retry a 4xx other than 429, nor follow a redirect', async () => {
    const bad = await server(status(400));
    await expect(
      sendReloadNotice({ url: bad.url, ...fast }, notice, new AbortController().signal),
    ).rejects.toThrow(/after 1 attempt: HTTP 400/);
    expect(bad.seen).toHaveLength(1);
    const target = await server(status(200));
    const moved = await server((res) => res.writeHead(307, { Location: target.url }).end());
    await expect(
      sendReloadNotice({ url: moved.url, ...fast }, notice, new AbortController().signal),
    ).rejects.toThrow(/HTTP 307/);
    expect(target.seen).toHaveLength(0);
  });

  it('counts a server that does not answer in time as a failed attempt', async () => {
    const { url, seen } = await server(
      () => undefined, // never answers
      status(200),
    );
    const r = await sendReloadNotice(
      { url, timeoutMs: 200, retries: 1, backoffMs: [10] },
      notice,
      new AbortController().signal,
    );
    expect(r.attempts).toBe(2);
    expect(seen).toHaveLength(2);
  });

  it('fails on a refused connection after its retries', async () => {
    const { url } = await server(status(200));
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
    await expect(
      sendReloadNotice({ url, ...fast, retries: 1 }, notice, new AbortController().signal),
    ).rejects.toThrow(/after 2 attempts: ECONNREFUSED/);
  });

  it('stops at once when the service stops', async () => {
    const { url } = await server(status(503));
    const stop = new AbortController();
    const p = sendReloadNotice(
      { url, timeoutMs: 2_000, retries: 5, backoffMs: [60_000] },
      notice,
      stop.signal,
    );
    setTimeout(() => stop.abort(new Error('stopping')), 100);
    await expect(p).rejects.toThrow('stopping');
  });
});

describe('redact', () => {
  it('drops credentials and the query', () => {
    expect(redact('https://u:p@hooks.example/x?token=t')).toBe('https://hooks.example/x');
  });
});
