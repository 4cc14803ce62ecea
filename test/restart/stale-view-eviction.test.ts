// A restart evicts a pod it saw not Ready (an eviction that costs no availability, outside the
// budget) only as it saw it: the pod's resourceVersion is a precondition, and the real Eviction API
// refuses with 409 once the pod has changed (become Ready, say), so a view that lags behind the
// cluster cannot take a Ready pod under the floor (I4). Found by the execution-level simulation
// (test/sim/exec-sim.test.ts, seed 270: a StatefulSet still coming up, a watch seconds behind).
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, inject } from 'vitest';
import { kubeconfigAccess } from '../../service/kube/access.ts';
import { coreApi } from '../../service/kube/api.ts';
import { evictPod } from '../../service/kube/eviction.ts';
import { silentLogger } from '../../service/log.ts';
import { PodEvictor } from '../../service/strategies/evictor.ts';
import type { StrategyContext } from '../../service/strategies/types.ts';
import { it, type Kube } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { deployment, isReady } from '../support/workloads.ts';

const SLOW = { 'kwok.gitops-reloader.io/ready-after': '3s' };

/** The Deployment's one pod as first seen not Ready, and the same pod once Ready. */
async function seenNotReadyThenReady(kube: Kube, namespace: string): Promise<{ stale: V1Pod; now: V1Pod }> {
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', { podAnnotations: SLOW }),
  });
  const pod = async () =>
    (await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items.find(
      (p) => !p.metadata?.deletionTimestamp,
    );
  const stale = await waitFor(
    async () => {
      const p = await pod();
      return p && !isReady(p) ? p : pending(p?.status);
    },
    { describe: 'the pod, not Ready yet' },
  );
  const now = await waitFor(
    async () => {
      const p = await pod();
      return p && isReady(p) ? p : pending(p?.status);
    },
    { describe: 'the pod Ready', timeout: 60_000 },
  );
  expect(now.metadata?.uid).toBe(stale.metadata?.uid);
  return { stale, now };
}

describe('an eviction on a view that lags behind', () => {
  it('is refused by the API server once the pod changed since the resourceVersion given', async ({
    kube,
    namespace,
  }) => {
    const { stale, now } = await seenNotReadyThenReady(kube, namespace);
    const core = coreApi(await kubeconfigAccess(inject('kubeconfig')));
    const name = stale.metadata?.name as string;
    const uid = stale.metadata?.uid as string;
    const refused = await evictPod(core, namespace, name, {
      uid,
      resourceVersion: stale.metadata?.resourceVersion,
    });
    expect(refused).toEqual({ outcome: 'changed', attempts: 1 });
    expect(
      (await kube.core.readNamespacedPod({ name, namespace })).metadata?.deletionTimestamp,
    ).toBeUndefined();
    // As it is now, it goes.
    const evicted = await evictPod(core, namespace, name, {
      uid,
      resourceVersion: now.metadata?.resourceVersion,
    });
    expect(evicted.outcome).toBe('evicted');
  });

  it('does not evict a pod the restart saw not Ready that is Ready now', async ({ kube, namespace }) => {
    const { stale } = await seenNotReadyThenReady(kube, namespace);
    const core = coreApi(await kubeconfigAccess(inject('kubeconfig')));
    const ctx = {
      core,
      log: silentLogger,
      signal: new AbortController().signal,
      stallAfterMs: 60_000,
      onStall: () => undefined,
      progress: () => undefined,
    } as unknown as StrategyContext;
    let replans = 0;
    const evictor = new PodEvictor(ctx, namespace, 'Deployment/web', {
      changed: async () => {
        replans++;
      },
      failing: undefined,
      durable: async () => undefined,
    });
    // The planner chose the pod from its (stale) view, where it was not Ready.
    await evictor.evictNamedAndPace([stale.metadata?.name as string], [stale]);
    expect(evictor.evicted.size).toBe(0);
    expect(replans).toBe(1);
    const pod = await kube.core.readNamespacedPod({ name: stale.metadata?.name as string, namespace });
    expect(pod.metadata?.deletionTimestamp).toBeUndefined();
    expect(isReady(pod)).toBe(true);
  });
});
