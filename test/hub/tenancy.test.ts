// Hub mode against hostile or broken credentials (issue 35), on the real control plane, with the chart
// (hub.enabled) and one replica: served clusters are the main plane through their own proxies
// (test/support/hub.ts), whose records say which credentials reached the API server (a digest of
// each request's Authorization header). Runs side by side with other files: every name is the test's.
//
// - Finding 3: a credentials Secret of ours that is refused never lets Argo CD's (cluster-admin)
//   credentials be used for its server: a cluster already served with ours keeps them, a cluster not
//   yet served is held (no request at all), both with an error log and a gauge; fixed, it is served.
// - Finding 1: an exec block in a cluster Secret (which an Argo CD project admin can write) is never
//   run, even for a command the platform team allowed: `/bin/cp` told to copy a file the hub can read
//   to a path the Secret chose. An allowed plugin in a Secret of ours runs, and its token reaches
//   only the server that Secret names.
// - Finding 4: each seat elects as `<replica>/<cluster id>`, the id with 128 bits of digest.
// - Finding 6: a duplicate cluster Secret is served as soon as the one serving its server goes.
//
// Measured on the 2-core machine: 3 tests in 8.8 to 12.0 s (28 s with the run's set-up, alone).
import { randomBytes } from 'node:crypto';
import { mkdtemp, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { CREDENTIALS_LABEL } from '../../service/hub/cluster-secret.ts';
import { bearerCredential } from '../support/api-proxy.ts';
import {
  adminToken,
  changeSettings,
  hubRelease,
  type ProxiedCluster,
  proxiedClusters,
  removeAdminToken,
  settingsAndWeb,
} from '../support/hub.ts';
import { it, type Kube } from '../support/kube.ts';
import { waitAllReplaced } from '../support/observe.ts';
import { metric, type Replica, startReplica } from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';

const V1 = 'client.authentication.k8s.io/v1';

/** A credentials Secret of ours, in the release namespace, for `c`'s server (`config` as written). */
async function ours(kube: Kube, namespace: string, c: ProxiedCluster, config: string): Promise<string> {
  const name = `${c.name}-credentials`;
  const body = {
    metadata: { name, labels: { [CREDENTIALS_LABEL]: 'true' } },
    stringData: { server: c.proxy.url, config },
  };
  const existing = await kube.core.readNamespacedSecret({ name, namespace }).catch(() => undefined);
  if (existing) {
    await kube.core.replaceNamespacedSecret({
      name,
      namespace,
      body: { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion } },
    });
  } else await kube.core.createNamespacedSecret({ namespace, body });
  return `${namespace}/${name}`;
}

const credentialsOf = (c: ProxiedCluster) => new Set(c.proxy.requests.map((r) => r.credential));

