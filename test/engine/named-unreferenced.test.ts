// Configs a workload names (configmap.reloader.stakater.com/reload) but its pod template does not use,
// deleted and created (issue 37), against the real control plane. Reloader reloads such a workload on
// the config's deletion with --reload-on-delete and on its creation with --reload-on-create (the flags
// its own e2e suite runs with); without them it leaves it alone. Before the fix, the deletion made a
// ledger entry the encoding refused for good ("configUids[…] names no config of configs", retried every
// 2 s): the workload was never recorded again, and nothing was reloaded.
// Measured: 6 s (two tests, one service each); on main c109073 both fail.
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { ledgerEntry } from '../support/ledger.ts';
import { livePods, waitAllReplaced, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const NAMED = { 'configmap.reloader.stakater.com/reload': 'gone-cm,new-cm' };
const AUTO = { 'reloader.stakater.com/auto': 'true' };

async function setUp(kube: Kube, namespace: string, flags: string[]): Promise<RunningService> {
  for (const [name, k] of [
    ['gone-cm', '1'],
    ['app', '1'],
  ] as const) {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap(name, { k }) });
  }
  // `named` names gone-cm and new-cm and uses neither; `bystander` uses app.
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('named', { annotations: NAMED }),
  });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('bystander', {
      annotations: AUTO,
      container: { envFrom: [{ configMapRef: { name: 'app' } }] },
    }),
  });
  await waitReadyPods(kube, namespace, 'named', 1);
  await waitReadyPods(kube, namespace, 'bystander', 1);
  const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', ...flags]));
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  await recorded(kube, namespace, 'named', (c) => Object.hasOwn(c, `ConfigMap/${namespace}/gone-cm`));
  return svc;
}

/** Waits until the workload's ledger entry, as stored in the cluster, satisfies `ok`. */
const recorded = (
  kube: Kube,
  namespace: string,
  name: string,
  ok: (configs: Record<string, string>) => boolean,
) =>
  waitFor(
    async () => {
      const e = await ledgerEntry(kube, namespace, `Deployment/${namespace}/${name}`);
      return e && ok(e.configs) && !e.pending ? e : pending(e);
    },
    { describe: `the ledger entry of ${name}`, timeout: 30_000 },
  );

/** The service's next decision about `named` after log line `from`. */
const decision = (svc: RunningService, from: number) =>
  svc.waitForLog('a decision on Deployment/named', (l) => {
    if (svc.logs.indexOf(l) < from || l.workload !== 'Deployment/named') return false;
    return [
      'no reload needed',
      'watched configs changed; recorded',
      'reload started',
      'could not record the ledger; retrying',
    ].includes(l.msg);
  });

const uids = async (kube: Kube, namespace: string, app: string) =>
  (await livePods(kube, namespace, app)).map((p) => p.uid).sort();

const refusals = (svc: RunningService) =>
  svc.logs.filter((l) => l.msg === 'could not record the ledger; retrying');

describe('a named config the pod template does not use', () => {
  it('with --reload-on-delete and --reload-on-create reloads the workload on its deletion and on its creation, and keeps recording it and its neighbours', async ({
    kube,
    namespace,
  }) => {
    const svc = await setUp(kube, namespace, ['--reload-on-delete=true', '--reload-on-create=true']);
    const first = await livePods(kube, namespace, 'named');
    const bystander = await livePods(kube, namespace, 'bystander');

    await kube.core.deleteNamespacedConfigMap({ name: 'gone-cm', namespace });
    await waitForEvent(kube, namespace, 'Reloaded', 'named');
    const second = await waitAllReplaced(kube, namespace, 'named', first, 1);
    // Its entry is written again: the reload recorded what the workload saw, the config missing.
    await recorded(kube, namespace, 'named', (c) => c[`ConfigMap/${namespace}/gone-cm`] === 'missing');

    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('new-cm', { k: '1' }) });
    await waitAllReplaced(kube, namespace, 'named', second, 1);
    await recorded(kube, namespace, 'named', (c) => Object.hasOwn(c, `ConfigMap/${namespace}/new-cm`));

    // Another workload's recording is untouched: its change reloads it and is recorded.
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitAllReplaced(kube, namespace, 'bystander', bystander, 1);
    expect(refusals(svc)).toEqual([]);
  });

  it('without the flags leaves the workload alone on its deletion and creation, and records both', async ({
    kube,
    namespace,
  }) => {
    const svc = await setUp(kube, namespace, []);
    const before = await uids(kube, namespace, 'named');

    let mark = svc.logs.length;
    await kube.core.deleteNamespacedConfigMap({ name: 'gone-cm', namespace });
    const deleted = await decision(svc, mark);
    expect(deleted.msg).toBe('no reload needed');
    expect(deleted.deleted).toEqual([`ConfigMap/${namespace}/gone-cm`]);

    mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('new-cm', { k: '1' }) });
    const created = await decision(svc, mark);
    expect(created.msg).toBe('watched configs changed; recorded');
    expect(created.added).toEqual([`ConfigMap/${namespace}/new-cm`]);
    await recorded(kube, namespace, 'named', (c) => Object.hasOwn(c, `ConfigMap/${namespace}/new-cm`));

    expect(await uids(kube, namespace, 'named')).toEqual(before);
    expect(refusals(svc)).toEqual([]);
  });
});
