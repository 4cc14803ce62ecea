// A spoke's entry in the cluster state file (.cluster/state.json, key `spokes`), and how one is
// written: read, change, write at once, so entries of other spokes and the main plane stay as they are.
import { writeFile } from 'node:fs/promises';
import { readState } from './control-plane.ts';
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

/** Sets (or, with undefined, removes) one spoke's entry; fails when no environment is running. */
export async function writeSpoke(
  paths: ClusterPaths,
  name: string,
  entry: SpokeState | undefined,
): Promise<void> {
  const state = await readState(paths);
  if (!state) throw new Error(`no cluster state at ${paths.stateFile}: start the environment first`);
  const spokes = { ...state.spokes };
  if (entry) spokes[name] = entry;
  else delete spokes[name];
  await writeFile(paths.stateFile, `${JSON.stringify({ ...state, spokes }, null, 2)}\n`);
}
