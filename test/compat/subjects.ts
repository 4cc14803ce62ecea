// The tool a compatibility run judges: gitops-reloader (a child process, as every integration suite
// runs it), or a peer binary given on the command line (Stakater Reloader v1.4.21, built by
// ../shared/peers/reloader/build.sh; optional, never needed by `npm test`). Both run with the flags
// Reloader's own e2e suite uses: --reload-on-create=true --reload-on-delete=true.
import { type ChildProcess, spawn } from 'node:child_process';
import { inject } from 'vitest';
import { decidedNoReload } from '../support/decisions.ts';
import { hashKeyFile, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import type { Change } from './scenarios.ts';

export interface Subject {
  /** For the table: `gitops-reloader` or the peer's name. */
  readonly name: string;
  /** Starts acting on `namespaces` (each labelled `selector`); resolves once it acts on changes. */
  start(o: { namespaces: string[]; releaseNamespace: string; selector: string }): Promise<void>;
  /**
   * Resolves once the tool has decided not to reload `workload` (Kind/ns/name) for `change`. A tool
   * that logs no such decision (Reloader logs only what it does) gets `graceMs` after the positive
   * scenarios were seen done: the only judgement a black box allows, and said in the table.
   */
  decidedNoReload(change: Change, workload: string): Promise<void>;
  stop(): Promise<void>;
}

export const COMPAT_FLAGS = ['--reload-on-create=true', '--reload-on-delete=true'];

export function gitopsReloader(): Subject {
  let svc: RunningService | undefined;
  return {
    name: 'gitops-reloader',
    async start({ namespaces, releaseNamespace }) {
      const args = serviceArgs(releaseNamespace, await hashKeyFile(), COMPAT_FLAGS).map((a) =>
        a.startsWith('--namespaces=') ? `--namespaces=${namespaces.join(',')}` : a,
      );
      svc = startService(args);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    },
    async decidedNoReload(change, workload) {
      if (!svc) throw new Error('not started');
      if (!change.resourceVersion)
        throw new Error(`no decision to wait for on a ${change.what} of ${change.config}`);
      await decidedNoReload(
        svc,
        { config: change.config, resourceVersion: change.resourceVersion },
        { workload, timeout: 60_000 },
      );
    },
    async stop() {
      await svc?.stop();
    },
  };
}

/** A peer binary (`--peer reloader=PATH`), scoped to the run's namespaces by their label. */
export function peer(name: string, binary: string, graceMs = 15_000): Subject {
  let proc: ChildProcess | undefined;
  const out: string[] = [];
  let graceOver: Promise<void> | undefined;
  return {
    name,
    async start({ selector }) {
      proc = spawn(
        binary,
        [
          ...COMPAT_FLAGS,
          // Reloader's e2e installs it with the annotations strategy, and Argo Rollouts on.
          '--reload-strategy=annotations',
          '--is-Argo-Rollouts=true',
          `--namespace-selector=${selector}`,
        ],
        { env: { ...process.env, KUBECONFIG: inject('kubeconfig') }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const keep = (d: Buffer) => out.push(d.toString());
      proc.stdout?.on('data', keep);
      proc.stderr?.on('data', keep);
      // Reloader logs one "Starting Controller" line per resource it watches once its informers run.
      await waitFor(
        () => {
          if (proc?.exitCode !== null) throw new Error(`${name} exited: ${out.join('').slice(-2000)}`);
          const text = out.join('');
          const started = (text.match(/Starting Controller/g) ?? []).length;
          return started >= 2 ? true : pending(text.slice(-300));
        },
        { describe: `${name} watching configmaps and secrets`, timeout: 60_000 },
      );
      // Its informers list after that line; a change listed in their first sync would be an "add"
      // (ignored until both are initialised), not an update. It says nothing when they are synced.
      await new Promise((r) => setTimeout(r, 5_000));
    },
    async decidedNoReload() {
      graceOver ??= new Promise((r) => setTimeout(r, graceMs));
      await graceOver;
    },
    async stop() {
      if (proc && proc.exitCode === null) {
        const exited = new Promise((r) => proc?.on('close', r));
        proc.kill('SIGTERM');
        await exited;
      }
    },
  };
}

/** The subject `COMPAT_PEER` names (`reloader=/path/to/binary`), else gitops-reloader. */
export function subjectFromEnv(): Subject {
  const spec = process.env.COMPAT_PEER;
  if (!spec) return gitopsReloader();
  const [name, binary] = spec.split('=', 2);
  if (!name || !binary) throw new Error(`COMPAT_PEER must be NAME=PATH, not ${JSON.stringify(spec)}`);
  return peer(name, binary);
}
