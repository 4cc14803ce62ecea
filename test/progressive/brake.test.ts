// The emergency brake on the real control plane (docs/progressive-reloads.md): a change concerns 30
// Deployments; while their reloads run, the brake is set (the service restarts with --brake, as a
// rollout of the chart value does). The braked service starts no reload and holds every change; when
// the brake is released (restarted without it), every workload completes, and no pod is replaced twice.
import { afterEach, describe, expect, onTestFinished } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import {
  livePods,
  PodTracker,
  type PodView,
  surgePods,
  waitAllReplaced,
  waitReadyPods,
} from '../support/observe.ts';
import { FAST_LEASE } from '../support/replicas.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const N = 30;
const REPLICAS = 2;
const apps = Array.from({ length: N }, (_, i) => `app-${String(i).padStart(2, '0')}`);

function start(namespace: string, key: string, extra: string[] = []): RunningService {
  // Two reloads at a time in one namespace (⌊(5 − 1) / 2⌋, ADR 0028): the 30 take a while.
  return startService(
    serviceArgs(namespace, key, ['--debounce=500ms', '--max-concurrent-reloads=5', ...FAST_LEASE, ...extra]),
  );
}

async function pods(kube: Kube, namespace: string): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const app of apps) out.set(app, (await livePods(kube, namespace, app)).map((p) => p.uid).sort());
  return out;
}

const completed = (svc: RunningService) =>
  new Set(svc.logs.filter((l) => l.msg === 'reload complete').map((l) => l.workload as string));

describe('the emergency brake', () => {
  it('set during a 30-workload reload: no reload starts while it holds, and after release every workload completes with no pod replaced twice', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    for (const app of apps) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(app, {
          replicas: REPLICAS,
          annotations: { 'reloader.stakater.com/auto': 'true' },
          // Slow enough that the brake comes while reloads run.
          podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '1s' },
          container: { envFrom: [{ configMapRef: { name: 'shared' } }] },
        }),
      });
    }
    const before = new Map<string, PodView[]>();
    for (const app of apps) before.set(app, await waitReadyPods(kube, namespace, app, REPLICAS));
    const trackers = new Map<string, PodTracker>();
    for (const app of apps) trackers.set(app, await PodTracker.start(kube, namespace, app));
    onTestFinished(() => {
      for (const t of trackers.values()) t.stop();
    });
    const key = await hashKeyFile();
    const first = start(namespace, key);
    await first.waitForLog('ready', (l) => l.msg === 'ready');

    await kube.core.replaceNamespacedConfigMap({
      name: 'shared',
      namespace,
      body: configMap('shared', { v: '2' }),
    });
    await waitFor(async () => (completed(first).size >= 4 ? true : pending(completed(first).size)), {
      describe: 'a few reloads complete',
      timeout: 60_000,
    });
    // The brake is set: the service is rolled (SIGTERM) and comes back with --brake.
    expect(await first.stop()).toBe(0);
    const done = completed(first);
    expect(done.size).toBeLessThan(N);
    const braked = start(namespace, key, ['--brake']);
    await braked.waitForLog('ready', (l) => l.msg === 'ready');
    // Every workload whose reload did not complete is held: its change is kept, not applied.
    const rest = apps.map((a) => `Deployment/${a}`).filter((w) => !done.has(w));
    await waitFor(
      async () => {
        const held = new Set(
          braked.logs.filter((l) => l.msg === 'reload held by the brake (--brake)').map((l) => l.workload),
        );
        return rest.every((w) => held.has(w)) ? held : pending(`${held.size} of ${rest.length}`);
      },
      { describe: `the ${rest.length} unfinished reloads held`, timeout: 60_000 },
    );
    // Its start-up judged every workload and resumed nothing (unbraked, the interrupted reloads
    // would have started right there).
    expect(braked.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    const atBrake = await pods(kube, namespace);
    await waitFor(
      async () => {
        const heldEvents = (await kube.core.listNamespacedEvent({ namespace })).items.filter(
          (e) => e.reason === 'ReloadHeld' && e.message?.startsWith('held by the emergency brake'),
        );
        return heldEvents.length === rest.length ? heldEvents : pending(heldEvents.length);
      },
      { describe: 'a ReloadHeld Warning on each held workload', timeout: 30_000 },
    );
    // Still nothing replaced while it holds.
    expect(await pods(kube, namespace)).toEqual(atBrake);
    expect(braked.logs.filter((l) => l.msg === 'reload started')).toEqual([]);

    // Released: every workload completes, and each old pod was replaced exactly once.
    expect(await braked.stop()).toBe(0);
    const released = start(namespace, key);
    for (const app of apps) await waitAllReplaced(kube, namespace, app, before.get(app) ?? [], REPLICAS);
    await waitFor(
      async () => {
        const left = await surgePods(kube, namespace);
        return left.length === 0 ? left : pending(left.map((p) => p.metadata?.name));
      },
      { describe: 'no surge pod left', timeout: 60_000 },
    );
    await waitFor(
      async () => (rest.every((w) => completed(released).has(w)) ? true : pending(completed(released).size)),
      { describe: 'the held reloads complete', timeout: 120_000 },
    );
    for (const app of apps) {
      const fresh = trackers.get(app)?.newSince(before.get(app) ?? []) ?? [];
      expect({ app, replacements: fresh.length }).toEqual({ app, replacements: REPLICAS });
    }
  });
});
