// Checks our Argo CD Application and Argo Rollouts Rollout objects against the real upstream CRD
// schemas (Argo CD v3.5.1's Application CRD and Argo Rollouts v1.9.1's Rollout CRD), when they are
// present. They are not vendored into the repository: CI places them in `upstreamCrdDir`, a folder
// next to the checkout, and a fresh clone without it skips the check (saying so).
//
// The check runs on the real API server: each upstream CRD is installed under a mirror group
// (same schema, no subresources so status is validated too), and every object our tests create
// is also sent there as a dry-run with strict field validation. Unknown or mistyped fields fail.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { CustomObjectsApi, KubeConfig, V1CustomResourceDefinition } from '@kubernetes/client-node';
import { repoRoot } from '../cluster/paths.ts';
import { ensureCrds, parseCrds } from './crds.ts';

export const upstreamCrdDir = path.resolve(repoRoot, '..', 'shared', 'fixtures', 'crds');
export const MIRROR_GROUP = 'upstream-check.gitops-reloader.io';

const upstreamFiles: Record<string, string> = {
  Application: 'argocd-application-v3.5.1.yaml',
  Rollout: 'argo-rollouts-rollout-v1.9.1.yaml',
};

export function upstreamAvailable(): boolean {
  return Object.values(upstreamFiles).every((f) => existsSync(path.join(upstreamCrdDir, f)));
}

/** The upstream CRD moved to MIRROR_GROUP, with subresources removed. Pure. */
export function mirrorCrd(upstream: V1CustomResourceDefinition): V1CustomResourceDefinition {
  const plural = upstream.spec.names.plural;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${MIRROR_GROUP}` },
    spec: {
      ...upstream.spec,
      group: MIRROR_GROUP,
      names: { ...upstream.spec.names, shortNames: [] },
      versions: upstream.spec.versions.map(({ subresources: _dropped, ...v }) => v),
    },
  };
}

export async function installMirrors(kc: KubeConfig): Promise<void> {
  const crds = await Promise.all(
    Object.values(upstreamFiles).map(async (f) =>
      parseCrds(await readFile(path.join(upstreamCrdDir, f), 'utf8')),
    ),
  );
  await ensureCrds(kc, crds.flat().map(mirrorCrd));
}

const plurals: Record<string, string> = { Application: 'applications', Rollout: 'rollouts' };

export interface ArgoObject {
  apiVersion: string;
  kind: string;
  metadata: { name?: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

/**
 * Dry-run creates `obj` under the mirror group with strict field validation. Throws with the API
 * server's message if the upstream schema rejects it. Returns false when the check cannot run here.
 */
export async function validateAgainstUpstream(custom: CustomObjectsApi, obj: ArgoObject): Promise<boolean> {
  if (!upstreamAvailable()) return false;
  const plural = plurals[obj.kind];
  if (!plural) throw new Error(`no upstream schema for kind ${obj.kind}`);
  const version = obj.apiVersion.split('/')[1] ?? 'v1alpha1';
  const namespace = obj.metadata.namespace;
  if (!namespace) throw new Error(`${obj.kind} ${obj.metadata.name} has no namespace`);
  try {
    await custom.createNamespacedCustomObject({
      group: MIRROR_GROUP,
      version,
      namespace,
      plural,
      body: {
        ...obj,
        apiVersion: `${MIRROR_GROUP}/${version}`,
        metadata: { ...obj.metadata, resourceVersion: undefined },
      },
      dryRun: 'All',
      fieldValidation: 'Strict',
    });
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    const msg = typeof body === 'string' ? body : JSON.stringify(body ?? (err as Error).message);
    throw new Error(
      `${obj.kind} ${namespace}/${obj.metadata.name} does not match the upstream schema: ${msg}`,
    );
  }
  return true;
}
