// Which ConfigMaps, Secrets and SecretProviderClasses a pod spec uses, and which of their keys it can
// see. The index uses this to ignore changes a workload cannot observe (a key it does not reference).

import { type ConfigKind, type ConfigRef, type ConfigUse, configId } from './types.ts';

// The *Like types below are the subset of the Kubernetes PodSpec we read. Every field is optional and
// every array readonly, so a client-node V1PodSpec (or a frozen object from a cache) is assignable as is.
// Field names are Kubernetes' own; references.test.ts checks each of them exists in V1PodSpec.

export interface KeyToPathLike {
  readonly key: string;
}

/** configMap volumes, and configMap/secret projections: the config is named by `name`. */
export interface NamedVolumeSourceLike {
  readonly name?: string;
  readonly items?: readonly KeyToPathLike[];
  readonly optional?: boolean;
}

/** secret volumes name their Secret `secretName`, unlike every other reference in a pod spec. */
export interface SecretVolumeSourceLike {
  readonly secretName?: string;
  readonly items?: readonly KeyToPathLike[];
  readonly optional?: boolean;
}

export interface VolumeProjectionLike {
  readonly configMap?: NamedVolumeSourceLike;
  readonly secret?: NamedVolumeSourceLike;
}

/** A CSI volume: the Secrets Store driver reads its SecretProviderClass from `volumeAttributes`. */
export interface CsiVolumeSourceLike {
  readonly driver?: string;
  readonly volumeAttributes?: { readonly [key: string]: string };
}

/** The CSI volume attribute that names a SecretProviderClass (the driver's and Reloader's key). */
export const SECRET_PROVIDER_CLASS_ATTRIBUTE = 'secretProviderClass';

export interface VolumeLike {
  readonly configMap?: NamedVolumeSourceLike;
  readonly secret?: SecretVolumeSourceLike;
  readonly projected?: { readonly sources?: readonly VolumeProjectionLike[] };
  readonly csi?: CsiVolumeSourceLike;
}

export interface EnvSourceLike {
  readonly name?: string;
  readonly optional?: boolean;
}

export interface KeySelectorLike {
  readonly name?: string;
  readonly key: string;
  readonly optional?: boolean;
}

export interface ContainerLike {
  readonly envFrom?: readonly { readonly configMapRef?: EnvSourceLike; readonly secretRef?: EnvSourceLike }[];
  readonly env?: readonly {
    readonly valueFrom?: {
      readonly configMapKeyRef?: KeySelectorLike;
      readonly secretKeyRef?: KeySelectorLike;
    };
  }[];
}

export interface PodSpecLike {
  readonly containers?: readonly ContainerLike[];
  readonly initContainers?: readonly ContainerLike[];
  // The API server rejects ephemeral containers in pod templates, so this only matters for a live
  // Pod's spec; read it so that "what does this pod reference" has one complete answer.
  readonly ephemeralContainers?: readonly ContainerLike[];
  readonly volumes?: readonly VolumeLike[];
}

/** One reference as written in the spec, before references to the same config are merged. */
interface RawUse {
  kind: ConfigKind;
  name: string | undefined;
  keys: 'all' | readonly string[];
  optional: boolean;
}

/**
 * Every ConfigMap and Secret the spec references, one entry per config, sorted by configId.
 * References without a name are ignored: the API server would reject them, and they name nothing.
 */
export function extractReferences(namespace: string, spec: PodSpecLike): ConfigUse[] {
  const merged = new Map<string, Accumulated>();
  for (const use of rawUses(spec)) {
    if (!use.name) continue;
    const config: ConfigRef = { kind: use.kind, namespace, name: use.name };
    const id = configId(config);
    merged.set(id, accumulate(merged.get(id) ?? { config, keys: new Set(), optional: true }, use));
  }
  return [...merged.entries()].sort(([a], [b]) => compareCodeUnits(a, b)).map(([, acc]) => finish(acc));
}

function* rawUses(spec: PodSpecLike): Generator<RawUse> {
  for (const volume of spec.volumes ?? []) yield* volumeUses(volume);
  for (const list of [spec.containers, spec.initContainers, spec.ephemeralContainers]) {
    for (const container of list ?? []) yield* containerUses(container);
  }
}

function* volumeUses(volume: VolumeLike): Generator<RawUse> {
  const { configMap, secret, projected, csi } = volume;
  // A Secrets Store CSI volume names its SecretProviderClass in a volume attribute; the driver mounts
  // every object of the class. Reloader matches the attribute whatever the driver name; so do we.
  const providerClass = csi?.volumeAttributes?.[SECRET_PROVIDER_CLASS_ATTRIBUTE];
  if (providerClass) yield { kind: 'SecretProviderClass', name: providerClass, keys: 'all', optional: false };
  if (configMap) yield sourceUse('ConfigMap', configMap.name, configMap);
  if (secret) yield sourceUse('Secret', secret.secretName, secret);
  for (const source of projected?.sources ?? []) {
    if (source.configMap) yield sourceUse('ConfigMap', source.configMap.name, source.configMap);
    if (source.secret) yield sourceUse('Secret', source.secret.name, source.secret);
  }
}

function sourceUse(
  kind: ConfigKind,
  name: string | undefined,
  source: { readonly items?: readonly KeyToPathLike[]; readonly optional?: boolean },
): RawUse {
  // The kubelet projects every key when `items` is absent or empty, and only the listed keys otherwise.
  const items = source.items ?? [];
  const keys = items.length === 0 ? 'all' : items.map((item) => item.key);
  return { kind, name, keys, optional: source.optional === true };
}

function* containerUses(container: ContainerLike): Generator<RawUse> {
  // envFrom imports every key (those that are not valid env names are skipped by the kubelet, but which
  // ones those are depends on the data, so 'all' is the only safe answer).
  for (const { configMapRef, secretRef } of container.envFrom ?? []) {
    if (configMapRef)
      yield { kind: 'ConfigMap', name: configMapRef.name, keys: 'all', optional: isOptional(configMapRef) };
    if (secretRef)
      yield { kind: 'Secret', name: secretRef.name, keys: 'all', optional: isOptional(secretRef) };
  }
  for (const { valueFrom } of container.env ?? []) {
    const cm = valueFrom?.configMapKeyRef;
    const s = valueFrom?.secretKeyRef;
    if (cm) yield { kind: 'ConfigMap', name: cm.name, keys: [cm.key], optional: isOptional(cm) };
    if (s) yield { kind: 'Secret', name: s.name, keys: [s.key], optional: isOptional(s) };
  }
}

// Kubernetes defaults `optional` to false: a missing required config keeps the pod from starting.
const isOptional = (ref: { readonly optional?: boolean }): boolean => ref.optional === true;

interface Accumulated {
  config: ConfigRef;
  keys: 'all' | Set<string>;
  optional: boolean;
}

function accumulate(acc: Accumulated, use: RawUse): Accumulated {
  // One use that sees every key means the workload sees every key; one required use makes it required.
  const keys = acc.keys === 'all' || use.keys === 'all' ? 'all' : new Set([...acc.keys, ...use.keys]);
  return { config: acc.config, keys, optional: acc.optional && use.optional };
}

function finish(acc: Accumulated): ConfigUse {
  const keys = acc.keys === 'all' ? 'all' : [...acc.keys].sort(compareCodeUnits);
  return { config: acc.config, keys, optional: acc.optional };
}

// Code-unit order, not localeCompare: the order feeds hashes, so it must not depend on the ICU build or
// locale of the process that computes it.
const compareCodeUnits = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
