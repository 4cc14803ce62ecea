// Starts and stops the local environment: the main control plane (plane.ts: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok on loopback, three kwok-managed nodes), Argo CD and
// Flux next to it. `down` also stops the spokes started on demand (spoke.ts).
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { type ArgoCdEndpoints, removeSockets, startArgoCd } from './argocd.ts';
import { type FluxEndpoints, startFlux } from './flux.ts';
import { probe } from './launch.ts';
import type { ClusterPaths } from './paths.ts';
import { type Pki, readPem } from './pki.ts';
import { startPlane } from './plane.ts';
import { isOurs, type Started, stop } from './processes.ts';
import type { SpokeState } from './spoke-state.ts';

export interface ClusterState {
  startedAt: string;
  server: string;
  processes: Started[];
  /** Set once Argo CD, Argo Rollouts and the git server are up (see argocd.ts). */
  argocd?: ArgoCdEndpoints;
  /** Set once the Flux controllers are up (see flux.ts); they read from the Argo CD part's git server. */
  flux?: FluxEndpoints;
  /**
   * Extra control planes started on demand (spoke.ts), by name. Not part of `processes`: a spoke that
   * died does not make the main environment look dead; `down` stops them all the same.
   */
  spokes?: Record<string, SpokeState>;
}

export async function readState(paths: ClusterPaths): Promise<ClusterState | undefined> {
  if (!existsSync(paths.stateFile)) return undefined;
  return JSON.parse(await readFile(paths.stateFile, 'utf8')) as ClusterState;
}

export interface StatusReport {
  running: boolean;
  problems: string[];
  state?: ClusterState;
}

export async function status(paths: ClusterPaths): Promise<StatusReport> {
  const state = await readState(paths);
  if (!state) return { running: false, problems: ['no cluster state (.cluster/state.json)'] };
  const problems = state.processes
    .filter((p) => !isOurs(p))
    .map((p) => `${p.name} (pid ${p.pid}) is not running`);
  if (problems.length === 0) {
    const pki = path.join(paths.state, 'pki');
    const r = await probe({
      url: `${state.server}/readyz`,
      ca: await readPem(path.join(pki, 'ca.crt')),
      cert: await readPem(path.join(pki, 'admin.crt')),
      key: await readPem(path.join(pki, 'admin.key')),
    });
    if (r.status !== 200) problems.push(`kube-apiserver /readyz: HTTP ${r.status} ${r.body.slice(0, 200)}`);
  }
  return { running: problems.length === 0, problems, state };
}

export async function down(paths: ClusterPaths): Promise<string[]> {
  const state = await readState(paths);
  const report: string[] = [];
  if (state) {
    // Spokes first; then reverse start order: clients first, etcd last.
    const spokes = Object.values(state.spokes ?? {}).flatMap((s) => [...s.processes].reverse());
    for (const p of [...spokes, ...[...state.processes].reverse()]) {
      report.push(`${p.name} (pid ${p.pid}): ${await stop(p)}`);
    }
  }
  await removeSockets(state?.argocd);
  await rm(paths.state, { recursive: true, force: true });
  await rm(paths.kubeconfig, { force: true });
  await rm(paths.stateFile, { force: true });
  return report;
}

export interface UpResult {
  seconds: number;
  state: ClusterState;
  /** Parts started next to an environment that was already running without them. */
  added?: Part[];
}

/** The optional parts of the environment, in start order (Flux reads from Argo CD's git server). */
export type Part = 'argocd' | 'flux';

/** What a running environment lacks of what `options` asks for; more than asked is left running. */
export function missingParts(state: Pick<ClusterState, 'argocd' | 'flux'>, options: UpOptions = {}): Part[] {
  const missing: Part[] = [];
  if (options.argocd !== false && !state.argocd) missing.push('argocd');
  if (options.argocd !== false && options.flux !== false && !state.flux) missing.push('flux');
  return missing;
}

/**
 * Starts the missing parts next to a running control plane (one started with --no-argocd, e.g. by
 * `npm run bench`, or by a checkout without Flux). If that fails, what it started is stopped again
 * and the control plane is left as it was.
 */
