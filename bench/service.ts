// gitops-reloader as a real child process (`node service/cli.ts serve ...`): its JSON log lines,
// stamped with when the bench read them, its readiness, and its resident memory and CPU time from /proc.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { repoRoot } from '../test/cluster/paths.ts';
import { pending, waitFor } from '../test/support/wait-for.ts';
import { cpuSeconds } from './cpu.ts';

export interface LogLine {
  level: string;
  msg: string;
  /** When the bench read the line (epoch ms). */
  seenAt: number;
  [k: string]: unknown;
}

/** The compiled service, as the image runs it (Node's type stripping alone adds ~40 MiB of RSS). */
const CLI = path.join(repoRoot, 'dist', 'service', 'cli.js');

/** Compiles the service into dist/ (tsc -p tsconfig.build.json), as the image's build stage does. */
export function buildService(): void {
  const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(repoRoot, 'tsconfig.build.json')], {
    cwd: repoRoot,
    stdio: 'inherit',
  });
}

/**
 * The node flags the image's ENTRYPOINT runs the service with (Dockerfile; keep the two in step), so
 * the bench measures what ships: the linear-time regex fallback, and young-generation
 * semi-spaces of 1 MiB (Node 24's default lets the young generation grow to 64 MiB and keep it; 8 MiB
 * still cost 13 MiB at the start-up peak with 20,000 configs: README.md, "Where the memory goes").
 */
export const SERVICE_NODE_FLAGS = [
  '--enable-experimental-regexp-engine-on-excessive-backtracks',
  '--max-semi-space-size=1',
];

const helpOf = new Map<string, string>();

/**
 * Whether the service CLI at `cli` has `flag` for `serve`. Read once per CLI: `help serve` (since
 * issue 22, `help` alone lists the commands, not the flags) and `help` (what builds before listed
 * the flags under), whichever answers.
 */
export function cliHasFlag(flag: string, cli = CLI): boolean {
  let help = helpOf.get(cli);
  if (help === undefined) {
    const read = (args: string[]) => {
      try {
        return execFileSync(process.execPath, [cli, ...args], { encoding: 'utf8', stdio: 'pipe' });
      } catch {
        return '';
      }
    };
    help = `${read(['help', 'serve'])}\n${read(['help'])}`;
    helpOf.set(cli, help);
  }
  return help.includes(flag);
}

