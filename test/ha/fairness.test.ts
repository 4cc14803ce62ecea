// Issue 20, finding 5, on the real control plane: fairness bounds every namespace's share of the
// concurrent reload slots (⌊(cap − 1) / 2⌋, at least 1; docs/adr/0028), so two namespaces whose
// reloads are stuck (PodDisruptionBudgets that allow no eviction) cannot hold every slot. With a cap of
// 3, each stuck namespace holds one slot and a third namespace's reload runs at once. Under the old
// rule (a namespace may hold cap − 1 = 2), or with no fairness at all, the first stuck namespace took
// two slots and the second the last one, and the third namespace waited for a --reload-deadline
// (3 minutes here) to cut one of them.
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };
/** Far longer than the test waits for the third namespace: only fairness can let it run. */
const DEADLINE = '3m';

async function app(kube: Kube, namespace: string, name: string, stuck: boolean) {
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment(name, {
      replicas: 2,
      maxUnavailable: 1,
      maxSurge: 0,
      annotations: AUTO,
      container: USES,
    }),
  });
  if (stuck) {
    await kube.policy.createNamespacedPodDisruptionBudget({
      namespace,
      body: { metadata: { name }, spec: { maxUnavailable: 0, selector: { matchLabels: { app: name } } } },
    });
  }
}

describe('fairness across namespaces (issue 20, finding 5)', () => {
  it('two namespaces with stuck reloads leave a slot for a third, whose reload runs at once', async ({
    kube,
    namespace: first,
  }) => {
    const extra: string[] = [];
    const make = async (prefix: string) => {
      const ns = (await kube.core.createNamespace({ body: { metadata: { generateName: prefix } } })).metadata
        ?.name as string;
      extra.push(ns);
      return ns;
    };
    try {
      const second = await make('fair-second-');
      const third = await make('fair-third-');
      for (const ns of [first, second, third]) {
        await kube.core.createNamespacedConfigMap({ namespace: ns, body: configMap('app', { k: '1' }) });
      }
      // Two workloads behind a PDB that allows no disruption in each stuck namespace: enough to take
      // every slot of a cap of 3 under the old rule.
      for (const ns of [first, second]) for (const name of ['one', 'two']) await app(kube, ns, name, true);
      await app(kube, third, 'web', false);
      for (const ns of [first, second])
        for (const name of ['one', 'two']) await waitReadyPods(kube, ns, name, 2);
      const before = await waitReadyPods(kube, third, 'web', 2);

      const args = serviceArgs(first, await hashKeyFile(), [
        '--debounce=0s',
        '--max-concurrent-reloads=3',
        '--stall-after=1s',
        `--reload-deadline=${DEADLINE}`,
      ]).map((a) => (a.startsWith('--namespaces=') ? `--namespaces=${[first, second, third].join(',')}` : a));
      const svc = startService(args);
      await svc.waitForLog('ready', (l) => l.msg === 'ready');
      const started = (ns: string) =>
        svc.logs.filter((l) => l.msg === 'reload started' && l.namespace === ns);
      const stalled = (ns: string) =>
        svc.logs.filter((l) => l.msg === 'reload stalled' && l.namespace === ns);

      // Both tenants' reloads start and are blocked.
      for (const ns of [first, second]) {
        await kube.core.replaceNamespacedConfigMap({
          name: 'app',
          namespace: ns,
          body: configMap('app', { k: '2' }),
        });
      }
      await waitFor(
        () =>
          (stalled(first).length >= 1 && stalled(second).length >= 1) ||
          pending({ first: stalled(first).length, second: stalled(second).length }),
        { describe: 'a blocked reload in each stuck namespace', timeout: 60_000 },
      );
      const busy = { first: started(first).length, second: started(second).length };

      // The third namespace's reload runs while both tenants are still stuck, long before any deadline.
      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: third,
        body: configMap('app', { k: '2' }),
      });
      await waitForEvent(kube, third, 'Reloaded', 'web', 45_000);
      await waitAllReplaced(kube, third, 'web', before, 2);
      expect(svc.logs.filter((l) => l.msg === 'reload deadline passed; slot released, re-queued')).toEqual(
        [],
      );
      // Each stuck namespace held one slot, its share: its second reload waited.
      expect(busy).toEqual({ first: 1, second: 1 });
      expect({ first: started(first).length, second: started(second).length }).toEqual(busy);
      // Nothing was evicted in the stuck namespaces, and they said why.
      for (const ns of [first, second]) {
        for (const name of ['one', 'two']) {
          expect(
            (await kube.core.listNamespacedPod({ namespace: ns, labelSelector: `app=${name}` })).items,
          ).toHaveLength(2);
        }
        await waitFor(
          async () =>
            (await events(kube, ns, 'ReloadStalled')).length >= 1 ? true : pending('no ReloadStalled'),
          { describe: `a ReloadStalled Event in ${ns}` },
        );
      }
    } finally {
      for (const ns of extra) await kube.core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
  });
});
