// npm run demo: gitops-reloader end to end with the real Argo CD, in about a minute once built;
// `npm run demo -- --flux` tells the same story with the real Flux controllers.
// Builds and starts what the story runs (test/cluster: the control plane and Argo CD; with --flux,
// Flux too, which reads from Argo CD's git server), pushes examples/demo to a local git
// repository, lets the engine deploy it, starts the service, commits a change to the app's ConfigMap
// and Secret, and shows the engine applying it and the pods being replaced live, then sums up.
// Cleans up on exit or Ctrl-C. The story is scripts/demo/story.ts; each engine's part is
// scripts/demo/argocd.ts or scripts/demo/flux.ts.
import { argocdEngine } from './demo/argocd.ts';
import { runCleaningUp } from './demo/cleanup.ts';
import { fluxEngine } from './demo/flux.ts';
import { tell } from './demo/story.ts';

const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== '--flux');
if (unknown.length > 0) {
  process.stderr.write(`demo: unknown argument ${unknown.join(' ')}; usage: npm run demo [-- --flux]\n`);
  process.exit(2);
}
runCleaningUp(() => tell(args.includes('--flux') ? fluxEngine : argocdEngine));
