// gitops-reloader as the demo runs it: `service/cli.ts serve` in a child process with a fresh hash
// key, its JSON log lines collected; stopped at clean-up.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../test/cluster/paths.ts';
import { onCleanUp } from './cleanup.ts';
import { until } from './wait.ts';

export interface DemoService {
  /** Where /metrics is served. */
  url: string;
  /** Every JSON log line so far. */
  logs: ReadonlyArray<Record<string, unknown>>;
}

/** Starts the service with `flags` (after the kubeconfig, release namespace, key and address) until ready. */
export async function startService(o: {
  kubeconfig: string;
  releaseNamespace: string;
  flags: string[];
}): Promise<DemoService> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-demo-'));
  onCleanUp(() => rm(dir, { recursive: true, force: true }));
  const keyFile = path.join(dir, 'hash.key');
  await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  const svc: ChildProcess = spawn(
    process.execPath,
    [
      path.join(repoRoot, 'service', 'cli.ts'),
      'serve',
      `--kubeconfig=${o.kubeconfig}`,
      `--release-namespace=${o.releaseNamespace}`,
      `--hash-key-file=${keyFile}`,
      '--http-address=127.0.0.1:0',
      ...o.flags,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  onCleanUp(async () => {
    if (svc.exitCode !== null || svc.signalCode !== null) return;
    const exited = new Promise((r) => svc.once('exit', r));
    svc.kill('SIGTERM');
    await exited;
  });
  const logs: Array<Record<string, unknown>> = [];
  let errText = '';
  svc.stderr?.on('data', (d: Buffer) => {
    errText += d.toString();
  });
  let buf = '';
  svc.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      try {
        logs.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
      } catch {
        // not a log line
      }
      buf = buf.slice(i + 1);
    }
  });
  // until() counts a failed check as "not yet": a service that exits fails the wait here instead.
  let ready = false;
  const exited = new Promise<never>((_, reject) =>
    svc.once('exit', (code, signal) => {
      if (!ready) reject(new Error(`the service exited (${signal ?? code}): ${errText}`));
    }),
  );
  exited.catch(() => undefined); // handled by the race below, or moot once ready
  const url = await Promise.race([
    until('the service to be ready', async () => {
      const http = logs.find((l) => l.msg === 'http listening');
      return logs.some((l) => l.msg === 'ready') && http ? String(http.url) : undefined;
    }),
    exited,
  ]);
  ready = true;
  return { url, logs };
}
