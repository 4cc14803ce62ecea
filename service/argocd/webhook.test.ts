// The notification webhook served for real on 127.0.0.1 (standalone, until the service's HTTP server
// mounts it): authentication, limits, validation, idempotency. Bodies come from what the shipped
// template renders (see test/argocd/notifications.test.ts for the real notifications-engine).

import { mkdtemp, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.ts';
import { MAX_BODY_BYTES, sameSecret } from '../webhook-http.ts';
import type { NotifyResult } from './gate.ts';
import { InboxFull } from './inbox.ts';
import type { SyncNotification } from './notification.ts';
import { argocdWebhookRouter, WEBHOOK_PATH } from './webhook.ts';

const TOKEN = 'b7f3c1e9a2d84f60a1c5e7b9d3f2a4c6';

const good = {
  version: 1,
  app: { name: 'shop', namespace: 'argocd' },
  phase: 'Succeeded',
  startedAt: '2026-12-02T10:00:00Z',
  finishedAt: '2026-12-02T10:00:07Z',
  revision: '9f1c2ab',
  revisions: null,
  resources: [
    {
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      namespace: 'web',
      name: 'app-config',
      status: 'Synced',
      message: 'configmap/app-config configured',
      syncPhase: 'Sync',
    },
  ],
};

let server: Server;
let url: string;
const received: SyncNotification[] = [];
const seen = new Set<string>();

beforeAll(async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-webhook-'));
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, `${TOKEN}\n`);
  const app = express();
  app.use(
    argocdWebhookRouter({
      tokenFile,
      log: silentLogger,
      notify: async (n): Promise<NotifyResult> => {
        if (n.app.name === 'inbox-full') throw new InboxFull('500 notifications are waiting');
        if (n.app.name === 'api-down') throw new Error('connect ECONNREFUSED');
        const key = `${n.app.namespace}/${n.app.name}@${n.startedAt}`;
        if (seen.has(key)) return { outcome: 'duplicate' };
        seen.add(key);
        received.push(n);
        return { outcome: 'accepted', action: `sync ${n.phase}` };
      },
    }),
  );
  server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${WEBHOOK_PATH}`;
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
});

async function post(
  body: string | Uint8Array | undefined,
  headers: Record<string, string> = {},
  method = 'POST',
) {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
    body,
  });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, json, headers: res.headers };
}

const send = (v: unknown, headers: Record<string, string> = {}) => post(JSON.stringify(v), headers);
const withField = (patch: Record<string, unknown>) => ({ ...good, ...patch });
const withApp = (patch: Record<string, unknown>) => ({ ...good, app: { ...good.app, ...patch } });
const withResource = (patch: Record<string, unknown>) => ({
  ...good,
  resources: [{ ...good.resources[0], ...patch }],
});

describe('Argo CD notification webhook', () => {
  it('answers 429 with Retry-After when the inbox is full, and 503 when nothing could record it', async () => {
    const full = await send(withApp({ name: 'inbox-full' }));
    expect(full.status).toBe(429);
    expect(full.headers.get('retry-after')).toBe('30');
    expect(full.json.error).toMatch(/waiting/);
    const down = await send(withApp({ name: 'api-down' }));
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('10');
  });

  it('accepts a valid notification with 202, and a duplicate delivery does nothing', async () => {
    const body = withField({ startedAt: '2026-12-02T09:00:00Z' });
    const first = await send(body);
    expect(first.status).toBe(202);
    expect(first.json).toMatchObject({
      status: 'accepted',
      app: 'argocd/shop',
      startedAt: '2026-12-02T09:00:00Z',
    });
    const n = received.length;
    const again = await send(body);
    expect(again.status).toBe(202);
    expect(again.json.status).toBe('duplicate');
    expect(received).toHaveLength(n);
    expect(received.at(-1)?.resources[0]).toEqual({
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      namespace: 'web',
      name: 'app-config',
      status: 'Synced',
    });
  });

  it('accepts a charset parameter, unknown fields and nulls for optional fields', async () => {
    const r = await post(
      JSON.stringify(
        withField({ startedAt: '2026-12-02T09:01:00Z', finishedAt: null, revision: null, extra: { a: 1 } }),
      ),
      { 'content-type': 'application/json; charset=utf-8' },
    );
    expect(r.status).toBe(202);
  });

  describe('authentication', () => {
    it.each([
      ['no Authorization header', {}],
      ['an empty bearer token', { authorization: 'Bearer ' }],
      ['a wrong token', { authorization: 'Bearer not-the-token' }],
      ['the token with one character changed', { authorization: `Bearer ${TOKEN.slice(0, -1)}x` }],
      ['a prefix of the token', { authorization: `Bearer ${TOKEN.slice(0, 8)}` }],
      ['the token plus a suffix', { authorization: `Bearer ${TOKEN}0` }],
      ['basic auth', { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }],
      ['the token without the Bearer scheme', { authorization: TOKEN }],
      ['two tokens', { authorization: `Bearer ${TOKEN} ${TOKEN}` }],
    ])('answers 401 to %s', async (_what, headers) => {
      const h: Record<string, string> = { 'content-type': 'application/json', ...headers };
      const res = await fetch(url, {
        method: 'POST',
        headers: 'authorization' in headers ? h : { 'content-type': 'application/json' },
        body: JSON.stringify(good),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it('compares secrets in constant time whatever their lengths', () => {
      expect(sameSecret(TOKEN, TOKEN)).toBe(true);
      expect(sameSecret('', '')).toBe(false);
      expect(sameSecret('a', 'ab')).toBe(false);
    });

    it('checks the token before reading the body', async () => {
      const r = await post('x'.repeat(2 * MAX_BODY_BYTES), { authorization: 'Bearer wrong' });
      expect(r.status).toBe(401);
    });
  });

  describe('limits and content type', () => {
    it('answers 413 to a 5 MiB body', async () => {
      const huge = JSON.stringify(withField({ padding: 'x'.repeat(5 * 1024 * 1024) }));
      expect((await post(huge)).status).toBe(413);
    });

    it('answers 413 to a body just over 1 MiB, and accepts one just under', async () => {
      const base = JSON.stringify(withField({ startedAt: '2026-12-02T09:02:00Z', padding: '' }));
      const under = base.replace(
        '"padding":""',
        `"padding":"${'x'.repeat(MAX_BODY_BYTES - base.length - 10)}"`,
      );
      expect((await post(under)).status).toBe(202);
      const over = base.replace(
        '"padding":""',
        `"padding":"${'x'.repeat(MAX_BODY_BYTES - base.length + 10)}"`,
      );
      expect((await post(over)).status).toBe(413);
    });

    it.each([
      ['text/plain'],
      ['application/x-www-form-urlencoded'],
      ['application/xml'],
      ['multipart/form-data; boundary=x'],
    ])('answers 415 to %s', async (type) => {
      expect((await post(JSON.stringify(good), { 'content-type': type })).status).toBe(415);
    });

    it('answers 415 to a body without a content type', async () => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
        body: new Uint8Array(Buffer.from(JSON.stringify(good))),
      });
      expect(res.status).toBe(415);
    });

    it('answers 415 to a compressed body', async () => {
      expect((await post(JSON.stringify(good), { 'content-encoding': 'gzip' })).status).toBe(415);
    });

    it('answers 405 to other methods', async () => {
      const res = await fetch(url, { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(405);
    });
  });

  describe('validation', () => {
    const cases: Array<[string, string | unknown, string]> = [
      ['malformed JSON', '{"app": ', '(body)'],
      ['a trailing comma', '{"app": {"name": "a", "namespace": "b"},}', '(body)'],
      ['an empty body', '', 'app'],
      ['JSON null', 'null', '(body)'],
      ['a JSON array', '[]', '(body)'],
      ['a JSON string', '"hello"', '(body)'],
      ['a JSON number', '42', '(body)'],
      ['an unknown version', withField({ version: 2 }), 'version'],
      ['no app', withField({ app: undefined }), 'app'],
      ['app as a string', withField({ app: 'argocd/shop' }), 'app'],
      ['app as an array', withField({ app: ['shop'] }), 'app'],
      ['no app name', withApp({ name: undefined }), 'app.name'],
      ['an empty app name', withApp({ name: '' }), 'app.name'],
      ['a numeric app name', withApp({ name: 42 }), 'app.name'],
      ['an upper-case app name', withApp({ name: 'Shop' }), 'app.name'],
      ['a unicode app name', withApp({ name: 'shöp' }), 'app.name'],
      ['an emoji app name', withApp({ name: 'shop-🚀' }), 'app.name'],
      ['an app name with a slash', withApp({ name: 'a/b' }), 'app.name'],
      ['an app name with control characters', withApp({ name: 'shop\u0000' }), 'app.name'],
      ['an app name of 300 characters', withApp({ name: 'a'.repeat(300) }), 'app.name'],
      ['no app namespace', withApp({ namespace: undefined }), 'app.namespace'],
      ['a null app namespace', withApp({ namespace: null }), 'app.namespace'],
      ['an app namespace with a dot', withApp({ namespace: 'a.b' }), 'app.namespace'],
      ['a unicode app namespace', withApp({ namespace: 'ärgocd' }), 'app.namespace'],
      ['an app namespace of 64 characters', withApp({ namespace: 'a'.repeat(64) }), 'app.namespace'],
      ['no phase', withField({ phase: undefined }), 'phase'],
      ['an unknown phase', withField({ phase: 'Done' }), 'phase'],
      ['a lower-case phase', withField({ phase: 'succeeded' }), 'phase'],
      ['a numeric phase', withField({ phase: 1 }), 'phase'],
      ['no startedAt', withField({ startedAt: undefined }), 'startedAt'],
      ['an empty startedAt', withField({ startedAt: '' }), 'startedAt'],
      ['a startedAt that is not a time', withField({ startedAt: 'yesterday' }), 'startedAt'],
      ['a startedAt without a zone', withField({ startedAt: '2026-12-02T10:00:00' }), 'startedAt'],
      ['an impossible startedAt', withField({ startedAt: '2026-13-45T10:00:00Z' }), 'startedAt'],
      ['a numeric startedAt', withField({ startedAt: 1764669600 }), 'startedAt'],
      ['a finishedAt that is not a time', withField({ finishedAt: 'soon' }), 'finishedAt'],
      ['a numeric revision', withField({ revision: 123 }), 'revision'],
      ['a revision of 2000 characters', withField({ revision: 'a'.repeat(2000) }), 'revision'],
      ['revisions as a string', withField({ revisions: 'abc' }), 'revisions'],
      ['a numeric entry in revisions', withField({ revisions: ['abc', 7] }), 'revisions[1]'],
      [
        '101 revisions',
        withField({ revisions: Array.from({ length: 101 }, (_, i) => `r${i}`) }),
        'revisions',
      ],
      ['resources as an object', withField({ resources: { kind: 'ConfigMap' } }), 'resources'],
      ['a resource that is a string', withField({ resources: ['ConfigMap/web/a'] }), 'resources[0]'],
      ['a resource that is null', withField({ resources: [null] }), 'resources[0]'],
      ['a resource without a kind', withResource({ kind: undefined }), 'resources[0].kind'],
      ['a resource without a name', withResource({ name: undefined }), 'resources[0].name'],
      ['a resource with an empty name', withResource({ name: '' }), 'resources[0].name'],
      ['a resource with a numeric name', withResource({ name: 7 }), 'resources[0].name'],
      ['a resource with an object group', withResource({ group: {} }), 'resources[0].group'],
      ['a resource with a numeric namespace', withResource({ namespace: 1 }), 'resources[0].namespace'],
      ['a resource with a boolean status', withResource({ status: true }), 'resources[0].status'],
      ['a resource name with a newline', withResource({ name: 'a\nb' }), 'resources[0].name'],
      [
        'a huge resource list',
        withField({ resources: Array.from({ length: 10_001 }, () => ({ kind: 'ConfigMap', name: 'a' })) }),
        'resources',
      ],
    ];

    it.each(cases)('answers 400 naming the field for %s', async (_what, body, field) => {
      const before = received.length;
      const r = typeof body === 'string' ? await post(body) : await send(body);
      expect(r.status).toBe(400);
      expect(r.json.field).toBe(field);
      expect(typeof r.json.error).toBe('string');
      expect(received).toHaveLength(before);
    });

    it('has at least 50 bad-input cases in all', () => {
      expect(cases.length + 9 + 4 + 5).toBeGreaterThanOrEqual(50);
    });
  });

  it('still serves good notifications after all the bad ones', async () => {
    const r = await send(
      withField({ startedAt: '2026-12-02T09:59:00Z', app: { name: 'shop.v2', namespace: 'team-a' } }),
    );
    expect(r.status).toBe(202);
    expect(received.at(-1)?.app).toEqual({ namespace: 'team-a', name: 'shop.v2' });
  });
});
