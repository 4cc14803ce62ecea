// Gives every integration suite one control plane: TEST_KUBECONFIG if set, otherwise the local
// one from test/cluster with the real Argo CD, Argo Rollouts and git server next to it, reused when
// already running, else built and started here (and stopped again at the end). It never skips: if
// the control plane or Argo CD cannot start, the run fails.
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { TestProject } from 'vitest/node';
import type { ArgoCdEndpoints } from './cluster/argocd.ts';
import { ensureBinaries } from './cluster/build.ts';
import { down, status, up } from './cluster/control-plane.ts';
import type { FluxEndpoints } from './cluster/flux.ts';
import { clusterPaths } from './cluster/paths.ts';
import { requirePrerequisitesOrExit } from './cluster/prerequisites.ts';
import { ensureBrowser } from './support/browser.ts';
import { installMirrors, upstreamAvailable, upstreamCrdDir } from './support/upstream-schema.ts';

const say = (msg: string) => console.log(`[cluster] ${msg}`);

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  // The status page test renders in a real headless browser, on any cluster.
  await ensureBrowser(say);
  const external = process.env.TEST_KUBECONFIG;
  let kubeconfig: string;
  let teardown: (() => Promise<void>) | undefined;
  let argocd: ArgoCdEndpoints | undefined;
  let flux: FluxEndpoints | undefined;
  if (external) {
    kubeconfig = path.resolve(external);
    say(`using the cluster in TEST_KUBECONFIG=${kubeconfig}`);
  } else {
    const paths = clusterPaths();
    await requirePrerequisitesOrExit(paths);
    const built = await ensureBinaries(paths, say);
    say(
      built.built
        ? `binaries built in ${built.seconds.toFixed(0)}s`
        : `binaries cached (key ${built.key}): no Go build`,
    );
    let current = await status(paths);
    if (current.running && (!current.state?.argocd || !current.state?.flux)) {
      // Started with --no-argocd (npm run bench), or before Flux was part of it: up() starts what is
      // missing next to it.
      const r = await up(paths, say);
      say(`${(r.added ?? []).join(' and ')} added to the running control plane in ${r.seconds.toFixed(1)}s`);
      current = await status(paths);
    } else if (current.running) {
      say(`reusing the running control plane at ${current.state?.server} (cluster up took 0s)`);
    } else {
      const r = await up(paths, say);
      current = await status(paths);
      say(`cluster up took ${r.seconds.toFixed(1)}s`);
      if (!process.env.KEEP_CLUSTER) {
        teardown = async () => {
          await down(paths);
          say('control plane stopped (set KEEP_CLUSTER=1 to keep it for the next run)');
        };
      }
    }
    kubeconfig = paths.kubeconfig;
    argocd = current.state?.argocd;
    flux = current.state?.flux;
  }
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  if (upstreamAvailable()) {
    await installMirrors(kc);
    say(`upstream Argo CD / Argo Rollouts schemas from ${upstreamCrdDir} installed for the schema check`);
  } else {
    say(`upstream CRD schemas not found at ${upstreamCrdDir}: the upstream schema check will not run`);
  }
  project.provide('kubeconfig', kubeconfig);
  project.provide('argocd', argocd);
  project.provide('flux', flux);
  return teardown;
}
