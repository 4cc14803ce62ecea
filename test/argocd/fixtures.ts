// Manifests for the Argo CD suites, as a git repo would hold them, and observation helpers.

import type { Manifest } from '../support/argocd-player.ts';
import type { Kube } from '../support/kube.ts';
import { events } from '../support/observe.ts';
import { deployment } from '../support/workloads.ts';

export const AUTO = { 'reloader.stakater.com/auto': 'true' };

export function cm(name: string, data: Record<string, string>): Manifest {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data };
}

export function secret(name: string, data: Record<string, string>): Manifest {
  const b64 = Object.fromEntries(
    Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
  );
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name }, type: 'Opaque', data: b64 };
}

/**
 * A PostSync hook Job named `post`. Its pod completes, or with `fail` fails (kwok's pod-fail stage,
 * test/cluster/kwok/stages.yaml), so the operation ends Succeeded or Failed after the configs applied.
 */
export function postSyncHook(o: { fail: boolean }): Manifest {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: 'post',
      annotations: {
        'argocd.argoproj.io/hook': 'PostSync',
        'argocd.argoproj.io/hook-delete-policy': 'BeforeHookCreation',
      },
    },
    spec: {
      backoffLimit: 0,
      template: {
        metadata: o.fail ? { annotations: { 'kwok.gitops-reloader.io/fail': 'true' } } : {},
        spec: { restartPolicy: 'Never', containers: [{ name: 'hook', image: 'registry.invalid/hook:1' }] },
      },
    },
  };
}

/** A Deployment that reads each ConfigMap by envFrom and each Secret as a volume. */
export function web(
  name: string,
  o: { configMaps?: string[]; secrets?: string[]; replicas?: number; image?: string } = {},
): Manifest {
  const d = deployment(name, {
    replicas: o.replicas ?? 1,
    annotations: AUTO,
    container: {
      image: o.image ?? 'registry.invalid/app:1',
      envFrom: (o.configMaps ?? []).map((c) => ({ configMapRef: { name: c } })),
      volumeMounts: (o.secrets ?? []).map((s) => ({ name: s, mountPath: `/etc/${s}` })),
    },
    volumes: (o.secrets ?? []).map((s) => ({ name: s, secret: { secretName: s } })),
  });
  return d as unknown as Manifest;
}

export async function reloadedCount(kube: Kube, namespace: string, name: string): Promise<number> {
  return (await events(kube, namespace, 'Reloaded', name)).length;
}

/**
 * Observes for `ms` that `check` finds nothing wrong, failing at the first violation. Only for a
 * behaviour that is itself about time (a hold that must outlast the debounce): a negative check
 * ("nothing reloaded") waits for the service's decision about the change instead
 * (test/support/decisions.ts), since a window proves only that it had not acted yet.
 */
export async function stayQuiet(ms: number, check: () => Promise<string | undefined>): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    const bad = await check();
    if (bad) throw new Error(`expected nothing to happen for ${ms} ms, but ${bad}`);
    if (Date.now() >= until) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
