// Hub mode under failure, on the real control plane, two replicas of the chart (hub.enabled): served
// clusters are the main plane through their own proxies (test/support/hub.ts), so a cluster can be
// made unreachable (the proxy cut), its credentials rotated, its Secret removed mid-reload.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Cluster, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, inject } from 'vitest';
import { CREDENTIALS_LABEL } from '../../service/hub/cluster-secret.ts';
import { helmTemplate, parseObjects, run } from '../manifests/tools.ts';
import { idle } from '../support/decisions.ts';
import {
  adminToken,
  changeSettings,
  clusterLeaseHolders,
  clusterSecret,
  hubRelease,
  type ProxiedCluster,
  proxiedClusters,
  removeAdminToken,
  settingsAndWeb,
} from '../support/hub.ts';
import { it, type Kube, statusOf } from '../support/kube.ts';
import { PodTracker, type PodView, waitAllReplaced } from '../support/observe.ts';
import type { Release } from '../support/replicas.ts';
import { type Replica, startReplica } from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';

const PODS = 2;

/** Two replicas of the release; returns once every cluster's Lease is held and its holder acts. */
async function twoReplicas(
  kube: Kube,
  release: Release,
  clusters: ProxiedCluster[],
  onTestFinished: (f: () => Promise<void>) => void,
): Promise<Replica[]> {
  const replicas: Replica[] = [];
  onTestFinished(async () => {
    await Promise.all(replicas.map((r) => r.svc.stop().then(() => r.proxy.close())));
  });
  for (const id of ['hub-x', 'hub-y']) replicas.push(await startReplica(kube, release, id));
  await waitFor(
    async () => {
      const held = await clusterLeaseHolders(kube, release);
      const free = clusters.filter((c) => !held.get(c.id));
      if (free.length > 0) return pending(free.map((c) => c.name));
      const idle = clusters.filter(
        (c) => !replicas.some((r) => r.svc.logs.some((l) => l.msg === 'ready' && l.cluster === c.name)),
      );
      return idle.length === 0 ? true : pending(idle.map((c) => c.name));
    },
    { describe: 'every cluster led by an acting replica', timeout: 90_000 },
  );
  return replicas;
}

/** One config change in `c`: its pods all replaced, the reload completed by a replica, each pod once. */
async function reloadsOnce(
  kube: Kube,
  replicas: Replica[],
  c: ProxiedCluster,
  before: PodView[],
): Promise<void> {
  const tracker = await PodTracker.start(kube, c.namespace, 'web');
  await changeSettings(kube, c.namespace, '2');
  await waitAllReplaced(kube, c.namespace, 'web', before, PODS);
  await Promise.any(
    replicas.map((r) =>
      r.svc.waitForLog(
        `${r.identity} completes`,
        (l) => l.msg === 'reload complete' && l.cluster === c.name,
        60_000,
      ),
    ),
  );
  tracker.stop();
  expect(tracker.newSince(before), 'each pod replaced once').toHaveLength(PODS);
}

const logs = (replicas: Replica[], msg: string, cluster: string) =>
  replicas.flatMap((r) => r.svc.logs.filter((l) => l.msg === msg && l.cluster === cluster));

