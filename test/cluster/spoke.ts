// Spoke control planes on demand: a second (third, …) etcd + kube-apiserver + controller-manager +
// scheduler + kwok with three fake nodes, next to the running environment, for suites that need Argo
// CD to deploy to another cluster (hub mode). Never started by `up`. Each spoke has its own
// directory under .cluster/state/spokes/<name>, logs at .cluster/logs/spoke-<name>-*.log, and an
// entry in the cluster state, so `npm run cluster -- down` stops it too. A running spoke is reused.
import { realpath, rm } from 'node:fs/promises';
import path from 'node:path';
import { readState } from './control-plane.ts';
import { probe } from './launch.ts';
import { withLock } from './lock.ts';
import type { ClusterPaths } from './paths.ts';
import { readPem } from './pki.ts';
import { startPlane } from './plane.ts';
import { isOurs, type Started, stop } from './processes.ts';
import { type SpokeState, writeSpoke } from './spoke-state.ts';

/** A DNS label short enough to prefix Secret and process names. */
const NAME = /^[a-z0-9]([-a-z0-9]{0,28}[a-z0-9])?$/;

export function checkSpokeName(name: string): string {
  if (!NAME.test(name)) throw new Error(`spoke name ${JSON.stringify(name)}: use 1-30 of a-z, 0-9 and -`);
  return name;
}

export const spokeDir = (paths: ClusterPaths, name: string) => path.join(paths.state, 'spokes', name);

/** Running means: every process alive and the API server ready to its admin. */
export async function spokeProblems(s: SpokeState): Promise<string[]> {
  const problems = s.processes
    .filter((p) => !isOurs(p))
    .map((p) => `${p.name} (pid ${p.pid}) is not running`);
  if (problems.length > 0 || !s.server) return problems.length > 0 ? problems : ['no API server yet'];
  const pki = path.join(s.dir, 'pki');
  const r = await probe({
    url: `${s.server}/readyz`,
    ca: await readPem(path.join(pki, 'ca.crt')),
    cert: await readPem(path.join(pki, 'admin.crt')),
    key: await readPem(path.join(pki, 'admin.key')),
  });
  return r.status === 200 ? [] : [`${s.server}/readyz: HTTP ${r.status} ${r.body.slice(0, 200)}`];
}

async function stopProcesses(processes: readonly Started[]): Promise<string[]> {
  const report: string[] = [];
  for (const p of [...processes].reverse()) report.push(`${p.name} (pid ${p.pid}): ${await stop(p)}`);
  return report;
}

export interface SpokeStart {
  spoke: SpokeState;
  /** Wall time of this call; 0 when a running spoke was reused. */
  seconds: number;
  reused: boolean;
}

/** Starts spoke `name`, or returns it if it already runs; a dead or half-started one is replaced. */
export async function startSpoke(
  paths: ClusterPaths,
  name: string,
  say: (msg: string) => void = () => {},
): Promise<SpokeStart> {
  checkSpokeName(name);
  return withLock(path.join(paths.state, 'spokes', `${name}.lock`), 300_000, async () => {
    const t0 = performance.now();
    const state = await readState(paths);
    if (!state) throw new Error(`no cluster state at ${paths.stateFile}: start the environment first`);
    const existing = state.spokes?.[name];
    if (existing) {
      const problems = await spokeProblems(existing);
      if (problems.length === 0) return { spoke: existing, seconds: 0, reused: true };
      say(`spoke ${name} is not healthy (${problems.join('; ')}): starting it afresh`);
      await stopProcesses(existing.processes);
    }
    // Real paths in the state: a worktree whose .cluster links the main checkout's may be removed
    // while its spoke runs, and `down` recognises a process by its binary's path (processes.ts).
    const real = { ...paths, bin: await realpath(paths.bin), state: await realpath(paths.state) };
    const dir = spokeDir(real, name);
    await rm(dir, { recursive: true, force: true });
    const entry: SpokeState = {
      name,
      startedAt: new Date().toISOString(),
      server: '',
      kubeconfig: path.join(dir, 'admin.kubeconfig'),
      dir,
      processes: [],
    };
    try {
      await startPlane({
        paths: real,
        dir,
        kubeconfig: entry.kubeconfig,
        prefix: `spoke-${name}-`,
        register: async (p) => {
          entry.processes.push(p);
          await writeSpoke(paths, name, entry);
        },
        onServer: async (server) => {
          entry.server = server;
          await writeSpoke(paths, name, entry);
        },
        say,
      });
    } catch (err) {
      await stopProcesses(entry.processes);
      await writeSpoke(paths, name, undefined);
      throw err;
    }
    const seconds = (performance.now() - t0) / 1000;
    say(`spoke ${name} up at ${entry.server} in ${seconds.toFixed(1)}s`);
    return { spoke: entry, seconds, reused: false };
  });
}

/** Stops spoke `name`'s processes and removes its directory and state entry. */
export async function stopSpoke(paths: ClusterPaths, name: string): Promise<string[]> {
  checkSpokeName(name);
  const existing = (await readState(paths))?.spokes?.[name];
  if (!existing) return [`no spoke ${name}`];
  const report = await stopProcesses(existing.processes);
  await rm(existing.dir, { recursive: true, force: true });
  await writeSpoke(paths, name, undefined);
  return report;
}
