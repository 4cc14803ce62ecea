// The shipped "reload (drift-free)" action end to end: its Lua runs on the live Deployment (a real
// interpreter), the result is applied the way Argo CD applies an action (a JSON merge patch of the
// difference), and gitops-reloader then restarts the workload once without touching its template.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../cluster/paths.ts';
import { ArgoCdPlayer } from '../support/argocd-player.ts';
import { idle } from '../support/decisions.ts';
import { it } from '../support/kube.ts';
import { livePods, PodTracker, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { cm, reloadedCount, web } from './fixtures.ts';
import { mergePatch, runLua } from './lua.ts';

afterEach(killAll);

async function shippedAction(key: string): Promise<string> {
  const file = path.join(repoRoot, 'argocd-plugin', 'actions', 'argocd-cm.yaml');
  const cmData = (parse(await readFile(file, 'utf8')) as { data: Record<string, string> }).data;
  const c = parse(cmData[`resource.customizations.actions.${key}`] as string) as {
    definitions: Array<{ name: string; 'action.lua': string }>;
  };
  return c.definitions.find((d) => d.name === 'reload')?.['action.lua'] as string;
}

describe('the reload resource action', () => {
  it('restarts a Deployment once, leaving its template and git alone', async ({ kube, namespace }) => {
    const player = await ArgoCdPlayer.start({
      kube,
      appNamespace: namespace,
      appName: 'shop',
      destination: namespace,
      mode: 'server-side-apply',
    });
    await player.sync([[cm('app', { k: '1' })], [web('web', { configMaps: ['app'], replicas: 2 })]]);
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [`--argocd-namespaces=${namespace}`]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const tracker = await PodTracker.start(kube, namespace, 'web');

    // What argocd-server does for "Actions > reload": run the Lua, patch the difference.
    const objects = KubernetesObjectApi.makeApiClient(kube.kc);
    const live = await objects.read({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace },
    });
    const plain = JSON.parse(JSON.stringify(live));
    const result = await runLua(await shippedAction('apps_Deployment'), plain);
    const patch = mergePatch(plain, result) as { metadata: { annotations: Record<string, string> } };
    expect(Object.keys(patch)).toEqual(['metadata']);
    await objects.patch(
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        ...patch,
        metadata: { name: 'web', namespace, ...patch.metadata },
      },
      undefined,
      undefined,
      'argocd-server',
      undefined,
      PatchStrategy.MergePatch,
    );

    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(ev.message).toMatch(/gitops-reloader.io\/reload-requested-at/);
    const old = new Set(before.map((p) => p.uid));
    await waitFor(
      async () => {
        const pods = await livePods(kube, namespace, 'web');
        return pods.length === 2 && pods.every((p) => p.ready && !old.has(p.uid)) ? pods : pending(pods);
      },
      { describe: 'both pods replaced', timeout: 60_000 },
    );
    await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
    );
    // Decided: nothing more under way for web (a second reload would be waited for, and counted).
    await idle(svc, `Deployment/${namespace}/web`);
    expect(await reloadedCount(kube, namespace, 'web'), 'a second reload').toBe(1);
    tracker.stop();
    expect(tracker.newSince(before)).toHaveLength(2);

    // The template is still what git applied: no new ReplicaSet, the same template hash.
    const after = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(JSON.stringify(after.spec?.template)).toBe(JSON.stringify((live as typeof after).spec?.template));
    const sets = await kube.apps.listNamespacedReplicaSet({ namespace, labelSelector: 'app=web' });
    expect(sets.items).toHaveLength(1);
  });
});
