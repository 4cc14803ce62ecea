// The HMAC key: the chart rendered with `helm template | kubectl apply` (the way Argo CD installs it)
// keeps one key however often it is applied, because the service, not the render, makes it; and a
// key that does change re-baselines every workload instead of restarting it.
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  metric,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pastTheSecondOf } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const AUTO = { 'reloader.stakater.com/auto': 'true' };

describe('the hash key', () => {
  it('survives helm template | kubectl apply twice in a row, and two replicas starting at once', async ({
    kube,
    namespace,
  }) => {
    const release = await installRelease(namespace, { watch: [namespace], extraArgs: FAST_LEASE });
    releases.push(release);
    const keyName = `${release.fullname}-hash-key`;
    const readKey = async () =>
      (await kube.core.readNamespacedSecret({ name: keyName, namespace })).data?.key;
    const a = await startReplica(kube, release, 'replica-a');
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(a, b);
    await a.svc.waitForLog('a synced', (l) => l.msg === 'caches synced', 60_000);
    await b.svc.waitForLog('b synced', (l) => l.msg === 'caches synced', 60_000);
    const key = await readKey();
    expect(Buffer.from(key ?? '', 'base64').length).toBeGreaterThanOrEqual(32);
    // Both replicas hash with the same key: one created it, the other read it.
    const created = [a, b].filter((r) => r.svc.logs.some((l) => /created the hash-key Secret/.test(l.msg)));
    expect(created).toHaveLength(1);

    await release.apply();
    expect(await readKey()).toBe(key);
    await release.apply();
    expect(await readKey()).toBe(key);
  });

  it('after a key change, re-baselines every workload instead of restarting it', async ({
    kube,
    namespace,
  }) => {
    let written = 0;
    for (const name of ['one', 'two']) {
      const cm = await kube.core.createNamespacedConfigMap({
        namespace,
        body: configMap(`${name}-cfg`, { k: '1' }),
      });
      written = Math.max(written, new Date(cm.metadata?.creationTimestamp ?? 0).getTime());
    }
    // After a key change the pods decide (docs/catch-up.md): pods stamped in the same second as their
    // config might predate it and would be restarted, so these start in a later second.
    await pastTheSecondOf(written);
    for (const name of ['one', 'two']) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(name, {
          replicas: 1,
          maxSurge: 1,
          annotations: AUTO,
          container: { envFrom: [{ configMapRef: { name: `${name}-cfg` } }] },
        }),
      });
    }
    const before = [
      ...(await waitReadyPods(kube, namespace, 'one', 1)),
      ...(await waitReadyPods(kube, namespace, 'two', 1)),
    ];
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=0s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    replicas.push(a);
    await a.svc.waitForLog('a acts', (l) => l.msg === 'ready', 60_000);
    await a.svc.waitForLog('baselines', (l) => l.msg === 'baseline recorded');
    await a.svc.stop();

    // The key is rotated (say, the Secret was recreated) while the service is down.
    const keyName = `${release.fullname}-hash-key`;
    await kube.core.replaceNamespacedSecret({
      name: keyName,
      namespace,
      body: {
        metadata: { name: keyName },
        data: { key: Buffer.from('x'.repeat(40) + Date.now()).toString('base64') },
      },
    });
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(b);
    const line = await b.svc.waitForLog('b acts', (l) => /HMAC key differs/.test(l.msg), 60_000);
    expect(line.workloads).toBe(2);
    await b.svc.waitForLog('b ready', (l) => l.msg === 'ready');
    expect(await waitForLeader([b])).toBe(b);
    expect(await metric(b, 'gitops_reloader_key_changes_total')).toBe(1);
    expect(b.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    const now = (await kube.core.listNamespacedPod({ namespace })).items.map((p) => p.metadata?.uid).sort();
    expect(now).toEqual(before.map((p) => p.uid).sort());

    // The new baselines are right: a real change still reloads, once.
    await kube.core.replaceNamespacedConfigMap({
      name: 'one-cfg',
      namespace,
      body: configMap('one-cfg', { k: '2' }),
    });
    await waitForEvent(kube, namespace, 'Reloaded', 'one', 60_000);
    expect(b.svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload)).toEqual([
      'Deployment/one',
    ]);
  });
});
