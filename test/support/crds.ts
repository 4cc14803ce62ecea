// Installs CRDs and waits until the API server serves them. The Argo CD CRDs are the real ones,
// copied by test/cluster's build out of the pinned Argo CD module (test/cluster/argocd.ts installs
// them with the rest of Argo CD; the bench, which runs without Argo CD, installs them from here).
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import {
  ApiextensionsV1Api,
  type KubeConfig,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { clusterPaths } from '../cluster/paths.ts';
import { pending, waitFor } from './wait-for.ts';

export const crdDir = path.join(clusterPaths().bin, 'crds', 'argocd');

export async function loadCrds(dir: string = crdDir): Promise<V1CustomResourceDefinition[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort();
  const docs = await Promise.all(
    files.map(async (f) => parseCrds(await readFile(path.join(dir, f), 'utf8'))),
  );
  return docs.flat();
}

/**
 * Parses CRD YAML into client-node's typed model. The typed API clients serialize by model
 * attribute, so a plain parsed object would silently lose keys such as
 * `x-kubernetes-preserve-unknown-fields` (the model calls it xKubernetesPreserveUnknownFields).
 */
export function parseCrds(text: string): V1CustomResourceDefinition[] {
  return (loadAllYaml(text) as V1CustomResourceDefinition[]).filter(Boolean);
}

export function isEstablished(crd: V1CustomResourceDefinition): boolean {
  return Boolean(crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'));
}

/** Creates each CRD or replaces it with ours, then waits for Established. */
export async function ensureCrds(kc: KubeConfig, crds: V1CustomResourceDefinition[]): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const crd of crds) {
    const name = crd.metadata?.name;
    if (!name) throw new Error('a CRD without metadata.name');
    try {
      const existing = await api.readCustomResourceDefinition({ name });
      await api.replaceCustomResourceDefinition({
        name,
        body: { ...crd, metadata: { ...crd.metadata, resourceVersion: existing.metadata?.resourceVersion } },
      });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
      await api.createCustomResourceDefinition({ body: crd });
    }
    await waitFor(
      async () => {
        const c = await api.readCustomResourceDefinition({ name });
        return isEstablished(c) ? c : pending(c.status?.conditions);
      },
      { describe: `CRD ${name} Established`, timeout: 30_000 },
    );
  }
}