async function addParts(
  paths: ClusterPaths,
  state: ClusterState,
  missing: readonly Part[],
  say: (msg: string) => void,
): Promise<UpResult> {
  const t0 = performance.now();
  say(`the running control plane lacks ${missing.join(' and ')}: starting it next to it`);
  const processes = [...state.processes];
  const added: Started[] = [];
  let next: ClusterState = state;
  const write = (s: ClusterState) => writeFile(paths.stateFile, `${JSON.stringify(s, null, 2)}\n`);
  const ctx = {
    paths,
    kubeconfig: paths.kubeconfig,
    register: async (p: Started) => {
      processes.push(p);
      added.push(p);
      await write({ ...next, processes });
    },
    say,
  };
  try {
    if (missing.includes('argocd')) next = { ...next, processes, argocd: await startArgoCd(ctx) };
    if (missing.includes('flux')) next = { ...next, processes, flux: await startFlux(ctx) };
    await write(next);
    return { seconds: (performance.now() - t0) / 1000, state: next, added: [...missing] };
  } catch (err) {
    for (const p of added.reverse()) await stop(p);
    await write(state);
    throw err;
  }
}

/**
 * The Go modules (build.ts `modules()`) whose binaries `up` runs with `options`: the control plane
 * (etcd, Kubernetes with kubectl, kwok); for Argo CD, Argo CD itself, Argo Rollouts and miniredis
 * (argocd.ts); for Flux, its controllers. Helm and gopher-lua are not among them: only the manifest
 * tests, the CMP's Helm sources and the Lua checks run them, so `npm test` builds every module.
 */
export function modulesFor(options: UpOptions = {}): string[] {
  const modules = ['etcd', 'kubernetes', 'kwok'];
  if (options.argocd === false) return modules;
  modules.push('argocd', 'rollouts', 'redis');
  if (options.flux !== false) modules.push('flux');
  return modules;
}

export interface UpOptions {
  /** Also start Argo CD, Argo Rollouts and the git server (default true). */
  argocd?: boolean;
  /** Also start the Flux controllers (default true; never without the Argo CD part's git server). */
  flux?: boolean;
}

export async function up(
  paths: ClusterPaths,
  say: (msg: string) => void,
  options: UpOptions = {},
): Promise<UpResult> {
  const t0 = performance.now();
  const current = await status(paths);
  if (current.running && current.state) {
    const missing = missingParts(current.state, options);
    if (missing.length === 0) return { seconds: 0, state: current.state };
    return addParts(paths, current.state, missing, say);
  }
  if (current.state) await down(paths); // half-dead leftovers from an earlier run

  const processes: Started[] = [];
  let argocd: ArgoCdEndpoints | undefined;
  let flux: FluxEndpoints | undefined;
  const saveState = async (server: string) => {
    const state: ClusterState = {
      startedAt: new Date().toISOString(),
      server,
      processes,
      ...(argocd ? { argocd } : {}),
      ...(flux ? { flux } : {}),
    };
    await writeFile(paths.stateFile, `${JSON.stringify(state, null, 2)}\n`);
    return state;
  };
  let server = '';
  const register = async (p: Started) => {
    processes.push(p);
    await saveState(server);
  };

  try {
    const plane = await startPlane({
      paths,
      dir: paths.state,
      kubeconfig: paths.kubeconfig,
      prefix: '',
      register,
      onServer: async (s) => {
        server = s;
        await saveState(server);
      },
      say,
    });
    server = plane.server;
    const state = await saveState(server);
    say(`control plane up at ${server} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    if (options.argocd === false) return { seconds: (performance.now() - t0) / 1000, state };
    argocd = await startArgoCd({ paths, kubeconfig: paths.kubeconfig, register, say });
    if (options.flux !== false)
      flux = await startFlux({ paths, kubeconfig: paths.kubeconfig, register, say });
    return { seconds: (performance.now() - t0) / 1000, state: await saveState(server) };
  } catch (err) {
    await down(paths);
    throw err;
  }
}

export type { Pki };
