// The surge-pod sweep covers namespaces that left the service's scope (a namespace label removed, a
// namespace dropped from the list between two runs) and runs in --dry-run, where it only reports. A
// surge pod out of scope is removed only when this release reloaded its Deployment: another
// release's pods, or anything else wearing the label, stay.
import { describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { surgePods, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  metric,
  type Release,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const SURGE = 'gitops-reloader.io/surge';
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

/** `solo`: one replica whose copies take 8 s to get Ready, so a reload can be cut while its surge pod waits. */
async function slowDeployment(kube: Kube, namespace: string): Promise<string> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  const d = await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('solo', {
      replicas: 1,
      annotations: { 'reloader.stakater.com/auto': 'true' },
      podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '8s' },
      container: USES,
    }),
  });
  await waitReadyPods(kube, namespace, 'solo', 1);
  return d.metadata?.uid as string;
}

/** Changes `app`, waits for the leader's reload of solo to create its surge pod, then kills the leader. */
async function crashMidReload(kube: Kube, namespace: string, release: Release, uid: string) {
  const a = await startReplica(kube, release, 'replica-a');
  replicas.push(a);
  await waitForLeader([a], 60_000);
  await kube.core.replaceNamespacedConfigMap({ name: 'app', namespace, body: configMap('app', { k: '2' }) });
  await waitFor(
    async () => ((await surgePods(kube, namespace, uid)).length === 1 ? true : pending('no surge pod')),
    { describe: 'the surge pod of solo created', timeout: 60_000 },
  );
  await a.svc.kill();
}

/** A pod wearing the surge label that no release of ours made (no Deployment owns it). */
function strangerPod(name: string) {
  return {
    metadata: { name, labels: { app: 'stranger', [SURGE]: 'not-a-deployment-of-ours' } },
    spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
  };
}

describe('the surge-pod sweep', () => {
  it('removes the surge pods of a namespace whose label no longer selects it', async ({
    kube,
    namespace,
  }) => {
    const label = `gr-scope-${namespace.slice(-5)}`;
    const labelPath = `/metadata/labels/${label}`;
    await kube.core.patchNamespace({
      name: namespace,
      body: [{ op: 'add', path: labelPath, value: 'yes' }],
    });
    const uid = await slowDeployment(kube, namespace);
    const release = await installRelease(namespace, {
      watch: [],
      set: [`reload.namespaceSelector=${label}`],
      extraArgs: [...FAST_LEASE, '--debounce=0s', '--surge-sweep-interval=2s'],
    });
    releases.push(release);
    await crashMidReload(kube, namespace, release, uid);
    // While no replica runs, the namespace leaves the scope.
    await kube.core.patchNamespace({ name: namespace, body: [{ op: 'remove', path: labelPath }] });
    await kube.core.createNamespacedPod({ namespace, body: strangerPod('stranger-after') });

    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(b);
    await waitForLeader([b], 60_000);
    await waitFor(
      async () => ((await surgePods(kube, namespace, uid)).length === 0 ? true : pending('still there')),
      { describe: 'the surge pod of solo swept although its namespace left the scope', timeout: 30_000 },
    );
    await b.svc.waitForLog(
      'the sweep of the out-of-scope surge pod',
      (l) => l.msg === 'deleted a surge pod no reload needs' && l.inScope === false,
    );
    // Not ours: left alone, and nothing out of scope was reloaded.
    expect((await surgePods(kube, namespace)).map((p) => p.metadata?.name)).toContain('stranger-after');
    expect(b.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
  });

  it('removes the surge pods of a namespace dropped from the namespace list between two runs', async ({
    kube,
    namespace,
  }) => {
    // The release lives in `namespace`; the workload in a second namespace that it first watches too.
    const old = (
      await kube.core.createNamespace({ body: { metadata: { generateName: `${namespace}-old-` } } })
    ).metadata?.name as string;
    try {
      const uid = await slowDeployment(kube, old);
      const release = await installRelease(namespace, {
        watch: [namespace, old],
        extraArgs: [...FAST_LEASE, '--debounce=0s', '--surge-sweep-interval=2s'],
      });
      releases.push(release);
      await crashMidReload(kube, old, release, uid);
      // The next run watches `namespace` only (its Role in `old` is still there: kubectl apply prunes nothing).
      const narrowed: Release = {
        ...release,
        args: release.args.map((a) => (a.startsWith('--namespaces=') ? `--namespaces=${namespace}` : a)),
      };
      expect(narrowed.args).toContain(`--namespaces=${namespace}`);
      const b = await startReplica(kube, narrowed, 'replica-b');
      replicas.push(b);
      await waitForLeader([b], 60_000);
      await waitFor(
        async () => ((await surgePods(kube, old, uid)).length === 0 ? true : pending('still there')),
        {
          describe: 'the surge pod of solo swept although its namespace is no longer watched',
          timeout: 30_000,
        },
      );
      expect(b.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    } finally {
      await kube.core.deleteNamespace({ name: old });
    }
  });

  it('reports, and deletes nothing, in --dry-run', async ({ kube, namespace }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const d = await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 1,
        annotations: { 'reloader.stakater.com/auto': 'true' },
        container: USES,
      }),
    });
    await waitReadyPods(kube, namespace, 'web', 1);
    // A surge pod of web that no reload needs (left by an earlier run that did reload).
    await kube.core.createNamespacedPod({
      namespace,
      body: {
        metadata: {
          name: 'web-surge-leftover',
          labels: { app: 'web-leftover', [SURGE]: d.metadata?.uid as string },
        },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
    });
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--dry-run', '--surge-sweep-interval=2s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await waitForLeader([a], 60_000);
    await a.svc.waitForLog(
      'the dry run reports the leftover',
      (l) => l.msg === 'would delete a surge pod no reload needs (dry run)' && l.pod === 'web-surge-leftover',
    );
    // Two more sweeps report it again, and it is still there.
    await waitFor(
      async () => {
        const n = await metric(a, 'gitops_reloader_surge_pods_swept_total', { dry_run: 'true' });
        return n >= 3 ? n : pending(n);
      },
      { describe: 'three dry-run sweeps', timeout: 30_000 },
    );
    expect((await surgePods(kube, namespace)).map((p) => p.metadata?.name)).toEqual(['web-surge-leftover']);
    expect(await metric(a, 'gitops_reloader_surge_pods_swept_total', { dry_run: 'false' })).toBe(0);
  });
});
