// The unit project's global setup: the Lua checks of our resource action run on gopher-lua, built
// from test/cluster/go/lua (a few seconds, once; cached by its key like the control plane). A missing
// Go is reported with every other missing prerequisite before anything is built; nothing is skipped.
import { ensureBinaries } from './cluster/build.ts';
import { clusterPaths } from './cluster/paths.ts';
import { requirePrerequisitesOrExit } from './cluster/prerequisites.ts';

export default async function setup(): Promise<void> {
  const paths = clusterPaths();
  await requirePrerequisitesOrExit(paths, { modules: ['lua'] });
  const r = await ensureBinaries(paths, (msg) => console.log(`[unit] ${msg}`), ['lua']);
  if (r.built) console.log(`[unit] gopher-lua built in ${r.seconds.toFixed(0)}s`);
}
