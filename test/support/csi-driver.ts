// The Secrets Store CSI driver, for tests: its real CRDs, and its node plugin's writes.
//
// The CRDs come from the Go module pinned in test/cluster/go/csi, read from the module cache after a
// `go mod download`. The driver itself cannot run here: it mounts volumes through a kubelet, and kwok
// fakes kubelets. So `CsiNode` writes SecretProviderClassPodStatus objects exactly as the driver does
// (secrets-store-csi-driver v1.5.4): on mount, pkg/secrets-store/utils.go
// createOrUpdateSecretProviderClassPodStatus (name <pod>-<namespace>-<class>, the node label, an owner
// reference to the pod, objects sorted by id); on rotation, pkg/rotation/reconciler.go, an Update of
// the whole object with the new versions, and only when a version changed.
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  CustomObjectsApi,
  type KubeConfig,
  type V1CustomResourceDefinition,
  type V1Pod,
} from '@kubernetes/client-node';
import { repoRoot } from '../cluster/paths.ts';
import { ensureCrds, parseCrds } from './crds.ts';
import type { Kube } from './kube.ts';
import { pending, waitFor } from './wait-for.ts';

const GROUP = 'secrets-store.csi.x-k8s.io';
const VERSION = 'v1';
const STATUSES = 'secretproviderclasspodstatuses';
const CLASSES = 'secretproviderclasses';
/** secretsstorev1.InternalNodeLabel */
const NODE_LABEL = 'internal.secrets-store.csi.k8s.io/node-name';
const MODULE = 'sigs.k8s.io/secrets-store-csi-driver';
const moduleDir = path.join(repoRoot, 'test', 'cluster', 'go', 'csi');

/** The driver's CRDs (SecretProviderClass, SecretProviderClassPodStatus), from the pinned module. */
export async function csiCrds(): Promise<V1CustomResourceDefinition[]> {
  const { stdout } = await promisify(execFile)('go', ['mod', 'download', '-json', MODULE], {
    cwd: moduleDir,
    env: process.env,
  });
  const info = JSON.parse(stdout) as { Dir?: string; Version?: string; Error?: string };
  if (!info.Dir) throw new Error(`go mod download ${MODULE} in ${moduleDir}: ${info.Error ?? stdout}`);
  const bases = path.join(info.Dir, 'config', 'crd', 'bases');
  const files = (await readdir(bases)).filter((f) => f.endsWith('.yaml')).sort();
  const crds = (
    await Promise.all(files.map(async (f) => parseCrds(await readFile(path.join(bases, f), 'utf8'))))
  ).flat();
  const names = crds.map((c) => c.metadata?.name).sort();
  if (names.join() !== `${CLASSES}.${GROUP},${STATUSES}.${GROUP}`) {
    throw new Error(`${MODULE}@${info.Version} holds CRDs ${names.join(', ')}, not the two expected`);
  }
  return crds;
}

export async function installCsiCrds(kc: KubeConfig): Promise<void> {
  await ensureCrds(kc, await csiCrds());
  // Established is not yet servable: a fresh CRD's storage answers 429 "storage is (re)initializing"
  // for a moment. Wait until both resources list.
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const plural of [CLASSES, STATUSES]) {
    await waitFor(
      async () => {
        try {
          return await custom.listClusterCustomObject({ group: GROUP, version: VERSION, plural });
        } catch (err) {
          if ((err as { code?: number }).code === 429) return pending((err as Error).message.slice(0, 200));
          throw err;
        }
      },
      { describe: `${plural}.${GROUP} to list`, timeout: 30_000 },
    );
  }
}

/** A SecretProviderClass object (what users apply; the driver only reads it). */
export async function createProviderClass(
  kube: Kube,
  namespace: string,
  name: string,
  annotations?: Record<string, string>,
): Promise<void> {
  await kube.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: CLASSES,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'SecretProviderClass',
      metadata: { name, ...(annotations ? { annotations } : {}) },
      spec: { provider: 'vault', parameters: { roleName: 'app', objects: '- objectName: db' } },
    },
  });
}

/** A pod volume that mounts a SecretProviderClass through the driver. */
export function csiVolume(name: string, providerClass: string) {
  return {
    name,
    csi: {
      driver: 'secrets-store.csi.k8s.io',
      readOnly: true,
      volumeAttributes: { secretProviderClass: providerClass },
    },
  };
}

