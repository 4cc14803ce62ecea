// --enable-csi-integration on the real control plane: the driver's own CRDs, status objects written
// the way the driver writes them (test/support/csi-driver.ts), and the workloads' pods as users see them.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AuthorizationV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, inject } from 'vitest';
import { chartDir, run } from '../manifests/tools.ts';
import {
  CsiNode,
  createProviderClass,
  csiVolume,
  installCsiCrds,
  writeStatus,
} from '../support/csi-driver.ts';
import { adminKubeConfig, clients, it, type Kube } from '../support/kube.ts';
import {
  events,
  livePods,
  PodTracker,
  waitAllReplaced,
  waitForEvent,
  waitReadyPods,
} from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { kubeConfigAs, writeKubeConfig } from '../support/service-account.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);
beforeAll(async () => {
  await installCsiCrds(adminKubeConfig());
});

const MOUNT = { volumeMounts: [{ name: 'secrets', mountPath: '/mnt/secrets', readOnly: true }] };

/** A Deployment whose pods mount the class through a CSI volume. */
async function mounting(
  kube: Kube,
  namespace: string,
  name: string,
  providerClass: string,
  annotations: Record<string, string> | undefined,
  replicas = 1,
) {
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment(name, {
      replicas,
      ...(annotations ? { annotations } : {}),
      container: MOUNT,
      volumes: [csiVolume('secrets', providerClass)],
    }),
  });
  return waitReadyPods(kube, namespace, name, replicas);
}

