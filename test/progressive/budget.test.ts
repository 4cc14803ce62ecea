// The restart budget on the real control plane: with --restart-budget-per-namespace=2, a change that
// concerns 4 pods replaces 2 in its first minute and the next 2 a minute later, not all at once. Pods'
// evictions are read from the API server (each pod's deletionTimestamp), not from the service.
import { type V1Pod, Watch } from '@kubernetes/client-node';
import { afterEach, describe, expect, onTestFinished } from 'vitest';
import type { ReloadStatus } from '../../service/engine/status.ts';
import { it } from '../support/kube.ts';
import { waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment, isReady } from '../support/workloads.ts';

afterEach(killAll);

const APPS = ['a', 'b'];
const PER_MINUTE = 2;

describe('the restart budget', () => {
  it('replaces at most --restart-budget-per-namespace pods in any minute, and the reload completes', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    for (const app of APPS) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(app, {
          replicas: 2,
          labels: { fleet: 'budget' },
          annotations: { 'reloader.stakater.com/auto': 'true' },
          container: { envFrom: [{ configMapRef: { name: 'shared' } }] },
        }),
      });
    }
    const before = new Map<string, Awaited<ReturnType<typeof waitReadyPods>>>();
    for (const app of APPS) before.set(app, await waitReadyPods(kube, namespace, app, 2));
    const old = new Set([...before.values()].flat().map((p) => p.uid));
    // When each old pod was evicted or deleted, as the API server dates it (its deletionTimestamp),
    // through a watch that is opened again from a fresh LIST whenever the server ends it.
    const evictedAt = new Map<string, number>();
    const note = (p: V1Pod) => {
      const uid = p.metadata?.uid ?? '';
      const at = p.metadata?.deletionTimestamp;
      if (old.has(uid) && at && !evictedAt.has(uid)) evictedAt.set(uid, new Date(at).getTime());
    };
    let stopped = false;
    let current: AbortController | undefined;
    const follow = async (): Promise<void> => {
      const list = await kube.core.listNamespacedPod({ namespace, labelSelector: 'fleet=budget' });
      for (const p of list.items) note(p);
      current = await new Watch(kube.kc).watch(
        `/api/v1/namespaces/${namespace}/pods`,
        { labelSelector: 'fleet=budget', resourceVersion: list.metadata?.resourceVersion },
        (_type: string, p: V1Pod) => note(p),
        () => {
          if (!stopped) void follow().catch(() => undefined);
        },
      );
    };
    await follow();
    onTestFinished(() => {
      stopped = true;
      current?.abort();
    });
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=200ms',
        `--restart-budget-per-namespace=${PER_MINUTE}`,
        '--reload-deadline=20s',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const url = `${(await svc.waitForLog('status url', (l) => l.msg === 'status listening')).url}/status`;
    const status = async () => (await (await fetch(url)).json()) as ReloadStatus;
    await kube.core.replaceNamespacedConfigMap({
      name: 'shared',
      namespace,
      body: configMap('shared', { v: '2' }),
    });
    // What anyone with a port-forward reads meanwhile: a reload waiting for its budget slot.
    const waiting = await waitFor(
      async () => {
        const w = (await status()).waiting.filter((x) => x.why === 'budget');
        return w.length > 0 ? w : pending('no reload waiting for the budget yet');
      },
      { describe: "a reload shown waiting: 'budget'", timeout: 60_000 },
    );
    expect(waiting[0]).toMatchObject({ configs: ['ConfigMap/shared'], since: expect.any(String) });
    // Four pods at two a minute: the last two go a minute after the first two.
    await waitFor(
      async () => {
        const pods = (await kube.core.listNamespacedPod({ namespace, labelSelector: 'fleet=budget' })).items;
        const live = pods.filter((p) => !p.metadata?.deletionTimestamp);
        const done =
          live.length === 4 &&
          live.every(
            (p) =>
              !old.has(p.metadata?.uid ?? '') &&
              isReady(p) &&
              !p.metadata?.labels?.['gitops-reloader.io/surge'],
          );
        return done ? live : pending(live.map((p) => p.metadata?.name));
      },
      { describe: 'every old pod replaced by a Ready pod', timeout: 150_000 },
    );
    await waitFor(async () => (evictedAt.size === old.size ? true : pending(evictedAt.size)), {
      describe: 'every old pod evicted',
      timeout: 30_000,
    });
    // The service sees each reload end from its own watch, a moment after the pods read as done here.
    for (const app of APPS) {
      await svc.waitForLog(
        `${app} reload complete`,
        (l) => l.msg === 'reload complete' && l.workload === `Deployment/${app}`,
      );
    }
    const times = [...evictedAt.values()].sort((x, y) => x - y);
    // deletionTimestamp has whole seconds: a minute apart may read as 59 s.
    for (let i = PER_MINUTE; i < times.length; i++) {
      expect((times[i] as number) - (times[i - PER_MINUTE] as number)).toBeGreaterThanOrEqual(59_000);
    }
    // Waiting its turn is not a stall: nothing was cut by --reload-deadline (20 s, well under the minute).
    expect(svc.logs.filter((l) => l.msg === 'reload deadline passed; slot released, re-queued')).toEqual([]);
    expect(svc.logs.filter((l) => l.msg === 'reload complete')).toHaveLength(APPS.length);
    // And each done with its cause: the config and the key that changed (names only).
    const done = (await status()).done;
    expect(done.map((d) => d.workload).sort()).toEqual(APPS.map((a) => `Deployment/${namespace}/${a}`));
    for (const d of done)
      expect(d).toMatchObject({ configs: ['ConfigMap/shared'], keys: { 'ConfigMap/shared': ['v'] } });
  });
});
