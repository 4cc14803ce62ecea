// No surge pod outlives its reload: the leader sweeps surge pods no pending reload needs while it runs,
// and a reload dropped after a crash (the workload opted out meanwhile) takes its surge pod with it.
// Helm release Secrets are left out of the watch by the API server (a field selector).
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { surgePods, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  metric,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const SURGE = 'gitops-reloader.io/surge';
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

describe('surge pods and memory', () => {
  it('the leader sweeps a surge pod that no pending reload needs', async ({ kube, namespace }) => {
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
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--surge-sweep-interval=2s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await waitForLeader([a], 60_000);
    // A surge pod of web appears after start-up (left, say, by a reload a partitioned leader began).
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
    await waitFor(
      async () => ((await surgePods(kube, namespace)).length === 0 ? true : pending('still there')),
      { describe: 'the leftover surge pod swept', timeout: 30_000 },
    );
    // The line can reach us through the replica's stdout a little after the pod is gone.
    await a.svc.waitForLog(
      'the sweep of web-surge-leftover',
      (l) => l.msg === 'deleted a surge pod no reload needs' && l.pod === 'web-surge-leftover',
    );
    // web itself was not touched.
    expect((await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items).toHaveLength(
      1,
    );
  });

  it('a reload dropped after a crash (the workload opted out) takes its surge pod with it', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('solo', {
        replicas: 1,
        annotations: { 'reloader.stakater.com/auto': 'true' },
        // The surge pod (a copy of this template) takes 8 s to get Ready: time to crash mid-reload.
        podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '8s' },
        container: USES,
      }),
    });
    await waitReadyPods(kube, namespace, 'solo', 1);
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=0s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await waitForLeader([a], 60_000);
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitFor(
      async () => ((await surgePods(kube, namespace)).length === 1 ? true : pending('no surge pod')),
      {
        describe: 'the surge pod created',
      },
    );
    await a.svc.kill();
    // While no replica runs, the team opts the workload out.
    await kube.apps.patchNamespacedDeployment({
      name: 'solo',
      namespace,
      body: [{ op: 'replace', path: '/metadata/annotations/reloader.stakater.com~1auto', value: 'false' }],
    });
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(b);
    await b.svc.waitForLog('b drops it', (l) => /pending reload dropped/.test(l.msg), 60_000);
    await waitFor(
      async () => ((await surgePods(kube, namespace)).length === 0 ? true : pending('still there')),
      {
        describe: 'the surge pod of the dropped reload deleted',
        timeout: 30_000,
      },
    );
    expect(b.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
  });

  it('leaves Helm release Secrets out of the watch unless asked to include them', async ({
    kube,
    namespace,
  }) => {
    for (let i = 1; i <= 3; i++) {
      await kube.core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name: `sh.helm.release.v1.app.v${i}`, labels: { owner: 'helm' } },
          type: 'helm.sh/release.v1',
          data: { release: Buffer.from('x'.repeat(1000)).toString('base64') },
        },
      });
    }
    await kube.core.createNamespacedSecret({
      namespace,
      body: { metadata: { name: 'creds' }, stringData: { password: 'p' } },
    });
    const release = await installRelease(namespace, { watch: [namespace], extraArgs: FAST_LEASE });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await a.svc.waitForLog('a synced', (l) => l.msg === 'caches synced', 60_000);
    // The release namespace holds our own key Secret too; the Helm records are not counted.
    const secrets = await metric(a, 'gitops_reloader_watched_items', { resource: 'secrets' });
    const b = await startReplica(kube, release, 'replica-b', ['--include-helm-release-secrets=true']);
    replicas.push(b);
    await b.svc.waitForLog('b synced', (l) => l.msg === 'caches synced', 60_000);
    expect(await metric(b, 'gitops_reloader_watched_items', { resource: 'secrets' })).toBe(secrets + 3);
  });
});
