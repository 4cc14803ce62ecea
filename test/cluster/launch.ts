// Starting one local process and waiting until it is healthy, shared by the control plane and the
// Argo CD components: free loopback ports, HTTP(S) probes, and one retry for start-up failures that
// can pass (a port taken between choosing it and binding it, a machine too busy to answer in time).
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { exitOf, type Started, startDetached, stop } from './processes.ts';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface Probe {
  url: string;
  ca?: string;
  cert?: string;
  key?: string;
}

/** GET over HTTPS (or HTTP); resolves with the status code and body, never throws. */
export function probe(p: Probe): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const url = new URL(p.url);
    const mod = url.protocol === 'https:' ? https : http;
    const opts = {
      method: 'GET',
      timeout: 2000,
      ...(p.ca ? { ca: p.ca, cert: p.cert, key: p.key } : { rejectUnauthorized: false }),
    };
    const done = (status: number, body: string) => resolve({ status, body });
    const req = mod.request(url, opts, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () => done(res.statusCode ?? 0, body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => done(0, err.message));
    req.end();
  });
}

export async function until(
  what: string,
  timeoutMs: number,
  check: () => Promise<string | true>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'not checked yet';
  while (Date.now() < deadline) {
    const r = await check();
    if (r === true) return;
    last = r;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; last seen: ${last}`);
}

/** Thrown when a process ends before it became healthy; `transient` says a retry may succeed. */
export class StartFailure extends Error {
  readonly transient: boolean;
  constructor(message: string, transient: boolean) {
    super(message);
    this.transient = transient;
  }
}

const TRANSIENT =
  /address already in use|bind: address|i\/o timeout|connection refused|context deadline exceeded/i;

async function tail(logFile: string, lines = 15): Promise<string> {
  return existsSync(logFile) ? (await readFile(logFile, 'utf8')).split('\n').slice(-lines).join('\n') : '';
}

export async function waitHealthy(
  proc: Started,
  logFile: string,
  timeoutMs: number,
  check: Probe | (() => Promise<string | true>),
): Promise<void> {
  await until(`${proc.name} to become healthy`, timeoutMs, async () => {
    const exit = exitOf(proc);
    if (exit !== undefined) {
      const end = await tail(logFile);
      throw new StartFailure(
        `${proc.name} exited during start-up (${typeof exit === 'number' ? `exit code ${exit}` : exit}); end of ${logFile}:\n${end || '(empty)'}`,
        TRANSIENT.test(end) || end.trim() === '',
      );
    }
    if (typeof check === 'function') return check();
    const r = await probe(check);
    return r.status === 200 ? true : `${check.url}: HTTP ${r.status} ${r.body.slice(0, 200)}`;
  });
}

export interface LaunchSpec {
  name: string;
  binary: string;
  logFile: string;
  /** Ports are chosen per attempt, so a retry does not reuse a port that was taken. */
  ports?: number;
  args(ports: number[]): string[];
  env?: NodeJS.ProcessEnv;
  health(ports: number[]): Probe | (() => Promise<string | true>);
  timeoutMs: number;
}

/**
 * Starts a process and waits for it to be healthy. A start that fails for a reason that can pass
 * (see StartFailure.transient) is retried once with new ports; `register` is told of every process
 * started, so a caller's state file can stop it even if start-up fails half-way.
 */
export async function launch(
  spec: LaunchSpec,
  register: (p: Started) => Promise<void>,
  say: (msg: string) => void,
): Promise<{ proc: Started; ports: number[] }> {
  for (let attempt = 1; ; attempt++) {
    const ports = await Promise.all(Array.from({ length: spec.ports ?? 0 }, () => freePort()));
    if (attempt === 1) await writeFile(spec.logFile, '');
    const proc = startDetached(spec.name, spec.binary, spec.args(ports), spec.logFile, spec.env);
    await register(proc);
    try {
      await waitHealthy(proc, spec.logFile, spec.timeoutMs, spec.health(ports));
      return { proc, ports };
    } catch (err) {
      await stop(proc, 2000);
      if (attempt < 2 && err instanceof StartFailure && err.transient) {
        say(`${spec.name} failed to start (${err.message.split('\n')[0]}); retrying once`);
        continue;
      }
      throw err;
    }
  }
}
