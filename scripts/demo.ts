// npm run demo: gitops-reloader end to end with the real Argo CD, in about a minute once built.
// Starts the control plane with Argo CD (test/cluster), pushes examples/demo to a local git
// repository, lets Argo CD sync it, starts the service, commits a change to the app's ConfigMap and
// Secret, and shows Argo CD's sync and the pods being replaced live, then sums up. Cleans up on exit
// or Ctrl-C. The story is scripts/demo/story.ts; Argo CD's part is scripts/demo/argocd.ts.
import { argocdEngine } from './demo/argocd.ts';
import { runCleaningUp } from './demo/cleanup.ts';
import { tell } from './demo/story.ts';

runCleaningUp(() => tell(argocdEngine));
