// Registers a spoke in the running real Argo CD as `argocd cluster add` would: in the spoke, the
// ServiceAccount argocd-manager bound to cluster-admin and a long-lived token Secret for it; in Argo
// CD's namespace, a cluster Secret holding the spoke's server, that token and the spoke's CA.
//
// The cluster Secret's format is Argo CD v3.6.1's, read in its released source (facts, no code):
// docs/operator-manual/declarative-setup.md ("Clusters": label argocd.argoproj.io/secret-type:
// cluster; data name, server and config, a JSON ClusterConfig with bearerToken and tlsClientConfig)
// and util/db/cluster.go (SecretToCluster reads data.name, data.server, data.config). caData is a Go
// []byte in pkg/apis/application/v1alpha1/types.go (TLSClientConfig.CAData), so it is base64 in JSON.
// The names argocd-manager and <sa>-long-lived-token in kube-system are util/clusterauth/clusterauth.go's.
import path from 'node:path';
import { ARGOCD_NAMESPACE, kubectl } from './argocd.ts';
import { until } from './launch.ts';
import type { ClusterPaths } from './paths.ts';
import { readPem } from './pki.ts';
import type { SpokeState } from './spoke-state.ts';

export const MANAGER_NAMESPACE = 'kube-system';
export const MANAGER_ACCOUNT = 'argocd-manager';
export const MANAGER_TOKEN_SECRET = `${MANAGER_ACCOUNT}-long-lived-token`;
/** On every cluster Secret this module writes, with the spoke's name: how they are found again. */
export const SPOKE_LABEL = 'gitops-reloader.test/spoke';

export const clusterSecretName = (spoke: string) => `cluster-spoke-${spoke}`;

/** What the spoke needs so Argo CD can act in it: a cluster-admin ServiceAccount and its token. */
export function managerObjects(): object[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: MANAGER_ACCOUNT, namespace: MANAGER_NAMESPACE },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `${MANAGER_ACCOUNT}-role-binding` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'ServiceAccount', name: MANAGER_ACCOUNT, namespace: MANAGER_NAMESPACE }],
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/service-account-token',
      metadata: {
        name: MANAGER_TOKEN_SECRET,
        namespace: MANAGER_NAMESPACE,
        annotations: { 'kubernetes.io/service-account.name': MANAGER_ACCOUNT },
      },
    },
  ];
}

export interface ClusterSecretInput {
  /** The spoke's name: the cluster's name in Argo CD, what `spec.destination.name` refers to. */
  name: string;
  server: string;
  bearerToken: string;
  caPem: string;
  namespace?: string;
}

/** The config JSON of a cluster Secret: bearer token and the CA (base64 PEM) to verify the server. */
export function clusterConfig(bearerToken: string, caPem: string): string {
  return JSON.stringify({
    bearerToken,
    tlsClientConfig: { insecure: false, caData: Buffer.from(caPem).toString('base64') },
  });
}

export function clusterSecret(i: ClusterSecretInput): object {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: clusterSecretName(i.name),
      namespace: i.namespace ?? ARGOCD_NAMESPACE,
      labels: { 'argocd.argoproj.io/secret-type': 'cluster', [SPOKE_LABEL]: i.name },
    },
    stringData: { name: i.name, server: i.server, config: clusterConfig(i.bearerToken, i.caPem) },
  };
}

const apply = [
  'apply',
  '--server-side',
  '--force-conflicts',
  '--field-manager=gitops-reloader-test-spoke',
  '-f',
  '-',
];
const list = (items: object[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** Waits until the spoke's token controller has filled the token Secret; returns the token. */
async function managerToken(paths: ClusterPaths, spoke: SpokeState): Promise<string> {
  let token = '';
  await until(`the token of ${MANAGER_ACCOUNT} in spoke ${spoke.name}`, 60_000, async () => {
    const out = await kubectl(paths, spoke.kubeconfig, [
      `--namespace=${MANAGER_NAMESPACE}`,
      'get',
      'secret',
      MANAGER_TOKEN_SECRET,
      '-o',
      'jsonpath={.data.token}',
    ]).catch((err: Error) => err.message);
    if (!/^[A-Za-z0-9+/=]{20,}$/.test(out.trim())) return out.trim() || 'no token yet';
    token = Buffer.from(out.trim(), 'base64').toString('utf8');
    return true;
  });
  return token;
}

/** Registers `spoke` in Argo CD (idempotent); `kubeconfig` is the main plane's, where Argo CD runs. */
export async function registerSpoke(
  paths: ClusterPaths,
  kubeconfig: string,
  spoke: SpokeState,
): Promise<string> {
  await kubectl(paths, spoke.kubeconfig, apply, list(managerObjects()));
  const bearerToken = await managerToken(paths, spoke);
  const caPem = await readPem(path.join(spoke.dir, 'pki', 'ca.crt'));
  await kubectl(
    paths,
    kubeconfig,
    apply,
    list([clusterSecret({ name: spoke.name, server: spoke.server, bearerToken, caPem })]),
  );
  return clusterSecretName(spoke.name);
}

export async function unregisterSpoke(paths: ClusterPaths, kubeconfig: string, name: string): Promise<void> {
  await kubectl(paths, kubeconfig, [
    `--namespace=${ARGOCD_NAMESPACE}`,
    'delete',
    'secret',
    clusterSecretName(name),
    '--ignore-not-found',
  ]);
}
