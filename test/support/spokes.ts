// Spokes for hub-mode suites: a second (third, …) control plane of test/cluster, registered in the
// real Argo CD as a cluster Secret, started on first use and then shared. Spokes are left running
// after a suite, like the main plane under KEEP_CLUSTER: the next suite reuses them, and
// `npm run cluster -- down` (or global teardown, when it started the environment) stops them.
import { KubeConfig } from '@kubernetes/client-node';
import { inject } from 'vitest';
import { clusterPaths } from '../cluster/paths.ts';
import { startSpoke } from '../cluster/spoke.ts';
import { registerSpoke } from '../cluster/spoke-registration.ts';
import { argocdEndpoints } from './argocd.ts';
import { clients, type Kube } from './kube.ts';

export interface RunningSpoke {
  /** Its cluster name in Argo CD: what an Application's `spec.destination.name` refers to. */
  name: string;
  /** Its API server, https://127.0.0.1:<port>, as in the cluster Secret's `server`. */
  server: string;
  /** Its admin kubeconfig file, for the test to read and write the spoke. */
  kubeconfig: string;
  kube: Kube;
  /** The cluster Secret's name in Argo CD's namespace. */
  clusterSecret: string;
  /** Wall time this call spent starting the spoke; 0 when it was already running. */
  startSeconds: number;
}

/** A running spoke registered in Argo CD; started (and registered) on first use. */
export async function spoke(name: string): Promise<RunningSpoke> {
  argocdEndpoints(); // throws when the control plane in use has no Argo CD of test/cluster
  if (process.env.TEST_KUBECONFIG) {
    throw new Error('spokes are control planes of test/cluster; TEST_KUBECONFIG clusters have none');
  }
  const paths = clusterPaths();
  const r = await startSpoke(paths, name, (msg) => console.log(`[spoke ${name}] ${msg}`));
  const clusterSecret = await registerSpoke(paths, inject('kubeconfig'), r.spoke);
  const kc = new KubeConfig();
  kc.loadFromFile(r.spoke.kubeconfig);
  return {
    name,
    server: r.spoke.server,
    kubeconfig: r.spoke.kubeconfig,
    kube: clients(kc),
    clusterSecret,
    startSeconds: r.seconds,
  };
}
