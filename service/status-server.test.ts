import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from './log.ts';
import { type StatusServer, startStatusServer } from './status-server.ts';

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
});
