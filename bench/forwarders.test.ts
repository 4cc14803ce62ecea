import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type Forwarders, hostPort, startForwarders } from './forwarders.ts';

/** A TCP server that answers each chunk with `<its port>:<chunk>`. */
async function echo(): Promise<{ port: number; server: net.Server }> {
  const server = net.createServer((s) => s.on('data', (d) => s.write(`${port}:${d}`)));
  const port = await new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
  );
  return { port, server };
}

function ask(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(text));
    c.once('data', (d) => {
      c.destroy();
      resolve(d.toString());
    });
    c.once('error', reject);
  });
}

describe('startForwarders', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const f of cleanups.splice(0)) await f();
  });

  it('gives each forwarder its own loopback port, all reaching the one target', async () => {
    const target = await echo();
    cleanups.push(() => new Promise((r) => target.server.close(() => r())));
    const fw: Forwarders = await startForwarders({ host: '127.0.0.1', port: target.port }, 3);
    cleanups.push(() => fw.close());
    const ports = fw.list.map((f) => f.port);
    expect(new Set(ports).size).toBe(3);
    expect(ports).not.toContain(target.port);
    expect(fw.list.map((f) => f.url)).toEqual(ports.map((p) => `https://127.0.0.1:${p}`));
    for (const p of ports) expect(await ask(p, `via ${p}`)).toBe(`${target.port}:via ${p}`);
    expect(fw.connections()).toBe(3);
  });

  it('close ends open connections and stops listening', async () => {
    const target = await echo();
    cleanups.push(() => new Promise((r) => target.server.close(() => r())));
    const fw = await startForwarders({ host: '127.0.0.1', port: target.port }, 1);
    const port = (fw.list[0] as { port: number }).port;
    const open = net.connect(port, '127.0.0.1');
    await new Promise((r) => open.once('connect', r));
    const closed = new Promise((r) => open.once('close', r));
    await fw.close();
    await closed;
    await expect(ask(port, 'x')).rejects.toThrow(/ECONNREFUSED/);
  });
});

describe('hostPort', () => {
  it('reads host and port, with the scheme default and without IPv6 brackets', () => {
    expect(hostPort('https://127.0.0.1:6443')).toEqual({ host: '127.0.0.1', port: 6443 });
    expect(hostPort('https://api.example.com')).toEqual({ host: 'api.example.com', port: 443 });
    expect(hostPort('https://[::1]:8443/')).toEqual({ host: '::1', port: 8443 });
  });
});
