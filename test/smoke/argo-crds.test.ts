// Our minimal Argo CD Application and Argo Rollouts Rollout CRDs are installed and behave like the
// real ones for what we use; our objects also satisfy the real upstream schemas.
import { ApiextensionsV1Api } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { createArgoObject, readArgoObject, replaceArgoObject } from '../support/argo.ts';
import { isEstablished } from '../support/crds.ts';
import { it } from '../support/kube.ts';
import {
  type ArgoObject,
  upstreamAvailable,
  upstreamCrdDir,
  validateAgainstUpstream,
} from '../support/upstream-schema.ts';

function application(namespace: string, name: string): ArgoObject {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Application',
    metadata: { name, namespace },
    spec: {
      project: 'default',
      source: { repoURL: 'http://127.0.0.1:1/config.git', path: 'apps/web', targetRevision: 'main' },
      destination: { server: 'https://kubernetes.default.svc', namespace: 'web' },
      syncPolicy: { automated: { prune: true, selfHeal: true } },
    },
  };
}

function rollout(namespace: string, name: string): ArgoObject {
  return {
    apiVersion: 'argoproj.io/v1alpha1',
    kind: 'Rollout',
    // A plain object for the round trip: the real Argo Rollouts controller (no instance id) leaves it alone.
    metadata: {
      name,
      namespace,
      labels: { 'argo-rollouts.argoproj.io/controller-instance-id': 'unmanaged' },
    },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
      },
      strategy: { canary: { steps: [{ setWeight: 50 }, { pause: { duration: '10s' } }] } },
    },
  };
}

describe('Argo CD and Argo Rollouts CRDs', () => {
  it('are installed and Established', async ({ kube }) => {
    const api = kube.kc.makeApiClient(ApiextensionsV1Api);
    for (const name of ['applications.argoproj.io', 'rollouts.argoproj.io']) {
      const crd = await api.readCustomResourceDefinition({ name });
      expect(isEstablished(crd), name).toBe(true);
      expect(crd.spec.scope).toBe('Namespaced');
    }
    const app = await api.readCustomResourceDefinition({ name: 'applications.argoproj.io' });
    // Like upstream: Argo CD updates Application status directly, there is no status subresource.
    expect(app.spec.versions[0]?.subresources?.status).toBeUndefined();
    const ro = await api.readCustomResourceDefinition({ name: 'rollouts.argoproj.io' });
    expect(ro.spec.versions[0]?.subresources?.status).toEqual({});
  });

  it('round-trips an Application with status.operationState', async ({ kube, namespace }) => {
    const created = await createArgoObject(kube.custom, application(namespace, 'web'));
    const operationState = {
      operation: {
        sync: { revision: 'a1b2c3d4e5f6', syncStrategy: { hook: {} } },
        initiatedBy: { automated: true },
      },
      phase: 'Running',
      message: 'waiting for completion of hook batch/Job/migrate',
      startedAt: '2026-12-02T10:00:00Z',
      syncResult: {
        revision: 'a1b2c3d4e5f6',
        source: { repoURL: 'http://127.0.0.1:1/config.git', path: 'apps/web', targetRevision: 'main' },
        resources: [
          {
            group: '',
            version: 'v1',
            kind: 'ConfigMap',
            namespace: 'web',
            name: 'web-config',
            status: 'Synced',
            message: 'configmap/web-config configured',
            hookPhase: 'Running',
            syncPhase: 'Sync',
          },
        ],
      },
    };
    await replaceArgoObject(kube.custom, { ...created, status: { operationState } });
    const read = await readArgoObject<ArgoObject>(kube.custom, 'Application', namespace, 'web');
    expect((read.status as { operationState: unknown }).operationState).toEqual(operationState);

    const finished = { ...operationState, phase: 'Succeeded', finishedAt: '2026-12-02T10:00:07Z' };
    await replaceArgoObject(kube.custom, { ...read, status: { operationState: finished } });
    const again = await readArgoObject<ArgoObject>(kube.custom, 'Application', namespace, 'web');
    expect((again.status as { operationState: { phase: string } }).operationState.phase).toBe('Succeeded');
  });

  it('round-trips a Rollout and serves its status subresource', async ({ kube, namespace }) => {
    await createArgoObject(kube.custom, rollout(namespace, 'api'));
    const read = await readArgoObject<ArgoObject>(kube.custom, 'Rollout', namespace, 'api');
    expect((read.spec as { replicas: number }).replicas).toBe(2);
    await kube.custom.patchNamespacedCustomObjectStatus({
      group: 'argoproj.io',
      version: 'v1alpha1',
      namespace,
      plural: 'rollouts',
      name: 'api',
      body: [{ op: 'add', path: '/status', value: { phase: 'Healthy', HPAReplicas: 2 } }],
    });
    const withStatus = await readArgoObject<ArgoObject>(kube.custom, 'Rollout', namespace, 'api');
    expect(withStatus.status).toEqual({ phase: 'Healthy', HPAReplicas: 2 });
    expect(withStatus.metadata.generation).toBe(read.metadata.generation);
  });

  it('checks test objects against the upstream schemas, and that check can fail', async ({
    kube,
    namespace,
  }) => {
    if (!upstreamAvailable()) {
      // A fresh clone without the upstream CRD folder (upstreamCrdDir) cannot run this; CI always has it.
      console.log(`upstream schema check did not run: ${upstreamCrdDir} is missing`);
      expect(process.env.CI, `CI must provide the upstream CRDs in ${upstreamCrdDir}`).toBeFalsy();
      return;
    }
    expect(await validateAgainstUpstream(kube.custom, application(namespace, 'ok'))).toBe(true);
    expect(await validateAgainstUpstream(kube.custom, rollout(namespace, 'ok'))).toBe(true);
    const wrong = application(namespace, 'wrong');
    (wrong.spec as Record<string, unknown>).sourceRepo = 'not an Application field';
    await expect(validateAgainstUpstream(kube.custom, wrong)).rejects.toThrow(/upstream schema.*sourceRepo/);
    const mistyped = rollout(namespace, 'mistyped');
    (mistyped.spec as Record<string, unknown>).replicas = 'two';
    await expect(validateAgainstUpstream(kube.custom, mistyped)).rejects.toThrow(/upstream schema/);
  });
});
