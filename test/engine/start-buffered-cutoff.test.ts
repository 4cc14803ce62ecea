// A config change seen while the service starts (the start-up sweep still waiting on its surge-pod
// LIST) is replayed once the start is done with the time it was seen, not the time of the replay: a
// pod created after the change already reads it and is not replaced (I3). Found by the execution-level
// simulation (test/sim/exec-sim.ts, seed 895: a template change, then a config change 154 ms later,
// while the sweep waited 30 s on a LIST); before the fix (ab12e8d, service/reconciler.ts
// configChanged) the replay took the replay time as its cutoff and replaced that pod too. The unit
// test is service/engine/start-cutoff.test.ts.
import { afterEach, describe, expect } from 'vitest';
import { ApiProxy } from '../support/api-proxy.ts';
import { it } from '../support/kube.ts';
import { livePods, PodTracker } from '../support/observe.ts';
import { proxiedServiceArgs } from '../support/proxied-service.ts';
import { killAll, startService } from '../support/service.ts';
import { pastTheSecondOf, pending, waitFor } from '../support/wait-for.ts';
import { scaleUpOne, webApp } from '../support/web-app.ts';
import { configMap } from '../support/workloads.ts';

afterEach(killAll);

/** The start-up sweep's LIST of surge pods (not a watch, not a reload's own list of one owner). */
const SURGE_LIST = /\/pods\?(?!.*watch=).*labelSelector=gitops-reloader\.io%2Fsurge(&|$)/;

describe('a config change seen while the service starts', () => {
  it('seed 895: replaces the pods older than the change, not a pod created after it while the start-up sweep waited', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const before = await webApp(kube, namespace, 2);

    // The service reaches the API server through the proxy, which holds the answer to the start-up
    // sweep's LIST until the test releases it: the term is starting, and buffers the changes it sees.
    const proxy = await ApiProxy.start(kube.kc);
    onTestFinished(() => proxy.close());
    const sweep = proxy.hold((r) => r.method === 'GET' && SURGE_LIST.test(r.path));
    let held = false;
    void sweep.held.then(() => {
      held = true;
    });
    onTestFinished(() => sweep.release());
    const svc = startService(await proxiedServiceArgs(kube, namespace, proxy, ['--debounce=0s']));
    await svc.waitForLog('baseline', (l) => l.msg === 'baseline recorded', 60_000);
    await waitFor(() => (held ? true : pending(proxy.requests.map((r) => r.path))), {
      describe: "the start-up sweep's surge-pod LIST held",
      timeout: 60_000,
    });

    // While it is held: the config changes, then the Deployment scales up, its new pod created in a
    // whole second past the change's cutoff (the time seen, rounded up, plus the 1 s margin).
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    const changedAt = Date.now();
    await pastTheSecondOf(changedAt + 2000);
    const { scaled, added: newer } = await scaleUpOne(kube, namespace, before);
    expect(newer.createdAt).toBeGreaterThan(changedAt);
    // Still starting: nothing was judged or reloaded yet.
    expect(svc.logs.some((l) => l.msg === 'reload started')).toBe(false);

    const tracker = await PodTracker.start(kube, namespace, 'web');
    onTestFinished(() => tracker.stop());
    sweep.release();
    await svc.waitForLog('the reload done', (l) => l.msg === 'reload complete', 90_000);
    const after = await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        return pods.length === 3 && pods.every((p) => p.ready && !p.surge) ? pods : pending(pods);
      },
      { describe: 'three Ready pods after the reload', timeout: 60_000 },
    );
    // The pods older than the change were replaced; the one created after it still serves.
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
    expect(after.map((p) => p.uid)).toContain(newer.uid);
    expect(tracker.newSince(scaled)).toHaveLength(2);
  });
});
