// The alert sender against real HTTP servers on loopback: what each sink's receiver gets, a proxy
// honoured, failures counted and logged without the webhook's secret path, and a reload's notify()
// never waiting for the POST.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpProxy } from '../../test/support/http-proxy.ts';
import { type AlertConfig, parseAlertEndpoint } from '../config/alert-flags.ts';
import type { ReloadAlert } from '../core/alert-message.ts';
import { ALERT_QUEUE_SIZE, type AlertResult, AlertSender } from './sender.ts';

interface Got {
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function receiver(status = 200): Promise<{ url: string; got: Got[] }> {
  const got: Got[] = [];
  const s: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => {
      body += d.toString();
    });
    req.on('end', () => {
      got.push({ url: req.url ?? '', headers: req.headers, body });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise((r) => s.close(() => r())));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/services/T0/B0/s3cr3t-path`, got };
}

const alert: ReloadAlert = {
  outcome: 'reloaded',
  workload: { kind: 'Deployment', namespace: 'shop', name: 'web' },
  changed: ['ConfigMap/shop/app'],
};

function sender(cfg: Partial<AlertConfig> & { url: string; proxyUrl?: string }) {
  const lines: { level: string; f: Record<string, unknown>; msg: string }[] = [];
  const counts: [string, AlertResult][] = [];
  const { url, proxyUrl, ...rest } = cfg;
  const s = new AlertSender(
    {
      sink: 'raw',
      onFailure: true,
      timeoutMs: 2_000,
      webhook: parseAlertEndpoint(url, '--alert-webhook-url'),
      ...(proxyUrl ? { proxy: parseAlertEndpoint(proxyUrl, '--alert-webhook-proxy') } : {}),
      ...rest,
    },
    {
      log: {
        info: ((f: Record<string, unknown>, msg: string) => lines.push({ level: 'info', f, msg })) as never,
        warn: ((f: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', f, msg })) as never,
      },
      count: (sink, result) => counts.push([sink, result]),
    },
  );
  return { s, lines, counts };
}

describe('AlertSender', () => {
  it('POSTs the body each sink expects to the webhook', async () => {
    for (const [sink, type, body] of [
      [
        'slack',
        'application/json',
        '{"attachments":[{"color":"good","author_name":"Reloader","text":"prod : Reloader detected changes in *app* of type *CONFIGMAP* in namespace *shop*. Hence reloaded *web* of type *Deployment* in namespace *shop*"}]}',
      ],
      [
        'teams',
        'application/json',
        '{"text":"prod : Reloader detected changes in *app* of type *CONFIGMAP* in namespace *shop*. Hence reloaded *web* of type *Deployment* in namespace *shop*"}',
      ],
      [
        'raw',
        'text/plain',
        'prod : Reloader detected changes in app of type CONFIGMAP in namespace shop. Hence reloaded web of type Deployment in namespace shop',
      ],
    ] as const) {
      const hook = await receiver();
      const { s, counts } = sender({ url: hook.url, sink, additionalInfo: 'prod' });
      s.notify(alert);
      await s.idle();
      expect(hook.got, sink).toHaveLength(1);
      expect(hook.got[0]?.url).toBe('/services/T0/B0/s3cr3t-path');
      expect(hook.got[0]?.headers['content-type']).toBe(type);
      expect(hook.got[0]?.body).toBe(body);
      expect(counts).toEqual([[sink, 'sent']]);
    }
  });

  it('goes through the proxy when one is set, with its credentials', async () => {
    const hook = await receiver();
    const proxy = await startHttpProxy('pxuser:pxpass');
    closers.push(proxy.close);
    const { s, counts } = sender({
      url: hook.url,
      proxyUrl: proxy.url.replace('http://', 'http://pxuser:pxpass@'),
    });
    s.notify(alert);
    await s.idle();
    expect(proxy.seen).toEqual([`POST ${hook.url}`]);
    expect(hook.got).toHaveLength(1);
    expect(counts).toEqual([['raw', 'sent']]);
  });

  it('counts and logs a refused alert (HTTP 500) or an unreachable webhook, never its path', async () => {
    const hook = await receiver(500);
    const failing = sender({ url: hook.url, sink: 'gchat' });
    failing.s.notify(alert);
    await failing.s.idle();
    expect(failing.counts).toEqual([['gchat', 'failed']]);
    expect(failing.lines.at(-1)).toMatchObject({ level: 'warn', msg: 'alert not accepted: HTTP 500' });

    // A port nothing listens on (the receiver, closed).
    const gone = await receiver();
    await closers.pop()?.();
    const down = sender({ url: gone.url });
    down.s.notify(alert);
    await down.s.idle();
    expect(down.counts).toEqual([['raw', 'failed']]);
    expect(down.lines.at(-1)?.msg).toBe('alert not sent');
    expect(down.lines.at(-1)?.f.err).toMatch(/ECONNREFUSED/);
    for (const l of [...failing.lines, ...down.lines]) {
      expect(JSON.stringify(l)).not.toContain('s3cr3t-path');
      expect(l.f.alertWebhook).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    }
  });

  it('gives up on a webhook that does not answer within the timeout', async () => {
    const hung = createServer(() => {});
    await new Promise<void>((r) => hung.listen(0, '127.0.0.1', r));
    closers.push(
      () =>
        new Promise((r) => {
          hung.closeAllConnections();
          hung.close(() => r());
        }),
    );
    const { s, counts, lines } = sender({
      url: `http://127.0.0.1:${(hung.address() as AddressInfo).port}/hook/s3cr3t-path`,
      timeoutMs: 200,
    });
    s.notify(alert);
    await s.idle();
    expect(counts).toEqual([['raw', 'failed']]);
    expect(lines.at(-1)?.f.err).toBe('no answer within 200ms');
  });

  it('returns from notify() at once, and drops what a full queue cannot hold', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const counts: AlertResult[] = [];
    const posted: string[] = [];
    const s = new AlertSender(
      {
        sink: 'raw',
        onFailure: true,
        timeoutMs: 1_000,
        webhook: parseAlertEndpoint('http://127.0.0.1:1/x', 'w'),
      },
      {
        log: { info: (() => {}) as never, warn: (() => {}) as never },
        count: (_, r) => counts.push(r),
        post: async (_, req) => {
          posted.push(req.body);
          await held;
          return 200;
        },
      },
    );
    const started = performance.now();
    for (let i = 0; i < ALERT_QUEUE_SIZE + 3; i++) s.notify({ ...alert, changed: [`ConfigMap/shop/c${i}`] });
    expect(performance.now() - started).toBeLessThan(100);
    // One in flight, ALERT_QUEUE_SIZE waiting, the rest dropped.
    expect(counts).toEqual(['dropped', 'dropped']);
    release();
    await s.idle();
    expect(posted).toHaveLength(ALERT_QUEUE_SIZE + 1);
    expect(counts.filter((r) => r === 'sent')).toHaveLength(ALERT_QUEUE_SIZE + 1);
  });

  it('sends failed attempts unless --alert-on-failure=false', async () => {
    const hook = await receiver();
    const on = sender({ url: hook.url });
    on.s.notify({ ...alert, outcome: 'failed', error: 'boom' });
    await on.s.idle();
    expect(hook.got[0]?.body).toContain('Reloading web of type Deployment in namespace shop failed: boom');
    const off = sender({ url: hook.url, onFailure: false });
    off.s.notify({ ...alert, outcome: 'failed', error: 'boom' });
    await off.s.idle();
    expect(hook.got).toHaveLength(1);
    expect(off.counts).toEqual([]);
  });
});
