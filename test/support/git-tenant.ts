// A tenant of git mode, as the git-mode suites build one: a Deployment in the tenant's namespace that
// uses ConfigMap `shared`, asks for the git strategy and names an Argo CD Application; the service
// started for that namespace; a config change that makes it write; a credentials directory.
import { mkdtemp, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Kube } from './kube.ts';
import { hashKeyFile, type RunningService, serviceArgs, startService } from './service.ts';
import { configMap, deployment } from './workloads.ts';

/** The manifest of a Deployment `name` in a repository: what a write would change. */
export const manifest = (name: string) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  replicas: 1
  selector:
    matchLabels: {app: ${name}}
  template:
    metadata:
      labels: {app: ${name}}
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
          envFrom:
            - configMapRef: {name: shared}
`;

/** A tenant's Deployment using ConfigMap `shared`, in git mode, naming `app` as its Argo CD Application. */
export async function gitModeDeployment(
  kube: Kube,
  namespace: string,
  name: string,
  app: string,
): Promise<void> {
  const body = deployment(name, {
    annotations: {
      'gitops-reloader.io/strategy': 'git',
      'reloader.stakater.com/auto': 'true',
      'argocd.argoproj.io/tracking-id': `${app}:apps/Deployment:${namespace}/${name}`,
    },
    container: { envFrom: [{ configMapRef: { name: 'shared' } }] },
  });
  await kube.apps.createNamespacedDeployment({ namespace, body });
}

/** The service for one tenant namespace (which is also Argo CD's, for its Applications), once ready. */
export async function startGitModeService(namespace: string, extra: string[]): Promise<RunningService> {
  const svc = startService(
    serviceArgs(namespace, await hashKeyFile(), [
      '--debounce=0s',
      `--argocd-namespaces=${namespace}`,
      ...extra,
    ]),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  return svc;
}

/** Changes ConfigMap `shared`, which every git-mode Deployment of the namespace uses. */
export async function changeConfig(kube: Kube, namespace: string, value: string): Promise<void> {
  await kube.core.replaceNamespacedConfigMap({
    name: 'shared',
    namespace,
    body: configMap('shared', { v: value }),
  });
}

/** A --git-credentials-dir holding a username and token, under `parent`. */
export async function credentialsDir(parent: string, username: string, token: string): Promise<string> {
  const dir = await mkdtemp(path.join(parent, 'creds-'));
  await writeFile(path.join(dir, 'username'), username, { mode: 0o600 });
  await writeFile(path.join(dir, 'token'), token, { mode: 0o600 });
  return dir;
}
