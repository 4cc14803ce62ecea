// Hub mode on real control planes: the chart rendered with hub.enabled and Argo CD values, two
// replicas in the hub (the main plane, where the real Argo CD runs), serving spokes registered in
// Argo CD as cluster Secrets. Spoke hub-b is opted in (label gitops-reloader.io/serve=true); hub-c is
// not, until a test opts it in at run time.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { canonicalServerURL } from '../../service/core/repo-url.ts';
import { clusterId, HUB_SERVE_LABEL } from '../../service/hub/cluster-secret.ts';
import { cm, reloadedCount, web } from '../argocd/fixtures.ts';
import { ArgoApp, argocdEndpoints, GitRepo, type Manifest, toFiles } from '../support/argocd.ts';
import { idle } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { FAST_LEASE, installRelease, metric, type Replica, startReplica } from '../support/replicas.ts';
import { type RunningSpoke, spoke } from '../support/spokes.ts';

// Two configs changed by one commit: one sync, one reload (per-cluster batching).
const manifests = (v: string): Manifest[] => [
  cm('settings', { v }),
  cm('features', { v }),
  web('web', { configMaps: ['settings', 'features'], replicas: 2 }),
];

async function optIn(kube: Kube, s: RunningSpoke, on: boolean) {
  await kube.core.patchNamespacedSecret(
    {
      name: s.clusterSecret,
      namespace: argocdEndpoints().namespace,
      body: { metadata: { labels: { [HUB_SERVE_LABEL]: on ? 'true' : null } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** The namespace in the spoke, removed when the test ends. */
async function spokeNamespace(
  s: RunningSpoke,
  namespace: string,
  onTestFinished: (f: () => Promise<void>) => void,
) {
  await s.kube.core.createNamespace({ body: { metadata: { name: namespace } } });
  onTestFinished(async () => {
    await s.kube.core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });
}

async function hubReplicas(kube: Kube, namespace: string, started: Replica[]): Promise<Replica[]> {
  const release = await installRelease(namespace, {
    // --namespaces: the hub serves only this namespace in each spoke (spokes are shared by suites).
    watch: [namespace],
    set: ['argocd.enabled=true', 'hub.enabled=true'],
    extraArgs: FAST_LEASE,
  });
  for (const id of ['hub-replica-a', 'hub-replica-b']) started.push(await startReplica(kube, release, id));
  return started;
}

const logsOf = (replicas: Replica[], msg: string, cluster?: string) =>
  replicas.flatMap((r) =>
    r.svc.logs.filter((l) => l.msg === msg && (cluster === undefined || l.cluster === cluster)),
  );

describe('hub mode', { timeout: 600_000 }, () => {
  it('reloads once in the spoke an Application deploys to; a spoke not opted in is not served, until it is', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const [b, c] = [await spoke('hub-b'), await spoke('hub-c')];
    await optIn(kube, b, true);
    await optIn(kube, c, false);
    await spokeNamespace(b, namespace, onTestFinished);
    await spokeNamespace(c, namespace, onTestFinished);

    // The same names in both spokes: only the Application's destination tells them apart.
    const repoB = await GitRepo.create(`${namespace}-b`, toFiles(manifests('1')));
    const repoC = await GitRepo.create(`${namespace}-c`, toFiles(manifests('1')));
    const appB = await ArgoApp.create(kube, {
      name: `${namespace}-b`,
      repo: repoB,
      destination: namespace,
      cluster: b.name,
    });
    onTestFinished(() => appB.delete());
    const appC = await ArgoApp.create(kube, {
      name: `${namespace}-c`,
      repo: repoC,
      destination: namespace,
      cluster: c.name,
    });
    onTestFinished(() => appC.delete());
    await appB.waitSynced(await repoB.head(), 180_000);
    await appC.waitSynced(await repoC.head(), 180_000);
    const beforeB = await waitReadyPods(b.kube, namespace, 'web', 2);
    const beforeC = await waitReadyPods(c.kube, namespace, 'web', 2);
    const templateB = (await b.kube.apps.readNamespacedDeployment({ name: 'web', namespace })).spec?.template;

    const started: Replica[] = [];
    onTestFinished(async () => {
      await Promise.all(started.map((r) => r.svc.stop().then(() => r.proxy.close())));
    });
    const replicas = await hubReplicas(kube, namespace, started);
    // One replica acts for hub-b (its Lease), the other stands by for it.
    const acting = await Promise.race(
      replicas.map((r) =>
        r.svc.waitForLog(
          `${r.identity} acts for hub-b`,
          (l) => l.msg === 'ready' && l.cluster === b.name,
          90_000,
        ),
      ),
    );
    expect(acting.cluster).toBe(b.name);
    expect(logsOf(replicas, 'serving cluster', c.name), 'hub-c is not opted in').toHaveLength(0);

    // A commit changes the config in both spokes; only the served one reloads, once.
    const podsB = await PodTracker.start(b.kube, namespace, 'web');
    const podsC = await PodTracker.start(c.kube, namespace, 'web');
    const shaB = await appB.commit(repoB, toFiles(manifests('2')), 'Change settings in hub-b');
    const shaC = await appC.commit(repoC, toFiles(manifests('2')), 'Change settings in hub-c');
    await appB.waitOperation(shaB, 'Succeeded', 180_000);
    await appC.waitOperation(shaC, 'Succeeded', 180_000);
    const reloaded = await waitForEvent(b.kube, namespace, 'Reloaded', 'web');
    for (const c of ['ConfigMap/settings', 'ConfigMap/features']) expect(reloaded.message).toContain(c);
    await waitAllReplaced(b.kube, namespace, 'web', beforeB, 2);
    const complete = await Promise.race(
      replicas.map((r) =>
        r.svc.waitForLog(
          'reload complete in hub-b',
          (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
          60_000,
        ),
      ),
    );
    expect(complete.cluster).toBe(b.name);
    // Nothing more under way for web in hub-b (a second reload would be waited for, and counted);
    // hub-c is served by no engine, and its pods are checked once hub-b's change is done.
    await idle(
      replicas.map((r) => r.svc),
      `Deployment/${namespace}/web`,
      { cluster: b.name },
    );
    const extra = logsOf(replicas, 'reload started');
    expect(extra.length, `more than one reload: ${JSON.stringify(extra)}`).toBeLessThanOrEqual(1);
    const moved = (await waitReadyPods(c.kube, namespace, 'web', 2)).filter(
      (p) => !beforeC.some((q) => q.uid === p.uid),
    );
    expect(
      moved.map((p) => p.name),
      'hub-c pods replaced',
    ).toEqual([]);
    podsB.stop();
    podsC.stop();
    expect(logsOf(replicas, 'reload started').map((l) => [l.cluster, l.workload])).toEqual([
      [b.name, 'Deployment/web'],
    ]);
    expect(podsB.newSince(beforeB), 'each hub-b pod replaced once').toHaveLength(2);
    expect(podsC.newSince(beforeC), 'no hub-c pod replaced').toHaveLength(0);
    expect(await reloadedCount(b.kube, namespace, 'web')).toBe(1);
    // /metrics names the cluster: one reload counted for hub-b, across the two replicas.
    const counted = await Promise.all(
      replicas.map((r) => metric(r, 'gitops_reloader_reloads_total', { cluster: b.name }).catch(() => 0)),
    );
    expect(counted.reduce((x, y) => x + y, 0)).toBe(1);
    // The ledger and Event writes to the hub's own API server passed the replica's one budget for it
    // (--hub-write-qps, issue 36), not hub-b's: its histogram counted them.
    const homeWrites = await Promise.all(
      replicas.map((r) => metric(r, 'gitops_reloader_hub_write_wait_seconds_count')),
    );
    expect(homeWrites.reduce((x, y) => x + y, 0)).toBeGreaterThan(0);
    expect(await reloadedCount(c.kube, namespace, 'web')).toBe(0);
    const liveB = await b.kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(liveB.spec?.template, 'the template git gave').toEqual(templateB);
    for (const m of new Set((liveB.metadata?.managedFields ?? []).map((f) => f.manager)))
      expect(m).toMatch(/^(argocd-controller|kube-controller-manager)$/);
    // Its ledger lives in the hub's release namespace, under the cluster's id (from its server);
    // nothing in hub-b.
    const idB = clusterId(canonicalServerURL(b.server) ?? b.server);
    const ledgers = (
      await kube.core.listNamespacedConfigMap({
        namespace,
        labelSelector: 'app.kubernetes.io/component=ledger',
      })
    ).items;
    expect(ledgers.map((x) => x.metadata?.name).some((n) => n?.includes(`-${idB}-ledger`))).toBe(true);
    const inSpoke = (
      await b.kube.core.listNamespacedConfigMap({
        namespace,
        labelSelector: 'app.kubernetes.io/component=ledger',
      })
    ).items;
    expect(inSpoke).toHaveLength(0);

    // hub-c opted in at run time: served without a restart, and its next change reloads there.
    await optIn(kube, c, true);
    onTestFinished(() => optIn(kube, c, false));
    await Promise.race(
      replicas.map((r) =>
        r.svc.waitForLog(
          `${r.identity} acts for hub-c`,
          (l) => l.msg === 'ready' && l.cluster === c.name,
          90_000,
        ),
      ),
    );
    const shaC3 = await appC.commit(repoC, toFiles(manifests('3')), 'Change settings in hub-c again');
    await appC.waitOperation(shaC3, 'Succeeded', 180_000);
    await waitAllReplaced(c.kube, namespace, 'web', beforeC, 2);
    await waitForEvent(c.kube, namespace, 'Reloaded', 'web');
    expect(logsOf(replicas, 'reload started', c.name)).toHaveLength(1);

    // Opted out again: no longer served.
    await optIn(kube, c, false);
    await Promise.race(
      replicas.map((r) =>
        r.svc.waitForLog(
          'hub-c no longer served',
          (l) => l.msg === 'stopped serving cluster' && l.cluster === c.name,
          30_000,
        ),
      ),
    );
  });
});
