// Loads the kubeconfig the service talks to the API server with.
import { KubeConfig } from '@kubernetes/client-node';

/** An explicit path, else in-cluster config, $KUBECONFIG, or ~/.kube/config (client-node's default order). */
export function kubeConfigFrom(path: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  return kc;
}
