// Which configs a workload's pods cannot start without. Kubernetes defaults `optional` to false: a pod
// whose required ConfigMap or Secret is missing stays in CreateContainerConfigError (env) or
// ContainerCreating (volume), so replacing a running pod then turns a working replica into a broken
// one. A reload never does that: it is held until the config exists again (docs/adr/0024).
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

/** The ReloadHeld Event's text: what changed, and the configs (kind/name, never data) the pods wait for. */
export function heldMessage(changed: readonly string[], missing: readonly string[]): string {
  const many = missing.length > 1;
  return (
    `${changed.join(', ')} changed; reload held: ${missing.join(', ')} ${many ? 'do' : 'does'} not exist ` +
    `and the pods need ${many ? 'them' : 'it'} (not optional), so a replaced pod could not start. ` +
    `The reload runs when ${many ? 'they exist' : 'it exists'} again.`
  );
}