async function csiService(namespace: string, extra: string[] = []): Promise<RunningService> {
  const svc = startService(
    serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--enable-csi-integration', ...extra]),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return svc;
}

async function generation(kube: Kube, namespace: string, name: string): Promise<number | undefined> {
  return (await kube.apps.readNamespacedDeployment({ name, namespace })).metadata?.generation;
}

describe('Secrets Store CSI (--enable-csi-integration)', () => {
  it('reloads a workload once when a mounted object version changes, and not again for its new pods', async ({
    kube,
    namespace,
  }) => {
    await createProviderClass(kube, namespace, 'vault-db');
    const node = new CsiNode(kube, namespace);
    node.setVersions('vault-db', { 'secret/data/db:password': 'v1', 'secret/data/db:user': 'v1' });
    const before = await mounting(
      kube,
      namespace,
      'web',
      'vault-db',
      {
        'secretproviderclass.reloader.stakater.com/reload': 'vault-db',
      },
      2,
    );
    expect(await node.mountAll()).toHaveLength(2);
    const gen = await generation(kube, namespace, 'web');
    const svc = await csiService(namespace);
    const tracker = await PodTracker.start(kube, namespace, 'web');
    try {
      // The rotation reconciler updates each pod's status in turn: two writes, one change.
      expect(
        await node.rotate('vault-db', { 'secret/data/db:password': 'v2', 'secret/data/db:user': 'v1' }),
      ).toHaveLength(2);
      const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
      expect(ev.message).toMatch(/^SecretProviderClass\/vault-db changed; /);
      // The log names the object whose version moved, not the one that stayed.
      const moved = await svc.waitForLog(
        'versions changed',
        (l) => l.msg === 'mounted object versions changed',
      );
      expect(moved.objects).toEqual(['secret/data/db:password']);
      await waitAllReplaced(kube, namespace, 'web', before, 2);
      // The new pods mount the new versions: that is no change, and restarts nothing.
      expect(await node.mountAll()).toHaveLength(2);

      // A later change of another class, on the same watch, proves the mounts above were processed.
      await createProviderClass(kube, namespace, 'marker');
      node.setVersions('marker', { m: '1' });
      await mounting(kube, namespace, 'marker', 'marker', { 'reloader.stakater.com/auto': 'true' });
      await node.mountAll();
      // As on a real node, the rotation comes after the service has seen the first mount (the
      // driver polls every 2 minutes): a rotation within the same moment is absorbed in the baseline.
      await svc.waitForLog(
        'marker baseline',
        (l) => l.msg === 'baseline recorded' && l.workload === 'Deployment/marker',
      );
      await node.rotate('marker', { m: '2' });
      await waitForEvent(kube, namespace, 'Reloaded', 'marker');
      await svc.waitForLog(
        'marker done',
        (l) => l.msg === 'reload complete' && l.workload === 'Deployment/marker',
      );

      expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
      expect(
        svc.logs.filter((l) => l.msg === 'reload started' && l.workload === 'Deployment/web'),
      ).toHaveLength(1);
      // Every old pod replaced exactly once (I3), and the Deployment never written (I1).
      expect(tracker.newSince(before)).toHaveLength(2);
      expect(await generation(kube, namespace, 'web')).toBe(gen);
    } finally {
      tracker.stop();
    }
  });

  it('does not reload a workload that excludes the class or is not annotated', async ({
    kube,
    namespace,
  }) => {
    await createProviderClass(kube, namespace, 'vault-db');
    const node = new CsiNode(kube, namespace);
    node.setVersions('vault-db', { 'secret/data/db': 'v1' });
    const auto = { 'reloader.stakater.com/auto': 'true' };
    const reloaded = await mounting(kube, namespace, 'auto', 'vault-db', auto);
    const excluded = await mounting(kube, namespace, 'excluded', 'vault-db', {
      ...auto,
      'secretproviderclasses.exclude.reloader.stakater.com/reload': 'vault-db',
    });
    const plain = await mounting(kube, namespace, 'plain', 'vault-db', undefined);
    // Opted in to Secrets only: a class is not a Secret.
    const secretsOnly = await mounting(kube, namespace, 'secrets-only', 'vault-db', {
      'secret.reloader.stakater.com/auto': 'true',
    });
    expect(await node.mountAll()).toHaveLength(4);
    const svc = await csiService(namespace);

    await node.rotate('vault-db', { 'secret/data/db': 'v2' });
    await waitForEvent(kube, namespace, 'Reloaded', 'auto');
    await waitAllReplaced(kube, namespace, 'auto', reloaded, 1);
    await svc.waitForLog('auto done', (l) => l.msg === 'reload complete' && l.workload === 'Deployment/auto');

    const started = svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload);
    expect(started).toEqual(['Deployment/auto']);
    for (const [name, pods] of [
      ['excluded', excluded],
      ['plain', plain],
      ['secrets-only', secretsOnly],
    ] as const) {
      expect(await events(kube, namespace, 'Reloaded', name), name).toHaveLength(0);
      expect(
        (await livePods(kube, namespace, name)).map((p) => p.uid),
        name,
      ).toEqual(pods.map((p) => p.uid));
    }
  });

  it.for([
    [true, 'reloads on a version change with only the permissions the chart grants'],
    [false, 'warns and keeps reloading ConfigMaps when the chart grants no CSI access'],
  ] as const)('csiIntegration.enabled=%s: %s', async ([enabled], { kube, namespace }) => {
    const release = `gr-${randomBytes(3).toString('hex')}`;
    const fullname = `${release}-gitops-reloader`;
    const apps = (await kube.core.createNamespace({ body: { metadata: { generateName: 'csi-apps-' } } }))
      .metadata?.name as string;
    const home = path.join(tmpdir(), 'gr-helm-home');
    const helm = (args: string[]) =>
      run('helm', [...args, '--kubeconfig', inject('kubeconfig')], {
        env: {
          HELM_CACHE_HOME: path.join(home, 'cache'),
          HELM_CONFIG_HOME: path.join(home, 'config'),
          HELM_DATA_HOME: path.join(home, 'data'),
        },
      });
    try {
      await helm([
        'install',
        release,
        chartDir,
        '--namespace',
        namespace,
        '--set',
        `csiIntegration.enabled=${enabled}`,
      ]);
      const asSa = await kubeConfigAs(kube, namespace, fullname);
      const kubeconfig = await writeKubeConfig(asSa, await mkdtemp(path.join(tmpdir(), 'gr-csi-')));

      await createProviderClass(kube, apps, 'vault-db');
      const node = new CsiNode(kube, apps);
      node.setVersions('vault-db', { 'secret/data/db': 'v1' });
      await kube.core.createNamespacedConfigMap({ namespace: apps, body: configMap('app', { k: '1' }) });
      const before = await mounting(kube, apps, 'web', 'vault-db', { 'reloader.stakater.com/auto': 'true' });
      await kube.apps.createNamespacedDeployment({
        namespace: apps,
        body: deployment('cm', {
          annotations: { 'reloader.stakater.com/auto': 'true' },
          container: { envFrom: [{ configMapRef: { name: 'app' } }] },
        }),
      });
      await waitReadyPods(kube, apps, 'cm', 1);
      await node.mountAll();

      // The chart's flags, with the chart's RBAC (the release's ServiceAccount token).
      const svc = startService([
        'serve',
        `--kubeconfig=${kubeconfig}`,
        `--namespaces=${apps}`,
        `--release-namespace=${namespace}`,
        `--release-name=${fullname}`,
        `--hash-key-file=${await hashKeyFile()}`,
        '--http-address=127.0.0.1:0',
        '--debounce=0s',
        '--min-reload-interval=0s',
        '--argocd-namespaces=',
        '--enable-csi-integration',
        '--log-level=debug',
      ]);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      const warned = svc.logs.filter((l) => /listing the CSI driver objects is forbidden/.test(l.msg));
      expect(warned).toHaveLength(enabled ? 0 : 1);

      await node.rotate('vault-db', { 'secret/data/db': 'v2' });
      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: apps,
        body: configMap('app', { k: '2' }),
      });
      await waitForEvent(kube, apps, 'Reloaded', 'cm');
      await svc.waitForLog('cm done', (l) => l.msg === 'reload complete' && l.workload === 'Deployment/cm');
      if (enabled) {
        await waitForEvent(kube, apps, 'Reloaded', 'web');
        await waitAllReplaced(kube, apps, 'web', before, 1);
        const refused = [...svc.logs.map((l) => JSON.stringify(l)), ...svc.text].filter((l) =>
          /forbidden|\b403\b|CSI driver CRDs are not served/i.test(l),
        );
        expect(refused).toEqual([]);
      } else {
        // The rotation was processed by nobody: the ConfigMap change, later, was.
        expect(await events(kube, apps, 'Reloaded', 'web')).toHaveLength(0);
        expect((await livePods(kube, apps, 'web')).map((p) => p.uid)).toEqual(before.map((p) => p.uid));
      }
    } finally {
      await helm(['uninstall', release, '--namespace', namespace]).catch(() => undefined);
      await kube.core.deleteNamespace({ name: apps });
    }
  });

  it("does not let a tenant's status object reload a workload in another namespace", async ({
    kube,
    namespace,
  }) => {
    // `namespace` is the victim's (and the service's); the tenant has rights on statuses in its own only.
    const tenant = (await kube.core.createNamespace({ body: { metadata: { generateName: 'csi-tenant-' } } }))
      .metadata?.name as string;
    try {
      await createProviderClass(kube, namespace, 'vault-db');
      const victimNode = new CsiNode(kube, namespace);
      victimNode.setVersions('vault-db', { 'secret/data/db': 'v1' });
      const victim = await mounting(kube, namespace, 'web', 'vault-db', {
        'reloader.stakater.com/auto': 'true',
      });
      await victimNode.mountAll();

      await createProviderClass(kube, tenant, 'vault-db');
      const tenantNode = new CsiNode(kube, tenant);
      tenantNode.setVersions('vault-db', { 'secret/data/db': 'v1' });
      const own = await mounting(kube, tenant, 'own', 'vault-db', { 'reloader.stakater.com/auto': 'true' });
      await tenantNode.mountAll();

      const svc = startService(
        serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--enable-csi-integration']).map((a) =>
          a.startsWith('--namespaces=') ? `--namespaces=${namespace},${tenant}` : a,
        ),
      );
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);

      const asTenant = clients(await tenantAccount(kube, tenant)).custom;
      const victimPod = victim[0]?.name as string;
      // A status in the tenant's namespace that names the victim's pod and class, with a new version.
      await writeStatus(asTenant, tenant, `${victimPod}-${namespace}-vault-db`, {
        podName: victimPod,
        targetPath: `/var/lib/kubelet/pods/${victim[0]?.uid}/volumes/kubernetes.io~csi/secrets/mount`,
        mounted: true,
        secretProviderClassName: 'vault-db',
        objects: [{ id: 'secret/data/db', version: 'v666' }],
      });
      // One that tries to name a class in the victim's namespace.
      await writeStatus(asTenant, tenant, 'reach-out', {
        podName: victimPod,
        mounted: true,
        secretProviderClassName: `../${namespace}/vault-db`,
        objects: [{ id: 'secret/data/db', version: 'v667' }],
      });
      // The API server itself keeps a tenant from writing statuses where it has no rights.
      await expect(
        writeStatus(asTenant, namespace, 'direct', { secretProviderClassName: 'vault-db', objects: [] }),
      ).rejects.toMatchObject({ code: 403 });

      // The tenant did change a version of its own namespace's class: its own workload reloads.
      await waitForEvent(kube, tenant, 'Reloaded', 'own');
      await waitAllReplaced(kube, tenant, 'own', own, 1);
      const invalid = await waitForEvent(kube, tenant, 'ReloadConfigInvalid', 'reach-out');
      expect(invalid.type).toBe('Warning');
      expect(invalid.message).toMatch(/is not an object name/);

      expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
      expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(victim.map((p) => p.uid));
      expect(svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.namespace)).toEqual([tenant]);
    } finally {
      await kube.core.deleteNamespace({ name: tenant });
    }
  });
});

