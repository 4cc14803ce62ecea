// The demo's environment: the local control plane of test/cluster, reused when one runs (with the
// parts the story needs started next to it), else built if needed and started, and stopped again at
// the end. Only what the story runs is built and started (modulesFor): the Argo CD story needs no
// Flux, Helm or Lua VM. An environment the demo did not start is never stopped.
import { ensureBinaries } from '../../test/cluster/build.ts';
import {
  type ClusterState,
  down,
  missingParts,
  modulesFor,
  status,
  type UpOptions,
  up,
} from '../../test/cluster/control-plane.ts';
import type { ClusterPaths } from '../../test/cluster/paths.ts';
import { isOurs } from '../../test/cluster/processes.ts';
import { onCleanUp } from './cleanup.ts';
import { dim, say } from './output.ts';
import { pause } from './wait.ts';

/**
 * The environment's status, asked again for up to 15 s while all its processes live but the API
 * server misses its /readyz probe (2 s, easily missed on a busy machine): `up` tears down an
 * environment it finds not running, and this one may be shared with other runs.
 */
async function settledStatus(paths: ClusterPaths) {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const s = await status(paths);
    if (s.running || !s.state?.processes.every(isOurs) || Date.now() > deadline) return s;
    await pause(1000);
  }
}

/** A running environment with the parts `needs` asks for; says what it did. */
export async function ensureEnvironment(
  paths: ClusterPaths,
  needs: UpOptions,
  engineName: string,
): Promise<ClusterState> {
  const progress = (m: string) => say(dim(`    ${m}`));
  const built = await ensureBinaries(paths, progress, modulesFor(needs));
  if (built.built) say(dim(`    built in ${built.seconds.toFixed(0)}s`));
  const current = await settledStatus(paths);
  if (current.running && current.state) {
    // A control plane started without a part the story needs (npm run bench starts no Argo CD): `up`
    // starts what is missing next to it and leaves the rest as it is.
    if (missingParts(current.state, needs).length > 0) return (await up(paths, progress, needs)).state;
    say(dim(`    reusing the running control plane and ${engineName}`));
    return current.state;
  }
  // Not running: `up` stops what is left of an earlier one and starts a new one.
  const r = await up(paths, progress, needs);
  // Unless one came up meanwhile (reused: no time taken, or parts added): only a new one is ours to stop.
  if (r.seconds > 0 && !r.added) {
    onCleanUp(() => down(paths));
    say(dim(`    up in ${r.seconds.toFixed(1)}s`));
  }
  return r.state;
}
