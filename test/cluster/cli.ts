// npm run cluster -- up|down|status|build|spoke : manages the local control plane used by the tests.
import { ensureBinaries } from './build.ts';
import { down, modulesFor, status, up } from './control-plane.ts';
import { clusterPaths } from './paths.ts';
import { requirePrerequisites } from './prerequisites.ts';
import { spokeProblems, startSpoke, stopSpoke } from './spoke.ts';
import { registerSpoke, unregisterSpoke } from './spoke-registration.ts';

const usage = 'usage: npm run cluster -- up [--no-argocd]|down|status|build|check|spoke <name> [--stop]';

async function main(cmd: string | undefined, flags: string[]): Promise<number> {
  const paths = clusterPaths();
  const say = (msg: string) => console.log(`cluster: ${msg}`);
  switch (cmd) {
    case 'check':
      await requirePrerequisites(paths);
      say('all prerequisites present');
      return 0;
    case 'build': {
      await requirePrerequisites(paths);
      const r = await ensureBinaries(paths, say);
      for (const [m, s] of Object.entries(r.perModule)) say(`  ${m}: ${s.toFixed(0)}s`);
      say(r.built ? `binaries built in ${r.seconds.toFixed(0)}s` : `binaries up to date (key ${r.key})`);
      return 0;
    }
    case 'up': {
      await requirePrerequisites(paths);
      const parts = { argocd: !flags.includes('--no-argocd') };
      const b = await ensureBinaries(paths, say, modulesFor(parts));
      if (b.built) say(`binaries built in ${b.seconds.toFixed(0)}s`);
      const r = await up(paths, say, parts);
      if (r.added)
        say(`started ${r.added.join(', ')} next to the running control plane in ${r.seconds.toFixed(1)}s`);
      else if (r.seconds === 0) say(`already running at ${r.state.server}`);
      say(`kubeconfig: ${paths.kubeconfig}`);
      if (r.state.argocd) {
        say(
          `Argo CD in namespace ${r.state.argocd.namespace}; API ${r.state.argocd.apiServer}; git ${r.state.argocd.git}`,
        );
      }
      say(`try: .cluster/bin/kubectl --kubeconfig .cluster/kubeconfig get nodes`);
      return 0;
    }
    case 'down': {
      const report = await down(paths);
      for (const line of report) say(line);
      say('down; state removed');
      return 0;
    }
    case 'status': {
      const s = await status(paths);
      if (s.running) {
        say(`running at ${s.state?.server} since ${s.state?.startedAt}`);
        for (const p of s.state?.processes ?? []) say(`  ${p.name} pid ${p.pid}`);
        if (s.state?.argocd) say(`Argo CD API ${s.state.argocd.apiServer}; git ${s.state.argocd.git}`);
        if (s.state?.flux) say(`Flux in namespace ${s.state.flux.namespace}; events ${s.state.flux.events}`);
        for (const spoke of Object.values(s.state?.spokes ?? {})) {
          const problems = await spokeProblems(spoke);
          say(`spoke ${spoke.name} at ${spoke.server}: ${problems.length ? problems.join('; ') : 'running'}`);
        }
        return 0;
      }
      say(`not running: ${s.problems.join('; ')}`);
      return 1;
    }
    case 'spoke': {
      // A second (third, …) control plane, registered in the running Argo CD as a cluster Secret.
      const name = flags.find((f) => !f.startsWith('--'));
      if (!name) break;
      if (flags.includes('--stop')) {
        await unregisterSpoke(paths, paths.kubeconfig, name);
        for (const line of await stopSpoke(paths, name)) say(line);
        say(`spoke ${name} stopped; its cluster Secret removed`);
        return 0;
      }
      const r = await startSpoke(paths, name, say);
      if (r.reused) say(`spoke ${name} already running at ${r.spoke.server}`);
      const secret = await registerSpoke(paths, paths.kubeconfig, r.spoke);
      say(`registered in Argo CD as cluster ${name} (Secret ${secret}); kubeconfig: ${r.spoke.kubeconfig}`);
      return 0;
    }
  }
  console.error(usage);
  return 2;
}

main(process.argv[2], process.argv.slice(3)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
