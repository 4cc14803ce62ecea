// The Flux event endpoint served for real on 127.0.0.1 (standalone, until the service's HTTP server
// mounts it), fed the requests notification-controller v1.9.0 really sent (testdata, captured by
// testdata/capture/capture.sh from its event server and internal/notifier/forwarder.go: X-Signature
// "sha256=<hex>" keyed with the Secret token untrimmed; a `generic` Provider's Authorization from
// the Secret's `headers`): signatures, bearer tokens, token rotation, limits, validation, logs.
import { createHmac } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import express from 'express';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../log.ts';
import { MAX_BODY_BYTES } from '../webhook-http.ts';
import type { FluxEvent } from './event.ts';
import { FIXTURE_TOKEN, type Forwarded, forwarded } from './testdata/forwarded.ts';
import { FLUX_WEBHOOK_PATH, type FluxNotifyResult, fluxWebhookRouter } from './webhook.ts';

let server: Server;
let url: string;
let tokenFile: string;
let dir: string;
const received: FluxEvent[] = [];
const seen = new Set<string>();
const logLines: string[] = [];
let failNotify = false;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'gr-flux-webhook-'));
  tokenFile = path.join(dir, 'token');
  const sink = new Writable({
    write(chunk, _enc, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const app = express();
  app.use(
    fluxWebhookRouter({
      tokenFile,
      log: createLogger('debug', sink),
      notify: async (e): Promise<FluxNotifyResult> => {
        if (failNotify) throw new Error('connect ECONNREFUSED');
        const key = `${e.object.kind}/${e.object.namespace}/${e.object.name}@${e.revision}#${e.reason}#${e.message}`;
        if (seen.has(key)) return { outcome: 'duplicate' };
        seen.add(key);
        received.push(e);
        return { outcome: 'accepted', action: `${e.changes.length} changes` };
      },
    }),
  );
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${FLUX_WEBHOOK_PATH}`;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  await rm(dir, { recursive: true, force: true });
});

beforeEach(async () => {
  // As `kubectl create secret generic --from-file=token=...` mounts it: with a final newline.
  await writeFile(tokenFile, `${FIXTURE_TOKEN}\n`);
  failNotify = false;
  seen.clear();
});

async function post(body: string | Uint8Array | undefined, headers: Record<string, string>, method = 'POST') {
  const res = await fetch(url, { method, headers, body });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, headers: res.headers };
}

/** Replays a captured delivery as notification-controller sent it, with header overrides. */
const replay = (f: Forwarded, headers: Record<string, string | undefined> = {}, body: string = f.body) => {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...f.headers, ...headers })) if (v !== undefined) h[k] = v;
  return post(body, h);
};

const hmac = (key: string, body: string | Buffer, algorithm = 'sha256') =>
  createHmac(algorithm, key).update(body).digest('hex');

/** A body signed with the token as Flux would (the algorithm is checked against the fixture below). */
const signed = (body: string, key = FIXTURE_TOKEN) => ({
  'content-type': 'application/json',
  'x-signature': `sha256=${hmac(key, body)}`,
});

const apply = () => forwarded('kustomization-apply', '/hmac');

describe('Flux event webhook', () => {
  describe('generic-hmac', () => {
    it('accepts an apply event with its real signature, and hands over the parsed event', async () => {
      const before = received.length;
      const r = await replay(apply());
      expect(r.status).toBe(202);
      expect(r.json).toEqual({ outcome: 'accepted', action: '5 changes' });
      expect(received).toHaveLength(before + 1);
      expect(received.at(-1)).toMatchObject({
        object: { kind: 'Kustomization', namespace: 'flux-system', name: 'apps' },
        revision: 'main@sha1:3c1f0e2d9b8a7c6d5e4f3a2b1c0d9e8f7a6b5c4d',
      });
    });

    it('accepts every captured Kustomization and HelmRelease delivery', async () => {
      for (const name of [
        'kustomization-prune',
        'kustomization-failed',
        'kustomization-finished',
        'helmrelease-upgrade',
      ]) {
        const r = await replay(forwarded(name, '/hmac'));
        expect([name, r.status, r.json.outcome]).toEqual([name, 202, 'accepted']);
      }
    });

    it('signs as the fixture proves Flux does: HMAC-SHA256 of the exact body, lower-case hex', () => {
      const f = apply();
      expect(f.headers['X-Signature']).toBe(`sha256=${hmac(FIXTURE_TOKEN, f.body)}`);
    });

    it('answers a duplicate delivery with 202 duplicate, and hands it over once', async () => {
      const before = received.length;
      expect((await replay(apply())).json).toEqual({ outcome: 'accepted', action: '5 changes' });
      const again = await replay(apply());
      expect(again.status).toBe(202);
      expect(again.json).toEqual({ outcome: 'duplicate' });
      expect(received).toHaveLength(before + 1);
    });

    it('answers 202 ignored to a GitRepository event, without handing it over', async () => {
      const before = received.length;
      const r = await replay(forwarded('gitrepository-stored', '/hmac'));
      expect(r.status).toBe(202);
      expect(r.json).toEqual({
        outcome: 'ignored',
        why: 'a GitRepository is not a Kustomization or HelmRelease',
      });
      expect(received).toHaveLength(before);
    });

    it('keys the HMAC with the token file exactly as mounted from the Secret, final newline included', async () => {
      // /hmac-nl: the Provider Secret's token ends in "\n", and Flux signs with it untrimmed.
      expect((await replay(forwarded('kustomization-prune', '/hmac-nl'))).status).toBe(202);
      // A token file without the newline is another key for that signature...
      await writeFile(tokenFile, FIXTURE_TOKEN);
      expect((await replay(forwarded('kustomization-finished', '/hmac-nl'))).status).toBe(401);
      // ...but still the key of a Secret token without one.
      expect((await replay(forwarded('kustomization-finished', '/hmac'))).status).toBe(202);
    });

    it.each([
      ['one hex digit changed', (s: string) => s.replace(/.$/, (c) => (c === '0' ? '1' : '0'))],
      ['a truncated signature', (s: string) => s.slice(0, -2)],
      ['a signature with an extra digit', (s: string) => `${s}0`],
      ['no hex at all', () => 'sha256='],
      ['non-hex characters', (s: string) => s.replace(/[0-9a-f]{4}$/, 'zzzz')],
      ['a colon instead of =', (s: string) => s.replace('sha256=', 'sha256:')],
      ['no algorithm', (s: string) => s.replace('sha256=', '')],
      ['two signatures', (s: string) => `${s}, ${s}`],
    ])('answers 401 to %s', async (_what, mutate) => {
      const before = received.length;
      const f = apply();
      const r = await replay(f, { 'X-Signature': mutate(f.headers['X-Signature'] as string) });
      expect(r.status).toBe(401);
      expect(received).toHaveLength(before);
    });

    it.each([
      ['sha1', 'sha1'],
      ['sha384', 'sha384'],
      ['sha512', 'sha512'],
      ['md5', 'md5'],
    ])(
      'answers 401 to a correct HMAC with the %s prefix: Flux only sends sha256',
      async (prefix, algorithm) => {
        const f = apply();
        const r = await replay(f, { 'X-Signature': `${prefix}=${hmac(FIXTURE_TOKEN, f.body, algorithm)}` });
        expect(r.status).toBe(401);
        expect(r.json.error).toMatch(/sha256/);
      },
    );

    it.each([['sha1'], ['sha512'], ['hmac-sha256'], ['SHA-256']])(
      'answers 401 to the right HMAC-SHA256 labelled %s',
      async (label) => {
        const f = apply();
        const r = await replay(f, { 'X-Signature': `${label}=${hmac(FIXTURE_TOKEN, f.body)}` });
        expect(r.status).toBe(401);
      },
    );

    it('answers 401 to the signature of a different body', async () => {
      const prune = forwarded('kustomization-prune', '/hmac');
      const r = await replay(apply(), { 'X-Signature': prune.headers['X-Signature'] });
      expect(r.status).toBe(401);
    });

    it('answers 401 to the same event re-serialized: the signature covers the raw bytes', async () => {
      // Go wrote \u003cnil\u003e \u0026; JSON.stringify writes <nil> &. Same JSON value, other bytes.
      const f = forwarded('kustomization-failed', '/hmac');
      const reserialized = JSON.stringify(JSON.parse(f.body));
      expect(reserialized).not.toBe(f.body);
      expect((await replay(f, {}, reserialized)).status).toBe(401);
      expect((await replay(f)).status).toBe(202);
    });

    it('answers 401 to a signature made with another token', async () => {
      const body = apply().body;
      expect((await post(body, signed(body, 'not-the-token'))).status).toBe(401);
      expect((await post(body, signed(body, `${FIXTURE_TOKEN}x`))).status).toBe(401);
    });

    it('lets a bad signature win over a good bearer token', async () => {
      const f = apply();
      const r = await replay(f, {
        'X-Signature': `sha256=${'0'.repeat(64)}`,
        Authorization: `Bearer ${FIXTURE_TOKEN}`,
      });
      expect(r.status).toBe(401);
    });

    it('answers 401 without X-Signature or Authorization', async () => {
      const r = await replay(apply(), { 'X-Signature': undefined });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it('takes a rotated token at the next request', async () => {
      const body = forwarded('kustomization-finished', '/hmac').body;
      expect((await post(body, signed(body))).status).toBe(202);
      seen.clear();
      await writeFile(tokenFile, 'a-new-token-after-rotation\n');
      expect((await post(body, signed(body))).status).toBe(401);
      expect((await post(body, signed(body, 'a-new-token-after-rotation'))).status).toBe(202);
    });
  });

  describe('generic with an Authorization header', () => {
    it('accepts the bearer token a generic Provider sends from its Secret headers', async () => {
      const f = forwarded('helmrelease-upgrade', '/bearer');
      expect(f.headers.Authorization).toBe(`Bearer ${FIXTURE_TOKEN}`);
      expect(f.headers['X-Signature']).toBeUndefined();
      const r = await replay(f);
      expect(r.status).toBe(202);
      expect(received.at(-1)?.object).toEqual({ kind: 'HelmRelease', namespace: 'team-a', name: 'web' });
    });

    it.each([
      ['a wrong token', 'Bearer not-the-token'],
      ['a prefix of the token', `Bearer ${FIXTURE_TOKEN.slice(0, 8)}`],
      ['the token plus a suffix', `Bearer ${FIXTURE_TOKEN}0`],
      ['an empty bearer token', 'Bearer '],
      ['the token without the scheme', FIXTURE_TOKEN],
      ['basic auth', `Basic ${Buffer.from(`x:${FIXTURE_TOKEN}`).toString('base64')}`],
      ['two tokens', `Bearer ${FIXTURE_TOKEN} ${FIXTURE_TOKEN}`],
    ])('answers 401 to %s', async (_what, authorization) => {
      const r = await replay(forwarded('helmrelease-upgrade', '/bearer'), { Authorization: authorization });
      expect(r.status).toBe(401);
    });

    it('checks the bearer token before reading the body', async () => {
      const r = await post('x'.repeat(2 * MAX_BODY_BYTES), {
        'content-type': 'application/json',
        authorization: 'Bearer wrong',
      });
      expect(r.status).toBe(401);
    });

    it('takes a rotated token at the next request', async () => {
      const f = forwarded('kustomization-prune', '/bearer');
      await writeFile(tokenFile, 'rotated\n');
      expect((await replay(f)).status).toBe(401);
      expect((await replay(f, { Authorization: 'Bearer rotated' })).status).toBe(202);
    });
  });

  describe('the token file', () => {
    it.each([
      ['empty', ''],
      ['only whitespace', ' \n\n'],
    ])('answers 500 when it is %s, whatever the request carries', async (_what, content) => {
      await writeFile(tokenFile, content);
      const hmacReq = await replay(apply());
      expect(hmacReq.status).toBe(500);
      expect(hmacReq.json.error).toMatch(/token is not available/);
      // An empty token would make every "Bearer " and every HMAC keyed with "" valid.
      const body = apply().body;
      expect((await post(body, signed(body, ''))).status).toBe(500);
      expect(
        (await post(body, { 'content-type': 'application/json', authorization: 'Bearer ' })).status,
      ).toBe(500);
    });

    it('answers 500 when it cannot be read, and logs why without the token', async () => {
      await rm(tokenFile);
      const r = await replay(apply());
      expect(r.status).toBe(500);
      expect(logLines.some((l) => l.includes('cannot read --flux-webhook-token-file'))).toBe(true);
    });
  });

  describe('limits and content type', () => {
    /** A valid event padded in its message to `size` bytes, signed. */
    function padded(size: number) {
      const base = JSON.parse(forwarded('kustomization-finished', '/hmac').body);
      const empty = JSON.stringify({ ...base, message: '' });
      const body = JSON.stringify({ ...base, message: 'x'.repeat(size - empty.length) });
      expect(Buffer.byteLength(body)).toBe(size);
      return body;
    }

    it('accepts a signed body of exactly 1 MiB, and answers 413 to one byte more', async () => {
      const ok = padded(MAX_BODY_BYTES);
      expect((await post(ok, signed(ok))).status).toBe(202);
      const over = padded(MAX_BODY_BYTES + 1);
      expect((await post(over, signed(over))).status).toBe(413);
    });

    it('answers 413 to 5 MiB, signed or with a bearer token', async () => {
      const huge = padded(5 * MAX_BODY_BYTES);
      expect((await post(huge, signed(huge))).status).toBe(413);
      const bearer = { 'content-type': 'application/json', authorization: `Bearer ${FIXTURE_TOKEN}` };
      expect((await post(huge, bearer)).status).toBe(413);
    });

    it.each([
      ['text/plain'],
      ['application/x-www-form-urlencoded'],
      ['application/xml'],
      ['multipart/form-data; boundary=x'],
      ['application/json; charset=latin1'],
    ])('answers 415 to %s, signed', async (type) => {
      const body = apply().body;
      expect((await post(body, { ...signed(body), 'content-type': type })).status).toBe(415);
    });

    it('accepts application/json with a UTF-8 charset', async () => {
      const body = forwarded('kustomization-prune', '/hmac').body;
      const r = await post(body, { ...signed(body), 'content-type': 'application/json; charset=utf-8' });
      expect(r.status).toBe(202);
    });

    it('answers 415 to a body without a content type', async () => {
      const body = apply().body;
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'x-signature': signed(body)['x-signature'] },
        body: new Uint8Array(Buffer.from(body)),
      });
      expect(res.status).toBe(415);
    });

    it('answers 415 to a compressed body', async () => {
      const body = apply().body;
      expect((await post(body, { ...signed(body), 'content-encoding': 'gzip' })).status).toBe(415);
    });

    it('does not answer 415 before the signature is checked', async () => {
      const body = apply().body;
      const r = await post(body, { 'content-type': 'text/plain', 'x-signature': `sha256=${'0'.repeat(64)}` });
      expect(r.status).toBe(401);
    });

    it('answers 405 to other methods', async () => {
      const r = await post(undefined, { authorization: `Bearer ${FIXTURE_TOKEN}` }, 'GET');
      expect(r.status).toBe(405);
      expect(r.headers.get('allow')).toBe('POST');
    });
  });

  describe('validation', () => {
    it.each([
      ['malformed JSON', '{"involvedObject": ', '(body)'],
      ['a trailing comma', '{"severity": "info",}', '(body)'],
      ['an empty body', '', '(body)'],
      ['JSON null', 'null', '(body)'],
      ['a JSON array', '[]', '(body)'],
      ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), '(body)'],
      ['a byte-order mark and garbage', '\ufeff{', '(body)'],
      [
        'an upper-case Kustomization name',
        apply().body.replace('"name":"apps"', '"name":"Apps"'),
        'involvedObject.name',
      ],
      ['an unknown severity', apply().body.replace('"severity":"info"', '"severity":"debug"'), 'severity'],
      ['no timestamp', apply().body.replace('"timestamp":"2026-12-04T22:41:07Z",', ''), 'timestamp'],
    ])('answers 400 naming the field for %s, signed', async (_what, body, fieldName) => {
      const before = received.length;
      const raw = typeof body === 'string' ? Buffer.from(body) : body;
      const r = await post(new Uint8Array(raw), {
        'content-type': 'application/json',
        'x-signature': `sha256=${hmac(FIXTURE_TOKEN, raw)}`,
      });
      expect(r.status).toBe(400);
      expect(r.json.field).toBe(fieldName);
      expect(typeof r.json.error).toBe('string');
      expect(received).toHaveLength(before);
    });

    it('answers 400 to a malformed body behind a good bearer token', async () => {
      const r = await post('{"involvedObject":', {
        'content-type': 'application/json',
        authorization: `Bearer ${FIXTURE_TOKEN}`,
      });
      expect(r.status).toBe(400);
      expect(r.json.field).toBe('(body)');
    });
  });

  it('answers 503 with Retry-After when the event could not be recorded', async () => {
    failNotify = true;
    const r = await replay(apply());
    expect(r.status).toBe(503);
    expect(r.headers.get('retry-after')).toBe('10');
  });

  it('never logs the token nor the event message', () => {
    // Runs last: every request above went through the same logger.
    expect(logLines.length).toBeGreaterThan(20);
    const all = logLines.join('');
    expect(all).toContain('Flux event accepted');
    expect(all).not.toContain(FIXTURE_TOKEN);
    expect(all).not.toContain('rotation');
    expect(all).not.toContain('web-config configured');
    expect(all).not.toContain('dry-run failed');
  });
});
