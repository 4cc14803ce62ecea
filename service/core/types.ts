// The core's own small types. Adapters translate Kubernetes objects into these; the pure core
// (hashing, references, annotations, planning) never sees a client-node model.

/**
 * What a workload can reload on. A SecretProviderClass (Secrets Store CSI driver) stands for the
 * external objects its CSI volumes mount; its content is the object versions the driver reports.
 */
export type ConfigKind = 'ConfigMap' | 'Secret' | 'SecretProviderClass';

export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet' | 'CronJob' | 'Job' | 'Rollout';

/** A ConfigMap, Secret or SecretProviderClass, by name. Configs are always in the workload's namespace. */
export interface ConfigRef {
  kind: ConfigKind;
  namespace: string;
  name: string;
}

export interface WorkloadRef {
  kind: WorkloadKind;
  namespace: string;
  name: string;
  uid?: string;
}

/** Stable string id for maps and logs: "ConfigMap/ns/name", "Deployment/ns/name". */
// Joined, not concatenated: V8 represents a concatenation of 13 characters or more as a rope (a cons
// string with its pieces), which as a long-lived Map key costs about twice a flat string; join builds
// a flat one. Ids of every cached config and workload are such keys (bench/README.md, "Where the
// memory goes").
export const configId = (c: ConfigRef): string => [c.kind, c.namespace, c.name].join('/');
export const workloadId = (w: WorkloadRef): string => [w.kind, w.namespace, w.name].join('/');
/** The reference a configId names (its inverse: names and namespaces hold no '/'). */
export function configRefOf(id: string): ConfigRef {
  const [kind = '', namespace = '', ...name] = id.split('/');
  return { kind: kind as ConfigKind, namespace, name: name.join('/') };
}

/**
 * How a pod spec uses one config: which keys it can see, and whether it still starts without it.
 * `keys` is 'all' when the whole config is visible (envFrom, a volume without items), else the
 * sorted, unique keys it names. `optional` is true only if every use of the config is optional.
 */
export interface ConfigUse {
  config: ConfigRef;
  keys: 'all' | string[];
  optional: boolean;
}

/**
 * How a workload is reloaded: `restart` replaces old pods without touching the workload object,
 * `annotate` writes a config hash into the pod template, `git` commits that hash to the app's repo.
 */
export const RELOAD_STRATEGIES = ['restart', 'annotate', 'git'] as const;
export type ReloadStrategy = (typeof RELOAD_STRATEGIES)[number];
