// The story's engine for `npm run demo`: the Argo CD Application of examples/demo/application.yaml,
// synced automatically; a hard refresh makes Argo CD fetch a new commit at once.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { repoRoot } from '../../test/cluster/paths.ts';
import { onCleanUp } from './cleanup.ts';
import type { Engine } from './engine.ts';
import { short } from './output.ts';
import { APP_NAMESPACE } from './pods.ts';
import { until } from './wait.ts';

interface AppView {
  phase?: string;
  sync?: string;
  health?: string;
  revision?: string;
  startedAt?: string;
  finishedAt?: string;
}

export const argocdEngine: Engine = {
  name: 'Argo CD',
  environment:
    'control plane and Argo CD (real kube-apiserver, etcd, controllers, Argo CD v3.6; kwok plays the nodes)',
  // No Flux: neither built nor started for this story (a running environment's Flux is left as it is).
  needs: { flux: false },
  words: {
    deployIt: 'sync it',
    appliesIt: 'syncs it',
    heldUntil: 'changes held until the sync ended',
    oneChange: 'Argo CD sync',
  },
  open(state, { core, custom }) {
    const argocd = state.argocd;
    if (!argocd) throw new Error('Argo CD did not start');
    const appRef = {
      group: 'argoproj.io',
      version: 'v1alpha1',
      namespace: argocd.namespace,
      plural: 'applications',
      name: 'shop',
    };
    const readApp = async (): Promise<AppView> => {
      const a = (await custom.getNamespacedCustomObject(appRef)) as {
        status?: {
          sync?: { status?: string; revision?: string };
          health?: { status?: string };
          operationState?: {
            phase?: string;
            startedAt?: string;
            finishedAt?: string;
            syncResult?: { revision?: string };
          };
        };
      };
      const s = a.status;
      return {
        ...(s?.operationState?.phase ? { phase: s.operationState.phase } : {}),
        ...(s?.sync?.status ? { sync: s.sync.status } : {}),
        ...(s?.health?.status ? { health: s.health.status } : {}),
        ...(s?.operationState?.syncResult?.revision
          ? { revision: s.operationState.syncResult.revision }
          : {}),
        ...(s?.operationState?.startedAt ? { startedAt: s.operationState.startedAt } : {}),
        ...(s?.operationState?.finishedAt ? { finishedAt: s.operationState.finishedAt } : {}),
      };
    };
    const refresh = () =>
      custom.patchNamespacedCustomObject(
        { ...appRef, body: { metadata: { annotations: { 'argocd.argoproj.io/refresh': 'hard' } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    const syncedAt = (sha: string) =>
      until(
        `Argo CD to sync ${short(sha)}`,
        async () => {
          const v = await readApp();
          return v.revision === sha &&
            v.phase === 'Succeeded' &&
            v.sync === 'Synced' &&
            v.health === 'Healthy'
            ? v
            : undefined;
        },
        120_000,
      );

    return {
      serviceFlags: [`--argocd-namespaces=${argocd.namespace}`],
      async clearLeftovers() {
        await custom.deleteNamespacedCustomObject(appRef).catch(() => undefined);
      },
      async deploy(repoUrl, sha) {
        const app = parseYaml(
          await readFile(path.join(repoRoot, 'examples', 'demo', 'application.yaml'), 'utf8'),
        ) as { spec: { source: { repoURL: string } } };
        app.spec.source.repoURL = repoUrl;
        await custom.createNamespacedCustomObject({ ...appRef, body: app });
        onCleanUp(async () => {
          await custom.deleteNamespacedCustomObject(appRef);
          await core.deleteNamespace({ name: APP_NAMESPACE });
        });
        await syncedAt(sha);
        return `Argo CD synced ${short(sha)}: Synced, Healthy`;
      },
      async apply(sha) {
        await refresh();
        const end = await until(
          `Argo CD's sync of ${short(sha)} to end`,
          async () => {
            const v = await readApp();
            return v.revision === sha && v.phase === 'Succeeded' ? v : undefined;
          },
          120_000,
        );
        return `Argo CD sync ${end.startedAt} → ${end.finishedAt}: Succeeded`;
      },
      async settled(sha) {
        await refresh();
        const app = await syncedAt(sha);
        return `${app.sync}, ${app.health}`;
      },
    };
  },
};