/** Whether this build of the service has an HTTP port with /readyz. */
export function hasHttpAddressFlag(): boolean {
  return cliHasFlag('--http-address');
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

export class ServiceProcess {
  readonly proc: ChildProcess;
  readonly startedAt: number;
  readonly logs: LogLine[] = [];
  readonly text: string[] = [];
  readonly exited: Promise<number | null>;
  /** Where /readyz is served, when the service has an HTTP port. */
  readonly readyzUrl: string | undefined;
  #exitCode: number | null | undefined;
  readonly #listeners = new Set<(l: LogLine) => void>();
  readonly #file: WriteStream;

  constructor(
    args: string[],
    logFile: string,
    httpPort?: number,
    node: { extraNodeFlags?: string[]; replaceFlags?: boolean; cli?: string } = {},
  ) {
    this.#file = createWriteStream(logFile);
    const extra = httpPort !== undefined ? [`--http-address=127.0.0.1:${httpPort}`] : [];
    // The status endpoint's default is a fixed loopback port (8081), which another service on the
    // machine (a test's, another bench's) may hold: any free one, as the tests do.
    if (cliHasFlag('--status-address', node.cli ?? CLI)) extra.push('--status-address=127.0.0.1:0');
    this.readyzUrl = httpPort !== undefined ? `http://127.0.0.1:${httpPort}/readyz` : undefined;
    this.startedAt = Date.now();
    const flags = [...(node.replaceFlags ? [] : SERVICE_NODE_FLAGS), ...(node.extraNodeFlags ?? [])];
    this.proc = spawn(process.execPath, [...flags, node.cli ?? CLI, 'serve', ...args, ...extra], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    this.proc.stdout?.on('data', (d: Buffer) => {
      const seenAt = Date.now();
      this.#file.write(d);
      buf += d.toString();
      let i = buf.indexOf('\n');
      while (i >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        i = buf.indexOf('\n');
        let parsed: LogLine;
        try {
          parsed = { ...(JSON.parse(line) as { level: string; msg: string }), seenAt };
        } catch {
          this.text.push(line);
          continue;
        }
        this.logs.push(parsed);
        for (const fn of this.#listeners) fn(parsed);
      }
    });
    this.proc.stderr?.on('data', (d: Buffer) => {
      this.#file.write(d);
      this.text.push(d.toString());
    });
    this.exited = new Promise((resolve) =>
      this.proc.on('exit', (code) => {
        this.#exitCode = code;
        this.#file.end();
        resolve(code);
      }),
    );
  }

  get pid(): number {
    return this.proc.pid as number;
  }

  onLog(fn: (l: LogLine) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  #checkAlive(): void {
    if (this.#exitCode !== undefined) {
      throw new Error(`the service exited (${this.#exitCode}): ${this.text.join('\n').slice(-2000)}`);
    }
  }

  async waitForLog(
    what: string,
    match: (l: LogLine) => boolean,
    timeout = 60_000,
    from = 0,
  ): Promise<LogLine> {
    return waitFor(
      () => {
        for (let i = from; i < this.logs.length; i++) {
          const l = this.logs[i] as LogLine;
          if (match(l)) return l;
        }
        this.#checkAlive();
        return pending(this.logs.slice(-3).map((l) => l.msg));
      },
      { describe: `service log: ${what}`, timeout, interval: 20 },
    );
  }

  /**
   * Waits for readiness and returns when it was reached (epoch ms): /readyz answering 200 when the
   * service has an HTTP port, else the `time` of its 'ready' log line.
   */
  async waitReady(timeout: number): Promise<{ at: number; signal: 'readyz' | 'log' }> {
    if (this.readyzUrl) {
      const url = this.readyzUrl;
      const at = await waitFor(
        async () => {
          this.#checkAlive();
          try {
            const r = await fetch(url);
            await r.body?.cancel();
            return r.status === 200 ? Date.now() : pending(`HTTP ${r.status}`);
          } catch (err) {
            return pending((err as Error).message);
          }
        },
        { describe: '/readyz = 200', timeout, interval: 25 },
      );
      return { at, signal: 'readyz' };
    }
    const l = await this.waitForLog('ready', (x) => x.msg === 'ready', timeout);
    const t =
      typeof l.time === 'string' ? Date.parse(l.time) : typeof l.time === 'number' ? l.time : Number.NaN;
    return { at: Number.isFinite(t) ? t : l.seenAt, signal: 'log' };
  }

  /**
   * Waits until the service acts: it holds the lease and has judged every workload against the
   * ledger (its 'ready' log line, which can come after /readyz, which only says the caches synced).
   * Returns the line's own timestamp (epoch ms).
   */
  async waitActing(timeout: number): Promise<number> {
    const l = await this.waitForLog('ready (acting)', (x) => x.msg === 'ready', timeout);
    const t = typeof l.time === 'string' ? Date.parse(l.time) : Number.NaN;
    return Number.isFinite(t) ? t : l.seenAt;
  }

  /** Resident set size in MiB (VmRSS of /proc/<pid>/status). */
  rssMiB(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    if (!m) throw new Error(`no VmRSS in /proc/${this.pid}/status`);
    return Number(m[1]) / 1024;
  }

  /** CPU seconds (user + system) the process has used since it started (/proc/<pid>/stat). */
  cpuSeconds(): number {
    return cpuSeconds(this.pid);
  }

  /** SIGTERM and wait for a clean exit; SIGKILL after `graceMs`. */
  async stop(graceMs = 30_000): Promise<number | null> {
    if (this.#exitCode !== undefined) return this.#exitCode;
    this.proc.kill('SIGTERM');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  kill(): void {
    if (this.#exitCode === undefined) this.proc.kill('SIGKILL');
  }
}