/** A ServiceAccount in the tenant namespace allowed to create and update statuses there, and only there. */
async function tenantAccount(kube: Kube, namespace: string): Promise<KubeConfig> {
  const name = 'tenant';
  await kube.core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await kube.rbac.createNamespacedRole({
    namespace,
    body: {
      metadata: { name },
      rules: [
        {
          apiGroups: ['secrets-store.csi.x-k8s.io'],
          resources: ['secretproviderclasspodstatuses'],
          verbs: ['get', 'list', 'create', 'update'],
        },
      ],
    },
  });
  await kube.rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    },
  });
  const token = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 600 } },
  });
  const cluster = kube.kc.getCurrentCluster();
  if (!cluster) throw new Error('admin kubeconfig has no cluster');
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [cluster],
    users: [{ name, token: token.status?.token }],
    contexts: [{ name, cluster: cluster.name, user: name }],
    currentContext: name,
  });
  // RBAC takes effect with the binding; wait until the API server authorizes the tenant.
  await waitFor(
    async () => {
      const review = await kube.kc.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
        body: {
          spec: {
            user: `system:serviceaccount:${namespace}:${name}`,
            resourceAttributes: {
              group: 'secrets-store.csi.x-k8s.io',
              resource: 'secretproviderclasspodstatuses',
              verb: 'create',
              namespace,
            },
          },
        },
      });
      return review.status?.allowed ? true : pending(review.status);
    },
    { describe: 'the tenant may create statuses in its namespace' },
  );
  return kc;
}
