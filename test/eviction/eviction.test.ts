// evictPod against the real API server: evictions the Deployment controller answers with a new pod,
// PodDisruptionBudget refusals retried until the budget allows, missing pods, dry runs.
import { randomUUID } from 'node:crypto';
import type { V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { describe, expect, inject } from 'vitest';
import { effectiveCutoff, isBeforeCutoff } from '../../service/core/cutoff.ts';
import {
  isRolloutInProgress,
  planDeploymentRestartStep,
  type RestartPod,
} from '../../service/core/rolling.ts';
import { kubeconfigAccess } from '../../service/kube/access.ts';
import { coreApi } from '../../service/kube/api.ts';
import { type EvictionBlock, EvictionError, evictPod } from '../../service/kube/eviction.ts';
import { it, type Kube } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { deployment, isReady } from '../support/workloads.ts';

async function pods(kube: Kube, namespace: string, app: string): Promise<V1Pod[]> {
  return (await kube.core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
}

async function waitReady(kube: Kube, namespace: string, app: string, count: number): Promise<V1Pod[]> {
  return waitFor(
    async () => {
      const all = await pods(kube, namespace, app);
      const ready = all.filter(isReady);
      return ready.length === count && all.length === count
        ? ready
        : pending(all.map((p) => `${p.metadata?.name} ready=${isReady(p)}`));
    },
    { describe: `${count} Ready pods of ${namespace}/${app}`, timeout: 60_000 },
  );
}

async function createPdb(kube: Kube, namespace: string, name: string, minAvailable: number): Promise<void> {
  await kube.policy.createNamespacedPodDisruptionBudget({
    namespace,
    body: { metadata: { name }, spec: { minAvailable, selector: { matchLabels: { app: 'web' } } } },
  });
}

/** Waits until the disruption controller has computed the PDB for its current spec. */
async function waitPdb(
  kube: Kube,
  namespace: string,
  name: string,
  want: { currentHealthy: number; disruptionsAllowed: number },
): Promise<V1PodDisruptionBudget> {
  return waitFor(
    async () => {
      const pdb = await kube.policy.readNamespacedPodDisruptionBudget({ name, namespace });
      const s = pdb.status;
      return s?.observedGeneration === pdb.metadata?.generation &&
        s?.currentHealthy === want.currentHealthy &&
        s?.disruptionsAllowed === want.disruptionsAllowed
        ? pdb
        : pending(s);
    },
    { describe: `PDB ${name} to count ${JSON.stringify(want)}` },
  );
}

const nameOf = (p: V1Pod | undefined): string => p?.metadata?.name as string;
const uidOf = (p: V1Pod | undefined): string => p?.metadata?.uid as string;
function createdAt(p: V1Pod): string {
  const t = p.metadata?.creationTimestamp;
  if (!t) throw new Error(`pod ${nameOf(p)} has no creationTimestamp`);
  return t.toISOString();
}

describe('evictPod', () => {
  it('evicts a Deployment pod, and the Deployment replaces it with a new Ready pod', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 3 }) });
    const before = await waitReady(kube, namespace, 'web', 3);
    const victim = before[0];

    const result = await evictPod(kube.core, namespace, nameOf(victim), { uid: uidOf(victim) });

    expect(result).toEqual({ outcome: 'evicted', attempts: 1, dryRun: false });
    const after = await waitFor(
      async () => {
        const all = await pods(kube, namespace, 'web');
        const ready = all.filter(isReady);
        return !all.some((p) => nameOf(p) === nameOf(victim)) && ready.length === 3
          ? ready
          : pending(
              all.map(
                (p) => `${nameOf(p)} ready=${isReady(p)} deleting=${Boolean(p.metadata?.deletionTimestamp)}`,
              ),
            );
      },
      { describe: `${nameOf(victim)} gone and 3 Ready pods again`, timeout: 60_000 },
    );
    const fresh = after.filter((p) => !before.some((b) => uidOf(b) === uidOf(p)));
    expect(fresh).toHaveLength(1);
  });

  it('reports each PDB refusal and keeps retrying until the PDB is relaxed, then evicts', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 3 }) });
    await createPdb(kube, namespace, 'web', 3);
    const [victim] = await waitReady(kube, namespace, 'web', 3);
    await waitPdb(kube, namespace, 'web', { currentHealthy: 3, disruptionsAllowed: 0 });

    const blocks: EvictionBlock[] = [];
    const eviction = evictPod(kube.core, namespace, nameOf(victim), {
      uid: uidOf(victim),
      deadline: Date.now() + 60_000,
      initialBackoffMs: 100,
      maxBackoffMs: 1000,
      onBlocked: (b) => blocks.push(b),
    });
    // Refused at least twice, so it retries; the pod is untouched meanwhile.
    await waitFor(() => (blocks.length >= 2 ? blocks : pending(blocks)), { describe: 'two refusals' });
    const held = await kube.core.readNamespacedPod({ name: nameOf(victim), namespace });
    expect(held.metadata?.deletionTimestamp).toBeUndefined();
    expect(blocks[0]).toMatchObject({
      namespace,
      pod: nameOf(victim),
      attempt: 1,
      cause: 'disruption-budget',
      retryInMs: 100,
    });
    expect(blocks[1]).toMatchObject({ attempt: 2, retryInMs: 200 });
    // The server's own words, naming the budget.
    expect(blocks[0]?.message).toMatch(/violate the pod's disruption budget/);
    expect(blocks[0]?.message).toMatch(/disruption budget web needs 3 healthy pods and has 3 currently/);

    const pdb = await kube.policy.readNamespacedPodDisruptionBudget({ name: 'web', namespace });
    await kube.policy.replaceNamespacedPodDisruptionBudget({
      name: 'web',
      namespace,
      body: { ...pdb, spec: { ...pdb.spec, minAvailable: 2 } },
    });

    const result = await eviction;
    expect(result).toMatchObject({ outcome: 'evicted', dryRun: false });
    expect(result.attempts).toBe(blocks.length + 1);
    const gone = await waitFor(
      async () => {
        const p = await kube.core
          .readNamespacedPod({ name: nameOf(victim), namespace })
          .catch(() => undefined);
        return p === undefined || p.metadata?.deletionTimestamp ? true : pending(p.metadata);
      },
      { describe: `${nameOf(victim)} to be terminating or gone` },
    );
    expect(gone).toBe(true);
  });

  it('returns blocked with the server message when the PDB still refuses at the deadline', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    await createPdb(kube, namespace, 'web', 2);
    const [victim] = await waitReady(kube, namespace, 'web', 2);
    await waitPdb(kube, namespace, 'web', { currentHealthy: 2, disruptionsAllowed: 0 });

    const blocks: EvictionBlock[] = [];
    const started = Date.now();
    const result = await evictPod(kube.core, namespace, nameOf(victim), {
      deadline: started + 1500,
      initialBackoffMs: 200,
      onBlocked: (b) => blocks.push(b),
    });

    expect(result.outcome).toBe('blocked');
    if (result.outcome !== 'blocked') return;
    expect(Date.now() - started).toBeGreaterThanOrEqual(1500);
    expect(result.attempts).toBeGreaterThanOrEqual(3);
    expect(result.attempts).toBe(blocks.length);
    expect(result.last).toEqual(blocks.at(-1));
    expect(result.last.retryInMs).toBeUndefined();
    expect(result.last.cause).toBe('disruption-budget');
    expect(result.last.message).toMatch(/disruption budget web needs 2 healthy pods/);
    const held = await kube.core.readNamespacedPod({ name: nameOf(victim), namespace });
    expect(held.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('without a deadline, returns blocked after a single refusal', async ({ kube, namespace }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 1 }) });
    await createPdb(kube, namespace, 'web', 1);
    const [victim] = await waitReady(kube, namespace, 'web', 1);
    await waitPdb(kube, namespace, 'web', { currentHealthy: 1, disruptionsAllowed: 0 });

    const result = await evictPod(kube.core, namespace, nameOf(victim));

    expect(result).toMatchObject({ outcome: 'blocked', attempts: 1, last: { retryInMs: undefined } });
  });

  it('stops retrying when its signal is aborted, with the reason it was given', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 1 }) });
    await createPdb(kube, namespace, 'web', 1);
    const [victim] = await waitReady(kube, namespace, 'web', 1);
    await waitPdb(kube, namespace, 'web', { currentHealthy: 1, disruptionsAllowed: 0 });
    const abort = new AbortController();

    const outcome = await evictPod(kube.core, namespace, nameOf(victim), {
      deadline: Date.now() + 60_000,
      initialBackoffMs: 30_000,
      signal: abort.signal,
      onBlocked: () => abort.abort(new Error('lost the leader lease')),
    }).then(
      () => 'resolved',
      (e: unknown) => e,
    );

    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toBe('lost the leader lease');
  });

  it('returns gone for a pod that does not exist', async ({ kube, namespace }) => {
    const result = await evictPod(kube.core, namespace, 'no-such-pod', { deadline: Date.now() + 10_000 });
    expect(result).toEqual({ outcome: 'gone', attempts: 1 });
  });

  it('returns gone when the name now belongs to a different pod, and leaves that pod alone', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 1 }) });
    const [pod] = await waitReady(kube, namespace, 'web', 1);

    // The uid of an earlier incarnation of this name: the precondition fails with 409.
    const result = await evictPod(kube.core, namespace, nameOf(pod), { uid: randomUUID() });

    expect(result).toEqual({ outcome: 'gone', attempts: 1 });
    const still = await kube.core.readNamespacedPod({ name: nameOf(pod), namespace });
    expect(still.metadata?.uid).toBe(uidOf(pod));
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('with dryRun, lets the server validate the eviction but leaves the pod in place', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    const before = await waitReady(kube, namespace, 'web', 2);
    const victim = before[0];

    const result = await evictPod(kube.core, namespace, nameOf(victim), { uid: uidOf(victim), dryRun: true });

    expect(result).toEqual({ outcome: 'evicted', attempts: 1, dryRun: true });
    // A real eviction sets deletionTimestamp before it answers, so reading at once is conclusive.
    const still = await kube.core.readNamespacedPod({ name: nameOf(victim), namespace });
    expect(still.metadata?.uid).toBe(uidOf(victim));
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
    expect(still.status?.conditions?.some((c) => c.type === 'DisruptionTarget')).toBe(false);
    const uidsAfter = (await pods(kube, namespace, 'web')).map(uidOf).sort();
    expect(uidsAfter).toEqual(before.map(uidOf).sort());
  });

  it("with dryRun through the service's own API adapter, still leaves the pod in place", async ({
    kube,
    namespace,
  }) => {
    // The adapter sends no query parameters: the dry run must travel in the Eviction's deleteOptions.
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    const before = await waitReady(kube, namespace, 'web', 2);
    const victim = before[0];
    const core = coreApi(await kubeconfigAccess(inject('kubeconfig')));

    const result = await evictPod(core, namespace, nameOf(victim), { uid: uidOf(victim), dryRun: true });

    expect(result).toEqual({ outcome: 'evicted', attempts: 1, dryRun: true });
    const still = await kube.core.readNamespacedPod({ name: nameOf(victim), namespace });
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
    expect((await pods(kube, namespace, 'web')).map(uidOf).sort()).toEqual(before.map(uidOf).sort());
  });

  it('with dryRun, still reports a PDB refusal as blocked', async ({ kube, namespace }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    await createPdb(kube, namespace, 'web', 2);
    const [victim] = await waitReady(kube, namespace, 'web', 2);
    await waitPdb(kube, namespace, 'web', { currentHealthy: 2, disruptionsAllowed: 0 });

    const result = await evictPod(kube.core, namespace, nameOf(victim), { dryRun: true });

    expect(result).toMatchObject({ outcome: 'blocked', last: { cause: 'disruption-budget' } });
  });

  it('fails with the server message when a pod is covered by two PDBs, which eviction does not support', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({ namespace, body: deployment('web', { replicas: 2 }) });
    await createPdb(kube, namespace, 'web-a', 1);
    await createPdb(kube, namespace, 'web-b', 1);
    // No waiting for the PDBs' status: the server refuses a pod under two PDBs before reading it
    // (and the disruption controller does not count such pods for both budgets anyway).
    const [victim] = await waitReady(kube, namespace, 'web', 2);

    const err = await evictPod(kube.core, namespace, nameOf(victim), { deadline: Date.now() + 10_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );

    expect(err).toBeInstanceOf(EvictionError);
    const e = err as EvictionError;
    expect(e.status).toBe(500);
    expect(e.namespace).toBe(namespace);
    expect(e.pod).toBe(nameOf(victim));
    expect(e.message).toContain(`evicting pod ${namespace}/${nameOf(victim)}: HTTP 500:`);
    expect(e.message).toContain('more than one PodDisruptionBudget');
    const still = await kube.core.readNamespacedPod({ name: nameOf(victim), namespace });
    expect(still.metadata?.deletionTimestamp).toBeUndefined();
  });

  it('driven by the step planner, replaces each pod of a Deployment once without touching the Deployment', async ({
    kube,
    namespace,
  }) => {
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', { replicas: 4, maxUnavailable: 1, maxSurge: 0 }),
    });
    const original = await waitReady(kube, namespace, 'web', 4);
    const before = await waitFor(
      async () => {
        const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
        return d.status?.availableReplicas === 4 ? d : pending(d.status);
      },
      { describe: 'deployment web to report 4 available replicas' },
    );
    const cutoff = effectiveCutoff(Date.now());
    const evicted: string[] = [];
    let minReady = 4;

    await waitFor(
      async () => {
        const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
        const live = await pods(kube, namespace, 'web');
        minReady = Math.min(minReady, live.filter(isReady).length);
        const step = planDeploymentRestartStep({
          replicas: d.spec?.replicas ?? 1,
          maxUnavailable: d.spec?.strategy?.rollingUpdate?.maxUnavailable ?? '25%',
          maxSurge: d.spec?.strategy?.rollingUpdate?.maxSurge ?? '25%',
          cutoffMs: cutoff,
          rolloutInProgress: isRolloutInProgress({
            generation: d.metadata?.generation,
            observedGeneration: d.status?.observedGeneration,
            replicas: d.spec?.replicas,
            updatedReplicas: d.status?.updatedReplicas,
            statusReplicas: d.status?.replicas,
            availableReplicas: d.status?.availableReplicas,
          }),
          pods: live.map(
            (p): RestartPod => ({
              name: nameOf(p),
              uid: uidOf(p),
              createdAt: createdAt(p),
              ready: isReady(p),
              terminating: Boolean(p.metadata?.deletionTimestamp),
            }),
          ),
          nowMs: Date.now(),
        });
        if (step.kind === 'done') return step;
        if (step.kind === 'act') {
          if (step.surge > 0) throw new Error(`a surge pod with maxSurge 0: ${JSON.stringify(step)}`);
          for (const name of step.evict) {
            const uid = uidOf(live.find((p) => nameOf(p) === name));
            const r = await evictPod(kube.core, namespace, name, { uid, deadline: Date.now() + 10_000 });
            if (r.outcome !== 'evicted') throw new Error(`evicting ${name}: ${JSON.stringify(r)}`);
            evicted.push(name);
          }
        }
        return pending({ step, evicted });
      },
      { describe: 'the restart pass to finish', timeout: 90_000, interval: 200 },
    );

    // Each original pod once (I3), and no replacement, though some were created within a second of T.
    expect([...evicted].sort()).toEqual(original.map(nameOf).sort());
    const after = await waitReady(kube, namespace, 'web', 4);
    expect(after.every((p) => !isBeforeCutoff(p.metadata?.creationTimestamp as Date, cutoff))).toBe(true);
    expect(minReady).toBeGreaterThanOrEqual(3);
    // Restart mode never writes the Deployment (I1).
    const d = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(d.metadata?.generation).toBe(before.metadata?.generation);
  });
});
