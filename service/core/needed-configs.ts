// Which configs a workload's pods cannot start without. Kubernetes defaults `optional` to false: a pod
// whose required ConfigMap or Secret is missing stays in CreateContainerConfigError (env) or
// ContainerCreating (volume), so replacing a running pod then turns a working replica into a broken
// one. A reload never does that: it is held until the config exists again (docs/adr/0020).
import type { ConfigRef, ConfigUse } from './types.ts';

/**
 * The ConfigMaps and Secrets among `uses` that some use requires (not every use is optional) and
 * that `exists` says are not there, in `uses` order. A SecretProviderClass is never reported: the CSI
 * driver mounts from an external store, and its object is not what the pod needs to exist.
 */
export function missingNeeded(
  uses: readonly ConfigUse[],
  exists: (config: ConfigRef) => boolean,
): ConfigRef[] {
  return uses
    .filter((u) => !u.optional && u.config.kind !== 'SecretProviderClass' && !exists(u.config))
    .map((u) => u.config);
}
