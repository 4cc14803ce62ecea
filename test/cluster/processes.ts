// Starts control-plane processes detached from the launcher and stops them again, by pid, only if
// the pid still runs the binary we started (pids get reused).
import { spawn } from 'node:child_process';
import { openSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';

export interface Started {
  name: string;
  pid: number;
  binary: string;
}

/** Exit codes of processes this launcher started and saw end (keyed by pid). */
const exits = new Map<number, number | string>();

export function startDetached(
  name: string,
  binary: string,
  args: string[],
  logFile: string,
  env?: NodeJS.ProcessEnv,
): Started {
  const out = openSync(logFile, 'a');
  const child = spawn(binary, args, {
    detached: true,
    stdio: ['ignore', out, out],
    ...(env ? { env } : {}),
  });
  if (child.pid === undefined) throw new Error(`could not start ${name} (${binary})`);
  const pid = child.pid;
  child.on('exit', (code, signal) => exits.set(pid, code ?? signal ?? 'unknown'));
  child.on('error', (err) => exits.set(pid, err.message));
  child.unref();
  return { name, pid, binary };
}

/**
 * How a process this launcher started ended, or undefined while it runs. Unlike isOurs this does not
 * read /proc: between fork and exec a child's cmdline is still the launcher's, which on a busy
 * machine made a healthy kwok look as if it had "exited during start-up".
 */
export function exitOf(p: Pick<Started, 'pid'>): number | string | undefined {
  return exits.get(p.pid);
}

/**
 * True when `pid` is alive and is the process we started from `binary`. The executable is read from
 * /proc/<pid>/exe: the command line is no proof, since some programs rewrite it.
 */
export function isOurs(p: Pick<Started, 'pid' | 'binary'>): boolean {
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
    // A zombie (state Z) has exited but not been reaped; it is not running.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z') return false;
    const exe = readlinkSync(`/proc/${p.pid}/exe`).replace(/ \(deleted\)$/, '');
    return exe === realpathSync(p.binary) || exe === p.binary;
  } catch {
    return false;
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
export async function stop(p: Started, graceMs = 10_000): Promise<'stopped' | 'killed' | 'not-running'> {
  if (!isOurs(p)) return 'not-running';
  process.kill(p.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isOurs(p)) return 'stopped';
    await pause(100);
  }
  if (isOurs(p)) process.kill(p.pid, 'SIGKILL');
  while (isOurs(p)) await pause(50);
  return 'killed';
}
