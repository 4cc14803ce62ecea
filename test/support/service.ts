// Runs gitops-reloader as a real child process (`node service/cli.ts ...`) against the test
// control plane, collects its JSON log lines, and can stop it gracefully or kill it outright.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { repoRoot } from '../cluster/paths.ts';
import { TEST_TIMINGS } from './timings.ts';
import { pending, waitFor } from './wait-for.ts';

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

export interface RunningService {
  proc: ChildProcess;
  logs: LogLine[];
  /** Non-JSON output (stderr, crash traces). */
  text: string[];
  waitForLog(what: string, match: (l: LogLine) => boolean, timeout?: number): Promise<LogLine>;
  /** SIGTERM and wait for exit; returns the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL: a crash. */
  kill(): Promise<void>;
  exited: Promise<number | null>;
}

/** A hash-key file shared by every run of one test, so restarts see the same digests. */
export async function hashKeyFile(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-key-'));
  const file = path.join(dir, 'key');
  await writeFile(file, randomBytes(32).toString('hex'), { mode: 0o600 });
  return file;
}

const running = new Set<ChildProcess>();

export function startService(args: string[], env: Record<string, string> = {}): RunningService {
  const proc = spawn(process.execPath, [path.join(repoRoot, 'service', 'cli.ts'), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(proc);
  const logs: LogLine[] = [];
  const text: string[] = [];
  let buf = '';
  // TEST_SERVICE_LOG_DIR=dir keeps each service's output in a file there, for debugging a test.
  const keep = process.env.TEST_SERVICE_LOG_DIR
    ? createWriteStream(path.join(process.env.TEST_SERVICE_LOG_DIR, `service-${Date.now()}-${proc.pid}.log`))
    : undefined;
  proc.stderr?.on('data', (d: Buffer) => keep?.write(d));
  proc.on('close', () => keep?.end());
  proc.stdout?.on('data', (d: Buffer) => {
    keep?.write(d);
    buf += d.toString();
    let i = buf.indexOf('\n');
    while (i >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        text.push(line);
      }
      i = buf.indexOf('\n');
    }
  });
  proc.stderr?.on('data', (d: Buffer) => text.push(d.toString()));
  // 'close', not 'exit': 'exit' can come before the last output is read, and a test reading the logs
  // after stop() would miss the lines written during the graceful shutdown (a reload completing then).
  const exited = new Promise<number | null>((resolve) =>
    proc.on('close', (code) => {
      running.delete(proc);
      resolve(code);
    }),
  );
  let exitCode: number | null | undefined;
  void exited.then((c) => {
    exitCode = c;
  });
  return {
    proc,
    logs,
    text,
    exited,
    waitForLog: (what, match, timeout = 30_000) =>
      waitFor(
        () => {
          const hit = logs.find(match);
          if (hit) return hit;
          if (exitCode !== undefined) {
            throw new Error(`the service exited (${exitCode}): ${text.join('').slice(-2000)}`);
          }
          return pending(logs.slice(-5).map((l) => l.msg));
        },
        { describe: `log: ${what}`, timeout },
      ),
    stop: async () => {
      if (exitCode === undefined) proc.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      if (exitCode === undefined) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** Standard flags for a service confined to one test namespace. */
export function serviceArgs(namespace: string, keyFile: string, extra: string[] = []): string[] {
  return [
    'serve',
    `--kubeconfig=${inject('kubeconfig')}`,
    `--namespaces=${namespace}`,
    `--release-namespace=${namespace}`,
    `--hash-key-file=${keyFile}`,
    '--log-level=debug',
    // Progressive reloads are on, as by default; a short settle keeps multi-workload tests quick.
    ...TEST_TIMINGS.service,
    '--http-address=127.0.0.1:0',
    '--status-address=127.0.0.1:0',
    ...extra,
  ];
}

/** Kills every service a test file left running (call from afterAll/afterEach). */
export async function killAll(): Promise<void> {
  await Promise.all(
    [...running].map(
      (p) =>
        new Promise<void>((r) => {
          p.once('exit', () => r());
          p.kill('SIGKILL');
        }),
    ),
  );
}

/** Runs one gitops-reloader command (`node service/cli.ts ...`) to its end, as a user's shell or CI would. */
export function runCli(
  args: string[],
  o: { env?: Record<string, string>; cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  // Only PATH from the test's environment: nothing else of the host (no key variable) reaches it.
  const proc = spawn(process.execPath, [path.join(repoRoot, 'service', 'cli.ts'), ...args], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...o.env },
    cwd: o.cwd ?? repoRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  proc.stdout?.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  proc.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve, reject) => {
    proc.on('error', reject);
    proc.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
