// Namespace scoping: --namespace-selector and --ignore-namespaces decide where the service acts.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

async function app(kube: Kube, namespace: string) {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      annotations: { 'reloader.stakater.com/auto': 'true' },
      container: { envFrom: [{ configMapRef: { name: 'app' } }] },
    }),
  });
  await waitReadyPods(kube, namespace, 'web', 1);
}

describe('namespace scope', () => {
  it('acts only in namespaces matching --namespace-selector and not in --ignore-namespaces', async ({
    kube,
    namespace,
  }) => {
    const team = `t${randomBytes(3).toString('hex')}`;
    const mk = async (labels: Record<string, string>) =>
      (await kube.core.createNamespace({ body: { metadata: { generateName: 'scope-', labels } } })).metadata
        ?.name as string;
    const selected = await mk({ team });
    const ignored = await mk({ team });
    const other = await mk({});
    try {
      for (const ns of [selected, ignored, other]) await app(kube, ns);
      // Cluster-wide watches, narrowed by the flags (the release namespace holds the ledger).
      const args = serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        `--namespace-selector=team=${team}`,
        `--ignore-namespaces=${ignored}`,
      ]).filter((a) => !a.startsWith('--namespaces='));
      const svc = startService(args);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      for (const ns of [ignored, other, selected]) {
        await kube.core.replaceNamespacedConfigMap({
          name: 'app',
          namespace: ns,
          body: configMap('app', { k: '2' }),
        });
      }
      await waitForEvent(kube, selected, 'Reloaded', 'web');
      await svc.waitForLog('selected done', (l) => l.msg === 'reload complete' && l.namespace === selected);
      const started = svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.namespace);
      expect(started).toEqual([selected]);
      expect(await events(kube, ignored, 'Reloaded')).toHaveLength(0);
      expect(await events(kube, other, 'Reloaded')).toHaveLength(0);
    } finally {
      for (const ns of [selected, ignored, other]) await kube.core.deleteNamespace({ name: ns });
    }
  });
});