export interface StatusObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  status?: { objects?: Array<{ id: string; version: string }>; secretProviderClassName?: string };
}

/** The driver's node plugin and rotation reconciler, for the pods of one namespace. */
export class CsiNode {
  readonly #kube: Kube;
  readonly #namespace: string;
  /** The provider's current versions per class: what a mount or a rotation reads. */
  readonly #provider = new Map<string, Record<string, string>>();

  constructor(kube: Kube, namespace: string) {
    this.#kube = kube;
    this.#namespace = namespace;
  }

  /** Sets what the external store holds for a class (the next mount or rotation reads it). */
  setVersions(providerClass: string, versions: Record<string, string>): void {
    this.#provider.set(providerClass, { ...versions });
  }

  /** NodePublishVolume for every scheduled pod whose CSI volume has no status yet. Returns the names written. */
  async mountAll(): Promise<string[]> {
    const pods = await this.#kube.core.listNamespacedPod({ namespace: this.#namespace });
    const existing = new Set((await this.statuses()).map((s) => s.metadata?.name));
    const written: string[] = [];
    for (const pod of pods.items) {
      if (!pod.spec?.nodeName || pod.metadata?.deletionTimestamp) continue;
      for (const vol of pod.spec.volumes ?? []) {
        const cls = vol.csi?.volumeAttributes?.secretProviderClass;
        if (!cls || vol.csi?.driver !== 'secrets-store.csi.k8s.io') continue;
        const name = `${pod.metadata?.name}-${this.#namespace}-${cls}`;
        if (existing.has(name)) continue;
        await this.#mount(pod, vol.name, cls, name);
        written.push(name);
      }
    }
    return written;
  }

  async #mount(pod: V1Pod, volume: string, cls: string, name: string): Promise<void> {
    const uid = pod.metadata?.uid as string;
    await this.#kube.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.#namespace,
      plural: STATUSES,
      body: {
        apiVersion: `${GROUP}/${VERSION}`,
        kind: 'SecretProviderClassPodStatus',
        metadata: {
          name,
          namespace: this.#namespace,
          labels: { [NODE_LABEL]: pod.spec?.nodeName as string },
          ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name as string, uid }],
        },
        status: {
          podName: pod.metadata?.name,
          targetPath: `/var/lib/kubelet/pods/${uid}/volumes/kubernetes.io~csi/${volume}/mount`,
          mounted: true,
          secretProviderClassName: cls,
          objects: sortedObjects(this.#provider.get(cls) ?? {}),
        },
      },
    });
  }

  /**
   * The rotation reconciler: sets the provider's versions, then updates each status of the class
   * whose versions differ (one Update per pod, as the driver does). Returns the names updated.
   */
  async rotate(providerClass: string, versions: Record<string, string>): Promise<string[]> {
    this.setVersions(providerClass, versions);
    const updated: string[] = [];
    for (const s of await this.statuses()) {
      if (s.status?.secretProviderClassName !== providerClass) continue;
      const objects = sortedObjects(versions);
      if (JSON.stringify(s.status?.objects ?? []) === JSON.stringify(objects)) continue;
      const name = s.metadata?.name as string;
      await this.#kube.custom.replaceNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.#namespace,
        plural: STATUSES,
        name,
        body: { ...s, status: { ...s.status, objects } },
      });
      updated.push(name);
    }
    return updated;
  }

  async statuses(): Promise<StatusObject[]> {
    const list = (await this.#kube.custom.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: this.#namespace,
      plural: STATUSES,
    })) as { items: StatusObject[] };
    return list.items;
  }
}

function sortedObjects(versions: Record<string, string>): Array<{ id: string; version: string }> {
  return Object.entries(versions)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([id, version]) => ({ id, version }));
}

/** Writes a status object as someone other than the driver would (a tenant with rights on them). */
export async function writeStatus(
  custom: Kube['custom'],
  namespace: string,
  name: string,
  status: Record<string, unknown>,
): Promise<void> {
  await custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: STATUSES,
    body: {
      apiVersion: `${GROUP}/${VERSION}`,
      kind: 'SecretProviderClassPodStatus',
      metadata: { name },
      status,
    },
  });
}

export const CSI_API = { group: GROUP, version: VERSION, statuses: STATUSES, classes: CLASSES };
