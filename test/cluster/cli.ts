// npm run cluster -- up|down|status|build : manages the local control plane used by the tests.
import { ensureBinaries } from './build.ts';
import { down, status, up } from './control-plane.ts';
import { clusterPaths } from './paths.ts';
import { requirePrerequisites } from './prerequisites.ts';

const usage = 'usage: npm run cluster -- up [--no-argocd]|down|status|build|check';

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
      const b = await ensureBinaries(paths, say);
      if (b.built) say(`binaries built in ${b.seconds.toFixed(0)}s`);
      const r = await up(paths, say, { argocd: !flags.includes('--no-argocd') });
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
        return 0;
      }
      say(`not running: ${s.problems.join('; ')}`);
      return 1;
    }
    default:
      console.error(usage);
      return 2;
  }
}

main(process.argv[2], process.argv.slice(3)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(`cluster: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