describe('hub mode under failure', { timeout: 600_000 }, () => {
  it('a cluster that cannot be reached holds only its own reloads, and its change arrives when it is back; a namespace outside every scope is never touched', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const token = await adminToken(kube, namespace);
    onTestFinished(() => removeAdminToken(kube, namespace));
    const clusters = await proxiedClusters(kube, namespace, 3, token, onTestFinished);
    const before = new Map<string, PodView[]>();
    for (const c of clusters) before.set(c.name, await settingsAndWeb(kube, c.namespace, PODS));
    // Same API server, but in no cluster Secret's `namespaces`: no engine may act here.
    const outside = `${namespace}-outside`.slice(0, 63);
    await kube.core.createNamespace({ body: { metadata: { name: outside } } });
    onTestFinished(async () => {
      await kube.core.deleteNamespace({ name: outside }).catch(() => undefined);
    });
    const outsideBefore = await settingsAndWeb(kube, outside, PODS);

    const release = await hubRelease(namespace);
    const replicas = await twoReplicas(kube, release, clusters, onTestFinished);
    const [c0, c1, c2] = clusters as [ProxiedCluster, ProxiedCluster, ProxiedCluster];
    const trackers = new Map<string, PodTracker>();
    for (const c of clusters) trackers.set(c.name, await PodTracker.start(kube, c.namespace, 'web'));
    const outsideTracker = await PodTracker.start(kube, outside, 'web');

    c1.proxy.cut();
    for (const c of clusters) await changeSettings(kube, c.namespace, '2');
    await changeSettings(kube, outside, '2');
    // The reachable clusters reload; the cut one does not, and holds no one else up.
    for (const c of [c0, c2])
      await waitAllReplaced(kube, c.namespace, 'web', before.get(c.name) as PodView[], PODS);
    // The reachable clusters' changes, made with the others, are decided and done (nothing under
    // way for web there). The cut cluster cannot be reached to be changed, and the outside namespace
    // is watched by no engine: their pods are checked now.
    const services = replicas.map((r) => r.svc);
    for (const c of [c0, c2]) await idle(services, `Deployment/${c.namespace}/web`, { cluster: c.name });
    const moved = (trackers.get(c1.name) as PodTracker).newSince(before.get(c1.name) as PodView[]);
    expect(
      moved.map((p) => p.name),
      `${c1.name} is cut off, yet pods were replaced`,
    ).toEqual([]);
    const out = outsideTracker.newSince(outsideBefore);
    expect(
      out.map((p) => p.name),
      'pods replaced outside every scope',
    ).toEqual([]);
    expect(logs(replicas, 'reload started', c1.name)).toHaveLength(0);

    // Back: the change made while it was cut off arrives, once.
    const healedAt = Date.now();
    c1.proxy.heal();
    await waitAllReplaced(kube, c1.namespace, 'web', before.get(c1.name) as PodView[], PODS);
    console.log(
      `[hub failures] ${c1.name} reloaded ${((Date.now() - healedAt) / 1000).toFixed(1)}s after it was reachable again`,
    );
    // Nothing more under way for web in any cluster: a second reload would be waited for, and counted.
    for (const c of clusters) {
      await idle(services, `Deployment/${c.namespace}/web`, { cluster: c.name });
      const fresh = (trackers.get(c.name) as PodTracker).newSince(before.get(c.name) as PodView[]);
      expect(fresh, `${c.name}: new pods for ${PODS}`).toHaveLength(PODS);
    }
    expect(outsideTracker.newSince(outsideBefore), 'pods replaced outside every scope').toEqual([]);
    for (const c of clusters) {
      const t = trackers.get(c.name) as PodTracker;
      t.stop();
      expect(t.newSince(before.get(c.name) as PodView[]), `${c.name}: each pod replaced once`).toHaveLength(
        PODS,
      );
    }
    outsideTracker.stop();
    expect(outsideTracker.newSince(outsideBefore)).toHaveLength(0);
  });

  it('rotated credentials are used without restarting the cluster’s engine', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const first = await adminToken(kube, namespace, 'manager-a');
    onTestFinished(() => removeAdminToken(kube, namespace, 'manager-a'));
    const [c0] = (await proxiedClusters(kube, namespace, 1, first, onTestFinished)) as [ProxiedCluster];
    const before = await settingsAndWeb(kube, c0.namespace, PODS);
    const release = await hubRelease(namespace);
    const replicas = await twoReplicas(kube, release, [c0], onTestFinished);

    // Rotation as a platform team does it: a new token in the Secret, then the old one revoked.
    const second = await adminToken(kube, namespace, 'manager-b');
    onTestFinished(() => removeAdminToken(kube, namespace, 'manager-b'));
    const secret = await kube.core.readNamespacedSecret({ name: c0.secret, namespace });
    const config = JSON.parse(Buffer.from(secret.data?.config ?? '', 'base64').toString('utf8'));
    await kube.core.replaceNamespacedSecret({
      name: c0.secret,
      namespace,
      body: {
        ...secret,
        data: {
          ...secret.data,
          config: Buffer.from(JSON.stringify({ ...config, bearerToken: second })).toString('base64'),
        },
      },
    });
    for (const r of replicas) {
      await r.svc.waitForLog(
        `${r.identity} rotated`,
        (l) => l.msg === 'cluster credentials rotated' && l.cluster === c0.name,
        30_000,
      );
    }
    await kube.core.deleteNamespacedServiceAccount({ name: 'manager-a', namespace });
    await removeAdminToken(kube, namespace, 'manager-a');
    // The old token no longer works.
    const old = new KubeConfig();
    const cluster = kube.kc.getCurrentCluster() as Cluster;
    old.loadFromOptions({
      clusters: [cluster],
      users: [{ name: 'old', token: first }],
      contexts: [{ name: 'old', cluster: cluster.name, user: 'old' }],
      currentContext: 'old',
    });
    await waitFor(
      async () => {
        const status = await old
          .makeApiClient(CoreV1Api)
          .listNamespacedConfigMap({ namespace: c0.namespace })
          .then(
            () => 200,
            (err) => statusOf(err),
          );
        return status === 401 ? true : pending(status);
      },
      { describe: 'the first token revoked', timeout: 30_000 },
    );

    // Completed with the new token (the old one answers 401 by now).
    await reloadsOnce(kube, replicas, c0, before);
    // Served all along: started once in each replica, never stopped.
    expect(logs(replicas, 'serving cluster', c0.name)).toHaveLength(2);
    expect(logs(replicas, 'stopped serving cluster', c0.name)).toHaveLength(0);
  });

  it('a cluster Secret removed while its reload runs: nothing more is written there; added again, the reload is finished, each pod once', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const token = await adminToken(kube, namespace);
    onTestFinished(() => removeAdminToken(kube, namespace));
    const clusters = await proxiedClusters(kube, namespace, 2, token, onTestFinished);
    const [c0, c1] = clusters as [ProxiedCluster, ProxiedCluster];
    const before0 = await settingsAndWeb(kube, c0.namespace, PODS);
    const before1 = await settingsAndWeb(kube, c1.namespace, PODS);
    const release = await hubRelease(namespace);
    const replicas = await twoReplicas(kube, release, clusters, onTestFinished);
    const tracker = await PodTracker.start(kube, c0.namespace, 'web');

    // The reload's first write to pods lands; its answer is held while the Secret goes.
    const hold = c0.proxy.hold((r) => r.method !== 'GET' && /\/pods(\/|$|\?)/.test(r.path));
    await changeSettings(kube, c0.namespace, '2');
    await hold.held;
    await kube.core.deleteNamespacedSecret({ name: c0.secret, namespace });
    for (const r of replicas) {
      await r.svc.waitForLog(
        `${r.identity} stops serving ${c0.name}`,
        (l) => l.msg === 'stopped serving cluster' && l.cluster === c0.name,
        60_000,
      );
    }
    const stoppedAt = Date.now();
    hold.release();
    // The other cluster is served on.
    await changeSettings(kube, c1.namespace, '2');
    await waitAllReplaced(kube, c1.namespace, 'web', before1, PODS);
    const writesAfter = c0.proxy.requests.filter((q) => q.method !== 'GET' && q.sentAt > stoppedAt);
    expect(
      writesAfter.map((q) => `${q.method} ${q.path}`),
      'no write to a cluster no longer served',
    ).toEqual([]);

    // Added again: served again, and the interrupted reload finished from the ledger, each pod once.
    await clusterSecret(kube, {
      namespace,
      name: c0.name,
      server: c0.proxy.url,
      caData: await c0.proxy.caData(),
      token,
      scope: [c0.namespace],
    });
    await waitAllReplaced(kube, c0.namespace, 'web', before0, PODS);
    // Nothing more under way for web there: a second recycle would be waited for, and counted below.
    await idle(
      replicas.map((r) => r.svc),
      `Deployment/${c0.namespace}/web`,
      { cluster: c0.name },
    );
    tracker.stop();
    expect(tracker.newSince(before0), 'each pod replaced once').toHaveLength(PODS);
  });

  it("least privilege: our own credentials Secret, with the chart's ClusterRole in the served cluster, is used instead of Argo CD's", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // In the served cluster: the chart's ServiceAccount, ClusterRole and binding, nothing else.
    const spokeRelease = `gr-spoke-${namespace.slice(-5)}`;
    const rbac = parseObjects(await helmTemplate(spokeRelease, namespace)).filter((o) =>
      ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind),
    );
    expect(rbac.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'ServiceAccount']);
    await run('kubectl', ['--kubeconfig', inject('kubeconfig'), 'apply', '-f', '-'], {
      input: rbac.map((o) => JSON.stringify(o)).join('\n---\n'),
    });
    onTestFinished(async () => {
      await run(
        'kubectl',
        ['--kubeconfig', inject('kubeconfig'), 'delete', '--ignore-not-found', '-f', '-'],
        {
          input: rbac
            .filter((o) => o.kind !== 'ServiceAccount')
            .map((o) => JSON.stringify(o))
            .join('\n---\n'),
        },
      ).catch(() => undefined);
    });
    const sa = rbac.find((o) => o.kind === 'ServiceAccount')?.metadata.name as string;
    const tr = await kube.core.createNamespacedServiceAccountToken({
      name: sa,
      namespace,
      body: { spec: { expirationSeconds: 3600, audiences: [] } },
    });
    // Argo CD's credentials in the cluster Secret do not work here: only ours can.
    const [c0] = (await proxiedClusters(kube, namespace, 1, 'not-a-token', onTestFinished)) as [
      ProxiedCluster,
    ];
    await kube.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'c0-credentials', labels: { [CREDENTIALS_LABEL]: 'true' } },
        stringData: {
          server: c0.proxy.url,
          config: JSON.stringify({
            bearerToken: tr.status?.token,
            tlsClientConfig: { caData: await c0.proxy.caData() },
          }),
        },
      },
    });
    const before = await settingsAndWeb(kube, c0.namespace, PODS);
    const release = await hubRelease(namespace);
    const replicas = await twoReplicas(kube, release, [c0], onTestFinished);
    for (const l of logs(replicas, 'serving cluster', c0.name))
      expect(l.credentials).toBe(`credentials Secret ${namespace}/c0-credentials`);

    await reloadsOnce(kube, replicas, c0, before);
  });

  it('an exec credential plugin the chart allows (hub.execCommands) supplies the token; one it does not list is never run', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const token = await adminToken(kube, namespace);
    onTestFinished(() => removeAdminToken(kube, namespace));
    // A real plugin: prints the ExecCredential client-go expects, and counts its runs.
    const dir = await mkdtemp(path.join(tmpdir(), 'gr-hub-exec-'));
    const plugin = path.join(dir, 'login.sh');
    const runs = path.join(dir, 'runs');
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token },
    });
    await writeFile(plugin, `#!/bin/sh\necho run >> ${runs}\ncat <<'X'\n${credential}\nX\n`, { mode: 0o755 });
    const notListed = path.join(dir, 'other.sh');
    await writeFile(notListed, `#!/bin/sh\necho run >> ${runs}-other\n`, { mode: 0o755 });

    const [c0, c1] = (await proxiedClusters(kube, namespace, 2, 'not-a-token', onTestFinished)) as [
      ProxiedCluster,
      ProxiedCluster,
    ];
    for (const [c, command] of [
      [c0, plugin],
      [c1, notListed],
    ] as const) {
      await kube.core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: `${c.name}-credentials`, labels: { [CREDENTIALS_LABEL]: 'true' } },
          stringData: {
            server: c.proxy.url,
            config: JSON.stringify({
              execProviderConfig: { command, apiVersion: 'client.authentication.k8s.io/v1' },
              tlsClientConfig: { caData: await c.proxy.caData() },
            }),
          },
        },
      });
    }
    const before = await settingsAndWeb(kube, c0.namespace, PODS);
    const release = await hubRelease(namespace, [`hub.execCommands={${plugin}}`]);
    const replicas = await twoReplicas(kube, release, [c0], onTestFinished);
    for (const l of logs(replicas, 'serving cluster', c0.name))
      expect(l.credentials).toBe(`credentials Secret ${namespace}/c0-credentials`);
    for (const r of replicas) {
      const refusal = await r.svc.waitForLog(
        `${r.identity} refuses the unlisted plugin`,
        (l) => l.msg === 'credentials Secret refused' && l.secret === `${namespace}/c1-credentials`,
        30_000,
      );
      expect(String(refusal.reason)).toContain('--hub-exec-commands does not list');
    }

    await reloadsOnce(kube, replicas, c0, before);
    // Run at most once per replica (no expiry: kept), and the unlisted one never.
    const ran = (await readFile(runs, 'utf8')).trim().split('\n').length;
    expect(ran).toBeGreaterThanOrEqual(1);
    expect(ran, 'kept, not run per request').toBeLessThanOrEqual(replicas.length);
    await expect(readFile(`${runs}-other`, 'utf8')).rejects.toThrow();
  });
});
