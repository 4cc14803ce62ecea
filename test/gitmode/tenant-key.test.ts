// A tenant's CI with only its namespace's key (issue 21, ADR 0022), end to end: the platform team
// prints the key with `gitops-reloader tenant-key --secret` and applies it into the tenant's
// namespace; the tenant, with rights in its own namespace only, reads it, runs `checksum --in-place`
// on a clone of its repository from a real git server, pushes, and `checksum --check` passes. The
// value it committed is the one the service, holding the service key, publishes for the same config
// on the real control plane. Another tenant's key neither reads this tenant's Secret nor checks its
// repository.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { SERVICE_KEY_ANNOTATION } from '../../service/tenant-key-command.ts';
import { type GitServer, git, inspect, startGitServer } from '../support/git-server.ts';
import { clients, it, type Kube, statusOf } from '../support/kube.ts';
import { waitForEvent } from '../support/observe.ts';
import { hashKeyFile, killAll, runCli, serviceArgs, startService } from '../support/service.ts';
import { kubeConfigAs, serviceAccountWithRole } from '../support/service-account.ts';
import { configMap, deployment } from '../support/workloads.ts';

const ANN = 'gitops-reloader.io/config-hash';
const SECRET = 'gitops-reloader-ci-key';

let server: GitServer;
let scratch: string;
beforeAll(async () => {
  server = await startGitServer();
  scratch = await mkdtemp(path.join(tmpdir(), 'tenant-key-'));
});
afterEach(async () => {
  await killAll();
});
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

/** The live Deployment the manifests in git describe (what the checksum covers: its use of web-config). */
const liveDeployment = () =>
  deployment('web', {
    annotations: { 'reloader.stakater.com/auto': 'true', 'gitops-reloader.io/strategy': 'annotate' },
    container: { envFrom: [{ configMapRef: { name: 'web-config' } }] },
  });

const manifests = (namespace: string, level: string) => `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: ${namespace}
data:
  LOG_LEVEL: ${level}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: ${namespace}
  annotations:
    reloader.stakater.com/auto: "true"
    gitops-reloader.io/strategy: annotate
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.invalid/web:1
          envFrom:
            - configMapRef: {name: web-config}
`;

/** The tenant's identity: a ServiceAccount that may read Secrets in its own namespace and nothing else. */
async function tenantClients(kube: Kube, namespace: string): Promise<Kube> {
  return clients(
    await serviceAccountWithRole(kube, namespace, 'tenant-ci', [
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ]),
  );
}

