import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from './log.ts';
import { hostAllowed, type StatusServer, startStatusServer } from './status-server.ts';

let server: StatusServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe('the status listener', () => {
  it('answers GET /status with the JSON, and the page with a policy that allows only its own script', async () => {
    server = await startStatusServer('127.0.0.1:0', () => ({ leader: false }), silentLogger);
    const json = await fetch(`${server.url}/status`);
    expect(json.headers.get('content-type')).toBe('application/json');
    expect(await json.json()).toEqual({ leader: false });
    const page = await fetch(`${server.url}/`);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'; script-src 'self'/);
    const html = await page.text();
    expect(html).toContain('<script src="status.js"></script>');
    const js = await (await fetch(`${server.url}/status.js`)).text();
    // Names are written as text, never parsed as markup.
    expect(js).toContain('textContent');
    expect(js).not.toContain('innerHTML');
  });

  it('refuses other methods and paths, and a status that cannot be built is a 500, not a crash', async () => {
    server = await startStatusServer(
      '127.0.0.1:0',
      () => {
        throw new Error('boom');
      },
      silentLogger,
    );
    expect((await fetch(`${server.url}/status`, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${server.url}/metrics`)).status).toBe(404);
    expect((await fetch(`${server.url}/status`)).status).toBe(500);
  });

  it('refuses a request whose Host is a DNS name (DNS rebinding through a port-forward), and accepts localhost and IP literals', async () => {
    server = await startStatusServer('127.0.0.1:0', () => ({ leader: false }), silentLogger);
    const port = new URL(server.url).port;
    const get = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/status', headers: { Host: host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await get(`attacker.example:${port}`)).toBe(421);
    expect(await get('localhost.attacker.example')).toBe(421);
    expect(await get(`localhost:${port}`)).toBe(200);
    expect(await get(`127.0.0.1:${port}`)).toBe(200);
    expect(await get(`[::1]:${port}`)).toBe(200);
  });
});

describe('hostAllowed', () => {
  it.each([
    ['localhost', true],
    ['LOCALHOST:8081', true],
    ['127.0.0.1:8081', true],
    ['10.1.2.3', true],
    ['[::1]:8081', true],
    ['[fe80::1]', true],
    ['attacker.example', false],
    ['127.0.0.1.nip.io:8081', false],
    ['localhost.attacker.example', false],
    ['', false],
    [undefined, false],
    ['[::1]x', false],
    ['localhost:80:80', false],
  ])('%j → %j', (host, ok) => {
    expect(hostAllowed(host)).toBe(ok);
  });
});