describe('hub mode: tenants and broken Secrets never borrow the service’s rights', {
  timeout: 180_000,
}, () => {
  it("a refused credentials Secret of ours holds its cluster or keeps our last good credentials; Argo CD's are never used for it", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // Argo CD's credentials (cluster-admin) in every cluster Secret: they work, so a fallback to them
    // would serve the cluster, and the proxy would see them.
    const argo = await adminToken(kube, namespace, 'argocd-manager');
    onTestFinished(() => removeAdminToken(kube, namespace, 'argocd-manager'));
    const mine = await adminToken(kube, namespace, 'gitops-reloader-spoke');
    onTestFinished(() => removeAdminToken(kube, namespace, 'gitops-reloader-spoke'));
    const [c0, c1] = (await proxiedClusters(kube, namespace, 2, argo, onTestFinished)) as [
      ProxiedCluster,
      ProxiedCluster,
    ];
    // c0: ours, an allowed exec plugin (/bin/cat printing an ExecCredential with our token).
    const dir = await mkdtemp(path.join(tmpdir(), 'gr-hub-tenancy-'));
    const credentialFile = path.join(dir, 'credential.json');
    await writeFile(
      credentialFile,
      JSON.stringify({ apiVersion: V1, kind: 'ExecCredential', status: { token: mine } }),
    );
    const c0Secret = await ours(
      kube,
      namespace,
      c0,
      JSON.stringify({
        execProviderConfig: { command: '/bin/cat', args: [credentialFile], apiVersion: V1 },
        tlsClientConfig: { caData: await c0.proxy.caData() },
      }),
    );
    // c1: ours, refused from the start (a command the chart does not list).
    const c1Secret = await ours(
      kube,
      namespace,
      c1,
      JSON.stringify({
        execProviderConfig: { command: '/bin/echo', args: [mine], apiVersion: V1 },
        tlsClientConfig: { caData: await c1.proxy.caData() },
      }),
    );
    const before = await settingsAndWeb(kube, c0.namespace, 1);
    const release = await hubRelease(namespace, ['hub.execCommands={/bin/cat}']);
    const r: Replica = await startReplica(kube, release, 'hub-t');
    onTestFinished(async () => {
      await r.svc.stop();
      await r.proxy.close();
    });
    const log = (msg: string, cluster: string) => (l: { msg: string; cluster?: unknown }) =>
      l.msg === msg && l.cluster === cluster;

    const serving = await r.svc.waitForLog('c0 served', log('serving cluster', c0.name), 60_000);
    expect(serving.credentials).toBe(`credentials Secret ${c0Secret}`);
    // Our Secret for c0 broken by an edit (a typo in its JSON): refused, and c0 keeps ours.
    await ours(kube, namespace, c0, '{"execProviderConfig": {"command": "/bin/cat",');
    const refused = await r.svc.waitForLog(
      'c0 credentials refused',
      (l) => l.msg === 'credentials Secret refused' && l.secret === c0Secret,
      30_000,
    );
    // The decision about c0: it keeps ours, or its credentials were rotated (to which).
    const kept = await r.svc.waitForLog(
      'the decision about c0',
      (l) =>
        l.cluster === c0.name &&
        (l.msg ===
          'cluster keeps its last good credentials: a credentials Secret of ours for it is refused' ||
          l.msg === 'cluster credentials rotated'),
      30_000,
    );
    expect(kept.msg, `c0 rotated to ${String(kept.credentials)}`).toBe(
      'cluster keeps its last good credentials: a credentials Secret of ours for it is refused',
    );
    expect(refused.level).toBe('error');
    // The hub's decision about c1: held, or served (with which credentials).
    const heldC1 = await r.svc.waitForLog(
      'the decision about c1',
      (l) =>
        l.cluster === c1.name &&
        (l.msg === 'cluster held: its credentials are refused, and no others are used for it' ||
          l.msg === 'serving cluster'),
      30_000,
    );
    expect(heldC1.msg, `c1 served with ${String(heldC1.credentials)}`).toBe(
      'cluster held: its credentials are refused, and no others are used for it',
    );
    expect(heldC1.secret).toBe(c1Secret);
    expect(String(heldC1.reason)).toContain('--hub-exec-commands does not list');

    // Still served, with ours: a change in c0 reloads. Made once c0's engine acts (its baseline is
    // recorded): a change before that would be its baseline ('serving cluster' is logged when the
    // engine starts, before its caches sync).
    await r.svc.waitForLog('c0 acts', (l) => l.msg === 'ready' && l.cluster === c0.name, 60_000);
    await changeSettings(kube, c0.namespace, '2');
    await waitAllReplaced(kube, c0.namespace, 'web', before, 1);
    expect(await metric(r, 'gitops_reloader_hub_clusters_held')).toBe(1);
    expect(await metric(r, 'gitops_reloader_hub_credentials_refused')).toBe(2);

    // What the API server was sent: never Argo CD's credentials, through either cluster.
    expect(credentialsOf(c0), 'c0 was reached with ours only').toEqual(new Set([bearerCredential(mine)]));
    expect(c1.proxy.requests, 'nothing at all was sent to the held c1').toEqual([]);
    const fallbacks = r.svc.logs.filter(
      (l) => l.msg === 'cluster credentials rotated' && String(l.credentials).startsWith('cluster Secret'),
    );
    expect(fallbacks, "rotated to Argo CD's credentials").toEqual([]);

    // c1's Secret fixed: served with ours, and the gauge drops.
    await ours(
      kube,
      namespace,
      c1,
      JSON.stringify({ bearerToken: mine, tlsClientConfig: { caData: await c1.proxy.caData() } }),
    );
    const servingC1 = await r.svc.waitForLog('c1 served', log('serving cluster', c1.name), 60_000);
    expect(servingC1.credentials).toBe(`credentials Secret ${c1Secret}`);
    expect(await metric(r, 'gitops_reloader_hub_clusters_held')).toBe(0);
    expect(credentialsOf(c1)).toEqual(new Set([bearerCredential(mine)]));
    expect(credentialsOf(c0)).not.toContain(bearerCredential(argo));

    // Finding 4: each seat of the replica elects as itself, `<replica>/<cluster id>` (128-bit ids).
    const leases = kube.kc.makeApiClient(CoordinationV1Api);
    for (const c of [c0, c1]) {
      expect(c.id).toMatch(/-[0-9a-f]{32}$/);
      await waitFor(
        async () => {
          const l = await leases
            .readNamespacedLease({ name: `${release.fullname}-${c.id}-leader`, namespace })
            .catch(() => undefined);
          const holder = l?.spec?.holderIdentity ?? '';
          return holder === `hub-t/${c.id}` ? true : pending(holder || 'no Lease');
        },
        { describe: `${c.name}'s Lease held by its seat`, timeout: 30_000 },
      );
    }
  });

  it('an exec block in a cluster Secret is never run, even for an allowed command; the cluster is held', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // A file only the hub should read (its stand-in for the hash key or a service account token),
    // and the path the Secret's author chose to have it copied to.
    const dir = await mkdtemp(path.join(tmpdir(), 'gr-hub-exec-attack-'));
    const hubOnly = path.join(dir, 'hub-only');
    await writeFile(hubOnly, randomBytes(16).toString('hex'), { mode: 0o600 });
    const stolen = path.join(dir, 'stolen');
    const [c0] = (await proxiedClusters(kube, namespace, 1, 'unused', onTestFinished)) as [ProxiedCluster];
    // The cluster Secret as a project admin can write it: its own exec block, with /bin/cp's arguments.
    const secret = await kube.core.readNamespacedSecret({ name: c0.secret, namespace });
    await kube.core.replaceNamespacedSecret({
      name: c0.secret,
      namespace,
      body: {
        ...secret,
        data: {
          ...secret.data,
          config: Buffer.from(
            JSON.stringify({
              execProviderConfig: { command: '/bin/cp', args: [hubOnly, stolen], apiVersion: V1 },
              tlsClientConfig: { caData: await c0.proxy.caData() },
            }),
          ).toString('base64'),
        },
      },
    });
    const release = await hubRelease(namespace, ['hub.execCommands={/bin/cp}']);
    const r = await startReplica(kube, release, 'hub-x');
    onTestFinished(async () => {
      await r.svc.stop();
      await r.proxy.close();
    });
    // Either the hub's decision about c0 (held), or the copy it should never make.
    const outcome = await waitFor(
      async () => {
        if (
          await stat(stolen).then(
            () => true,
            () => false,
          )
        )
          return 'copied';
        const held = r.svc.logs.find(
          (l) =>
            l.msg === 'cluster held: its credentials are refused, and no others are used for it' &&
            l.cluster === c0.name,
        );
        return held ? String(held.reason) : pending('no decision about c0 yet');
      },
      { describe: 'the hub decides about c0', timeout: 60_000 },
    );
    expect(outcome, 'the cluster Secret made the hub run /bin/cp').not.toBe('copied');
    expect(outcome).toContain('never in a cluster Secret');
    await expect(stat(stolen), 'the copy exists').rejects.toThrow();
    expect(c0.proxy.requests, 'nothing was sent to the server the Secret names').toEqual([]);
  });

  it('a duplicate cluster Secret (the new one created, then the old one deleted) serves the cluster at once', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const token = await adminToken(kube, namespace, 'dup-manager');
    onTestFinished(() => removeAdminToken(kube, namespace, 'dup-manager'));
    const [c0] = (await proxiedClusters(kube, namespace, 1, token, onTestFinished)) as [ProxiedCluster];
    const release = await hubRelease(namespace);
    const r = await startReplica(kube, release, 'hub-d');
    onTestFinished(async () => {
      await r.svc.stop();
      await r.proxy.close();
    });
    await r.svc.waitForLog('c0 served', (l) => l.msg === 'serving cluster' && l.cluster === c0.name, 60_000);
    // A platform team moves the cluster to a new Secret: the new one first, then the old one goes.
    const old = await kube.core.readNamespacedSecret({ name: c0.secret, namespace });
    await kube.core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: `${c0.secret}-new`, labels: old.metadata?.labels }, data: old.data },
    });
    await r.svc.waitForLog(
      'the new Secret waits',
      (l) =>
        l.msg === 'another cluster Secret already serves this server; this one is not served' &&
        l.secret === `${namespace}/${c0.secret}-new`,
      30_000,
    );
    await kube.core.deleteNamespacedSecret({ name: c0.secret, namespace });
    const again = await r.svc.waitForLog(
      'c0 served from the new Secret',
      (l) =>
        l.msg === 'serving cluster' &&
        l.cluster === c0.name &&
        l.credentials === `cluster Secret ${namespace}/${c0.secret}-new`,
      30_000,
    );
    expect(again.server).toBe(c0.proxy.url);
  });
});