/** The platform team: prints each namespace's key as a Secret and applies it there. */
async function issueKeys(kube: Kube, serviceKey: string, namespaces: string[]): Promise<void> {
  const r = await runCli([
    'tenant-key',
    `--namespace=${namespaces.join(',')}`,
    `--key-file=${serviceKey}`,
    `--secret=${SECRET}`,
  ]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  for (const doc of parseAllDocuments(r.stdout)) {
    const body = doc.toJS();
    await kube.core.createNamespacedSecret({ namespace: body.metadata.namespace, body });
  }
}

describe("a tenant's CI with its namespace key only", () => {
  it('computes and checks the checksums the service publishes, and another tenant key can do neither', async ({
    kube,
    namespace,
  }) => {
    const other = `${namespace}-other`;
    await kube.core.createNamespace({ body: { metadata: { name: other } } });
    try {
      const serviceKey = await hashKeyFile();
      await issueKeys(kube, serviceKey, [namespace, other]);

      // The tenant reads its key with its own rights; the other namespace's key is out of its reach.
      const ci = await mkdtemp(path.join(scratch, 'ci-'));
      const keyFile = path.join(ci, 'namespace.key');
      const fingerprint = await fetchKey(kube, namespace, keyFile);
      expect(fingerprint).toMatch(/^[0-9a-f]{32}$/);
      const denied = await clients(await kubeConfigAs(kube, namespace, 'tenant-ci'))
        .core.readNamespacedSecret({ name: SECRET, namespace: other })
        .catch((e: unknown) => e);
      expect(statusOf(denied)).toBe(403);
      expect(await readFile(keyFile, 'utf8')).not.toContain(await readFile(serviceKey, 'utf8'));

      // CI: clone, compute with the namespace key (no service key anywhere in its environment), push, check.
      const repo = `${namespace}-app`;
      await server.createRepo(repo, { 'deploy/app.yaml': manifests(namespace, 'debug') });
      const work = path.join(ci, 'work');
      const url = server.url(repo).replace('http://', `http://${server.username}:${server.password}@`);
      await git(ci, 'clone', '--quiet', url, work);
      const env = { GITOPS_RELOADER_NAMESPACE_KEY_FILE: keyFile };
      const stale = await runCli(['checksum', 'deploy', '--check'], { cwd: work, env });
      expect(stale.code).toBe(1);
      expect(stale.stderr).toMatch(/missing: Deployment .*\/web/);
      const wrote = await runCli(['checksum', 'deploy', '--in-place'], { cwd: work, env });
      expect(wrote.stderr).toMatch(/1 file\(s\) updated, 1 workload checksum/);
      expect(wrote.code).toBe(0);
      await git(work, 'commit', '--quiet', '-am', 'checksums');
      await git(work, 'push', '--quiet', 'origin', 'HEAD:main');
      const checked = await runCli(['checksum', 'deploy', '--check'], { cwd: work, env });
      expect(checked.stderr).toMatch(/1 workload checksum\(s\) up to date/);
      expect(checked.code).toBe(0);
      const [, committedDeployment] = parseAllDocuments(
        await inspect.show(path.join(server.root, `${repo}.git`), 'main', 'deploy/app.yaml'),
      ).map((d) => d.toJS());
      const committed = committedDeployment.spec.template.metadata.annotations[ANN];
      expect(committed).toMatch(/^[0-9a-f]{32}$/);

      // Another namespace's key on this repository: refused, not a silently different value.
      const otherKey = path.join(ci, 'other.key');
      expect(await fetchKey(kube, other, otherKey)).toBe(fingerprint);
      const wrong = await runCli(['checksum', 'deploy', '--check'], {
        cwd: work,
        env: { GITOPS_RELOADER_NAMESPACE_KEY_FILE: otherKey },
      });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(
        new RegExp(`names namespace ${namespace}; this render is confined to ${other}`),
      );

      // The service, with the service key, publishes the same value for the same config on the cluster.
      await kube.core.createNamespacedConfigMap({
        namespace,
        body: configMap('web-config', { LOG_LEVEL: 'info' }),
      });
      await kube.apps.createNamespacedDeployment({ namespace, body: liveDeployment() });
      const svc = startService(serviceArgs(namespace, serviceKey, ['--debounce=0s']));
      await svc.waitForLog('ready', (l) => l.msg === 'ready');
      await kube.core.replaceNamespacedConfigMap({
        name: 'web-config',
        namespace,
        body: configMap('web-config', { LOG_LEVEL: 'debug' }),
      });
      await waitForEvent(kube, namespace, 'Reloaded', 'web');
      const live = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
      expect(live.spec?.template.metadata?.annotations?.[ANN]).toBe(committed);
    } finally {
      await kube.core.deleteNamespace({ name: other }).catch(() => undefined);
    }
  });
});

/** A tenant reads its own key (as its CI would) into `file`; returns the service key fingerprint it names. */
async function fetchKey(kube: Kube, namespace: string, file: string): Promise<string | undefined> {
  const tenant = await tenantClients(kube, namespace);
  const s = await tenant.core.readNamespacedSecret({ name: SECRET, namespace });
  await writeFile(file, Buffer.from(s.data?.key ?? '', 'base64'), { mode: 0o600 });
  return s.metadata?.annotations?.[SERVICE_KEY_ANNOTATION];
}
