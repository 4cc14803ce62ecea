// Two replicas as the chart runs them: a leader that cannot start acting gives the Lease up (and says
// so in its metrics) instead of holding it while doing nothing, tries again with backoff, and a start
// step the installed RBAC variant does not allow is skipped rather than fatal.
import { RbacAuthorizationV1Api, type V1Role } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  metric,
  nonLeaderWrites,
  startReplica,
  stoppedAfterEach,
  waitForLeader,
} from '../support/replicas.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };
const AUTO = { 'reloader.stakater.com/auto': 'true' };

describe('start failures with two replicas', () => {
  it('without the restart RBAC (rbac.restart=false), the leader skips the surge-pod clean-up and acts', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', { replicas: 1, annotations: AUTO, container: USES }),
    });
    await waitReadyPods(kube, namespace, 'web', 1);
    const release = await installRelease(namespace, {
      watch: [namespace],
      set: ['rbac.restart=false', 'rbac.annotate=true', 'reload.defaultStrategy=annotate'],
      extraArgs: [...FAST_LEASE, '--debounce=0s'],
    });
    releases.push(release);
    const a = await startReplica(kube, release, 'replica-a');
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(a, b);
    const leader = await waitForLeader([a, b], 60_000);
    await leader.svc.waitForLog('clean-up skipped', (l) => /surge-pod clean-up skipped/.test(l.msg));

    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    expect(ev.message).toMatch(/ConfigMap\/app/);
    expect(nonLeaderWrites([a, b])).toEqual([]);
  });

  it('a leader that cannot write the ledger releases the Lease, reports it, and acts once it can', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', { replicas: 1, annotations: AUTO, container: USES, maxSurge: 1 }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=0s'],
    });
    releases.push(release);
    // Writing the ledger is refused (the Role is the only grant of it; an API server answering 500
    // would refuse it the same way): the start, which records web's baseline, fails.
    const rbac = kube.kc.makeApiClient(RbacAuthorizationV1Api);
    const role = await rbac.readNamespacedRole({ name: release.fullname, namespace });
    const broken: V1Role = {
      ...role,
      rules: (role.rules ?? []).map((r) =>
        r.resources?.includes('configmaps')
          ? { ...r, verbs: (r.verbs ?? []).filter((v) => v !== 'create' && v !== 'patch') }
          : r,
      ),
    };
    await rbac.replaceNamespacedRole({ name: release.fullname, namespace, body: broken });

    const a = await startReplica(kube, release, 'replica-a');
    const b = await startReplica(kube, release, 'replica-b');
    replicas.push(a, b);
    // Whoever got the Lease could not start: it gives it back, so the other replica gets to try too.
    await waitFor(
      async () => {
        const fa = await metric(a, 'gitops_reloader_leader_start_failures_total');
        const fb = await metric(b, 'gitops_reloader_leader_start_failures_total');
        return fa >= 1 && fb >= 1 ? true : pending({ a: fa, b: fb });
      },
      { describe: 'both replicas tried to start and released the Lease', timeout: 60_000 },
    );
    expect(await metric(a, 'gitops_reloader_leader')).toBe(0);
    expect(await metric(b, 'gitops_reloader_leader')).toBe(0);

    // The ledger is readable again: a replica leads and acts, after its backoff.
    const fixed = await rbac.readNamespacedRole({ name: release.fullname, namespace });
    await rbac.replaceNamespacedRole({
      name: release.fullname,
      namespace,
      body: { ...role, metadata: fixed.metadata },
    });
    const leader = await waitForLeader([a, b], 90_000);
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitFor(
      async () => {
        const pods = (await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items;
        const old = new Set(before.map((p) => p.uid));
        return pods.length >= 1 && pods.every((p) => !old.has(p.metadata?.uid ?? ''))
          ? pods
          : pending(pods.length);
      },
      { describe: 'the pod replaced by the new leader', timeout: 60_000 },
    );
    await leader.svc.waitForLog('the leader completes the reload', (l) => l.msg === 'reload complete');
    expect(nonLeaderWrites([a, b])).toEqual([]);
  });
});
