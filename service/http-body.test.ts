import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { charsetOf, type HttpError, mediaType, readJson } from './http-body.ts';

let server: Server;
let port: number;

beforeAll(async () => {
  // Answers what readJson made of the body: the value, or the HttpError's status and message.
  server = createServer((req, res) => {
    readJson(req, 64).then(
      (value) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ value }));
      },
      (err: HttpError) => {
        res.writeHead(err.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: err.message, ...err.extra }));
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
});

/** Sends `chunks` one by one with chunked transfer encoding (no Content-Length), or as one body. */
function post(chunks: string[], headers: Record<string, string> = {}, chunked = false) {
  return new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    if (!chunked) req.setHeader('content-length', Buffer.byteLength(chunks.join('')));
    for (const c of chunks) req.write(c);
    req.end();
  });
}

describe('readJson', () => {
  it('parses a JSON body, sent whole or in chunks', async () => {
    expect(await post(['{"a":1}'])).toEqual({ status: 200, body: { value: { a: 1 } } });
    expect(await post(['{"a":', '[1,', '2]}'], {}, true)).toEqual({
      status: 200,
      body: { value: { a: [1, 2] } },
    });
  });

  it('makes an empty body {}', async () => {
    expect(await post([])).toEqual({ status: 200, body: { value: {} } });
  });

  it('answers 413 when the declared length is over the limit, and when the streamed body grows over it', async () => {
    const big = JSON.stringify({ p: 'x'.repeat(100) });
    expect((await post([big])).status).toBe(413);
    const r = await post([big.slice(0, 40), big.slice(40)], {}, true);
    expect(r.status).toBe(413);
    expect(r.body.error).toBe('the body is larger than 64 bytes');
  });

  it('accepts a body of exactly the limit', async () => {
    const exact = JSON.stringify({ p: 'x'.repeat(64 - 8) });
    expect(exact).toHaveLength(64);
    expect((await post([exact])).status).toBe(200);
  });

  it('answers 400 with the field (body) to malformed JSON', async () => {
    const r = await post(['{"a":']);
    expect(r.status).toBe(400);
    expect(r.body.field).toBe('(body)');
    expect(r.body.error).toMatch(/^the body is not valid JSON: /);
  });

  it('answers 415 to a content encoding and to a charset other than UTF-8', async () => {
    expect((await post(['{}'], { 'content-encoding': 'gzip' })).status).toBe(415);
    expect((await post(['{}'], { 'content-encoding': 'identity' })).status).toBe(200);
    const latin = await post(['{}'], { 'content-type': 'application/json; charset=latin1' });
    expect(latin.status).toBe(415);
    expect(latin.body.error).toBe('unsupported charset "latin1"');
    expect((await post(['{}'], { 'content-type': 'application/json; charset="UTF-8"' })).status).toBe(200);
  });
});

describe('mediaType and charsetOf', () => {
  it('read a Content-Type header', () => {
    expect(mediaType('Application/JSON; charset=utf-8')).toBe('application/json');
    expect(mediaType(undefined)).toBe('');
    expect(mediaType(' text/plain ')).toBe('text/plain');
    expect(charsetOf('application/json; charset=UTF-8')).toBe('utf-8');
    expect(charsetOf('application/json;charset="utf-16"')).toBe('utf-16');
    expect(charsetOf('application/json')).toBeUndefined();
  });
});
