// Argo CD's AppProject and an Application that manages workloads, as git-mode tests need them: the
// project's source repositories, destinations and source namespaces, and the Application's
// status.resources, written the way Argo CD writes them (the Application CRD has no status
// subresource, so status goes in with the object). The AppProject CRD is a minimal stand-in with
// upstream's group, names and scope; it is installed only when the cluster has none, so a real Argo
// CD's CRD is never replaced.
import type { CustomObjectsApi, KubeConfig, V1CustomResourceDefinition } from '@kubernetes/client-node';
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { createArgoObject } from './argo.ts';
import { ensureCrds } from './crds.ts';

const APPPROJECT_CRD: V1CustomResourceDefinition = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: {
    name: 'appprojects.argoproj.io',
    labels: { 'app.kubernetes.io/part-of': 'gitops-reloader-tests' },
  },
  spec: {
    group: 'argoproj.io',
    scope: 'Namespaced',
    names: {
      kind: 'AppProject',
      listKind: 'AppProjectList',
      plural: 'appprojects',
      singular: 'appproject',
      shortNames: ['appproj', 'appprojs'],
    },
    versions: [
      {
        name: 'v1alpha1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            required: ['metadata', 'spec'],
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
              status: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
            },
          },
        },
      },
    ],
  },
};

/** Installs the AppProject CRD unless the cluster already serves one (a real Argo CD's). */
export async function ensureAppProjectCrd(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  try {
    await api.readCustomResourceDefinition({ name: 'appprojects.argoproj.io' });
  } catch (err) {
    if ((err as { code?: number }).code !== 404) throw err;
    await ensureCrds(kc, [APPPROJECT_CRD]);
  }
}

export const IN_CLUSTER = 'https://kubernetes.default.svc';

export interface ProjectSpec {
  sourceRepos: string[];
  destinations: Array<{ server?: string; name?: string; namespace: string }>;
  sourceNamespaces?: string[];
}

export async function createProject(
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
  spec: ProjectSpec,
): Promise<void> {
  await custom.createNamespacedCustomObject({
    group: 'argoproj.io',
    version: 'v1alpha1',
    namespace,
    plural: 'appprojects',
    body: { apiVersion: 'argoproj.io/v1alpha1', kind: 'AppProject', metadata: { name, namespace }, spec },
  });
}

export interface Managed {
  kind: string;
  namespace: string;
  name: string;
}

/** An Application with one git source whose status lists `manages`, deploying to this cluster. */
export async function createManagedApplication(
  custom: CustomObjectsApi,
  o: {
    namespace: string;
    name: string;
    project: string;
    repoURL: string;
    path: string;
    destinationNamespace: string;
    manages: Managed[];
    server?: string;
  },
): Promise<void> {
  await createArgoObject(custom, {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: { name: o.name, namespace: o.namespace },
    spec: {
      project: o.project,
      source: { repoURL: o.repoURL, path: o.path, targetRevision: 'main' },
      destination: { server: o.server ?? IN_CLUSTER, namespace: o.destinationNamespace },
    },
    status: {
      resources: o.manages.map((m) => ({
        group: m.kind === 'Rollout' ? 'argoproj.io' : m.kind === 'CronJob' ? 'batch' : 'apps',
        version: m.kind === 'CronJob' ? 'v1' : m.kind === 'Rollout' ? 'v1alpha1' : 'v1',
        kind: m.kind,
        namespace: m.namespace,
        name: m.name,
        status: 'Synced',
      })),
    },
  });
}
