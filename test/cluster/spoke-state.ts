// A spoke's entry in the cluster state file (.cluster/state.json, key `spokes`), and how one is
// written: read, change, write, so entries of other spokes and the main plane stay as they are. Writes
// of this process go one at a time (a spoke's components register in parallel), and each replaces the
// file by a rename, so no reader, here or in another process, sees it half-written.
import { rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { readState } from './control-plane.ts';
import { withLock } from './lock.ts';
import type { ClusterPaths } from './paths.ts';
import type { Started } from './processes.ts';

export interface SpokeState {
  name: string;
  startedAt: string;
  /** The spoke's API server, https://127.0.0.1:<port>; empty until it is healthy. */
  server: string;
  /** The spoke's admin kubeconfig (system:masters client certificate). */
  kubeconfig: string;
  /** Its certificates (pki/), etcd data and component kubeconfigs. */
  dir: string;
  processes: Started[];
}

let queue: Promise<unknown> = Promise.resolve();

/** Sets (or, with undefined, removes) one spoke's entry; fails when no environment is running. */
export function writeSpoke(paths: ClusterPaths, name: string, entry: SpokeState | undefined): Promise<void> {
  // The lock: another process may be writing another spoke's entry at the same time.
  const lock = path.join(paths.state, 'spokes', 'state.lock');
  const next = queue.then(() => withLock(lock, 30_000, () => write(paths, name, entry)));
  queue = next.catch(() => undefined);
  return next;
}

async function write(paths: ClusterPaths, name: string, entry: SpokeState | undefined): Promise<void> {
  const state = await readState(paths);
  if (!state) throw new Error(`no cluster state at ${paths.stateFile}: start the environment first`);
  const spokes = { ...state.spokes };
  if (entry) spokes[name] = entry;
  else delete spokes[name];
  const tmp = `${paths.stateFile}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify({ ...state, spokes }, null, 2)}\n`);
  await rename(tmp, paths.stateFile);
}
