// The CMP under the real argocd-cmp-server, rendering an Application's manifests through the
// repo-server: Applications with `spec.source.plugin.name: gitops-reloader-checksum` over a plain
// directory and over a Helm chart, synced by the real Argo CD v3.6 of test/cluster. The cmp-server runs
// argocd-plugin/cmp/plugin.yaml as shipped, with `gitops-reloader checksum` and helm on its PATH and
// the key file of endpoints.cmpKeyFile. What is asserted is what a user sees: the live Deployment's
// pod-template annotation, its generation and ReplicaSets, its pods, and the Application's status.
import { readFile } from 'node:fs/promises';
import { describe, expect } from 'vitest';
import { hashConfig, namespaceKey, setDigest } from '../../../service/core/config-hash.ts';
import { configId } from '../../../service/core/types.ts';
import { ArgoApp, argocdEndpoints, GitRepo, startReloader, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { it, type Kube } from '../../support/kube.ts';
import {
  events,
  PodTracker,
  type PodView,
  waitForEvent,
  waitReadyPods,
  waitRolledOut,
} from '../../support/observe.ts';
import { cm, web } from '../fixtures.ts';

const ANNOTATION = 'gitops-reloader.io/config-hash';
const PLUGIN = { plugin: { name: 'gitops-reloader-checksum' } };

/** The key the cmp-server's `gitops-reloader checksum` reads, as the service reads a key file. */
async function cmpKey(): Promise<Buffer> {
  const text = await readFile(argocdEndpoints().cmpKeyFile, 'utf8');
  return Buffer.from(text.replace(/\s+$/, ''), 'utf8');
}

/** What `gitops-reloader serve` publishes for a workload using all of one ConfigMap in `namespace`. */
function expectedHash(key: Buffer, namespace: string, config: string, data: Record<string, string>): string {
  const id = configId({ kind: 'ConfigMap', namespace, name: config });
  return setDigest(
    { [id]: hashConfig({ data }, namespaceKey(key, namespace)).all },
    namespaceKey(key, namespace),
  );
}

async function liveHash(kube: Kube, namespace: string, name: string): Promise<string | undefined> {
  const d = await kube.apps.readNamespacedDeployment({ name, namespace });
  return d.spec?.template?.metadata?.annotations?.[ANNOTATION];
}

/** The Deployment's ReplicaSets, by pod-template-hash, with their desired replicas. */
async function replicaSets(kube: Kube, namespace: string, app: string) {
  const list = await kube.apps.listNamespacedReplicaSet({ namespace, labelSelector: `app=${app}` });
  return list.items.map((rs) => ({
    hash: rs.metadata?.labels?.['pod-template-hash'] ?? '',
    replicas: rs.spec?.replicas ?? 0,
    annotation: rs.spec?.template?.metadata?.annotations?.[ANNOTATION],
  }));
}

/** Asserts one rollout from `before`: every old pod replaced once, by pods of one new ReplicaSet. */
function expectOneRollout(pods: PodTracker, before: readonly PodView[], replicas: number) {
  const fresh = pods.newSince(before);
  expect(fresh, 'each pod replaced exactly once').toHaveLength(replicas);
  expect(pods.surgePods(), 'no surge pod of ours').toEqual([]);
}

describe.concurrent('the CMP under the real argocd-cmp-server', { timeout: 300_000 }, () => {
  it('renders a plain directory with the checksum; a ConfigMap commit changes it and Argo CD rolls the workload once', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const key = await cmpKey();
    const files = (mode: string) =>
      toFiles([cm('web-config', { mode }), web('web', { configMaps: ['web-config'], replicas: 2 })]);
    const repo = await GitRepo.create(namespace, files('fast'));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      destination: namespace,
      source: PLUGIN,
    });
    try {
      const first = await app.waitSynced(await repo.head());
      // Rendered by the plugin, not by Argo CD's own directory support.
      expect(first.status?.sourceType ?? '').toBe('Plugin');
      expect(await liveHash(kube, namespace, 'web')).toBe(
        expectedHash(key, namespace, 'web-config', { mode: 'fast' }),
      );
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const generation = (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata
        ?.generation as number;
      // The service runs too, in its default restart mode, on a workload that opts in
      // (reloader.stakater.com/auto): the template rollout replaces every pod, so it adds none.
      const svc = await startReloader(namespace, [], { onTestFinished });
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(repo, files('slow'), 'web-config: slow');
      await app.waitSynced(sha);
      const rolled = await waitRolledOut(kube, namespace, 'web', 2);
      const next = expectedHash(key, namespace, 'web-config', { mode: 'slow' });
      expect(rolled.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(next);
      expect(next).not.toBe(expectedHash(key, namespace, 'web-config', { mode: 'fast' }));
      expect(rolled.metadata?.generation, 'one template change').toBe(generation + 1);
      const rs = await replicaSets(kube, namespace, 'web');
      expect(rs, 'two ReplicaSets: the first template and the checksum bump').toHaveLength(2);
      expect(rs.find((r) => r.replicas === 2)?.annotation).toBe(next);
      await waitReadyPods(kube, namespace, 'web', 2);
      const outcome = await svc.waitForLog(
        'the service saw the change',
        (l) => l.workload === 'Deployment/web' && l.msg === 'reload complete',
        60_000,
      );
      expect(outcome, 'every pod was already newer than the change').toMatchObject({
        replaced: 0,
        notNeeded: true,
      });
      await waitForEvent(kube, namespace, 'ReloadNotNeeded', 'web');
      // Nothing more: nothing under way for web in the service, the app stays Synced/Healthy while
      // Argo CD compares twice more, and no second rollout.
      const settled = Date.now();
      await idle(svc, `Deployment/${namespace}/web`);
      await app.expectStaysSyncedAndHealthy(settled);
      expect(await replicaSets(kube, namespace, 'web'), 'ReplicaSets').toHaveLength(2);
      pods.stop();
      expectOneRollout(pods, before, 2);
      expect(await events(kube, namespace, 'Reloaded', 'web')).toEqual([]);
      const final = await app.read();
      expect(final.status?.sync?.status).toBe('Synced');
      expect(final.status?.health?.status).toBe('Healthy');
    } finally {
      await app.delete();
    }
  });

  it('renders a Helm chart (values files as a parameter) with the checksum; a values commit changes it and Argo CD rolls once', async ({
    kube,
    namespace,
  }) => {
    const key = await cmpKey();
    const chart = (mode: string): Record<string, string> => ({
      'chart/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n',
      'chart/values.yaml': 'mode: default\nreplicas: 2\n',
      'chart/values-prod.yaml': `mode: ${mode}\n`,
      'chart/templates/configmap.yaml': `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  mode: {{ .Values.mode | quote }}
`,
      'chart/templates/deployment.yaml': `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
          envFrom:
            - configMapRef: {name: {{ .Release.Name }}-config}
`,
    });
    const repo = await GitRepo.create(namespace, chart('fast'));
    const app = await ArgoApp.create(kube, {
      name: namespace,
      repo,
      path: 'chart',
      destination: namespace,
      source: {
        plugin: {
          name: 'gitops-reloader-checksum',
          parameters: [{ name: 'values-files', array: ['values.yaml', 'values-prod.yaml'] }],
        },
      },
    });
    try {
      await app.waitSynced(await repo.head());
      // The release is named after the Application, as Argo CD's own Helm support names it.
      const config = `${namespace}-config`;
      const live = await kube.core.readNamespacedConfigMap({ name: config, namespace });
      expect(live.data, 'the last values file wins').toEqual({ mode: 'fast' });
      expect(await liveHash(kube, namespace, 'web')).toBe(
        expectedHash(key, namespace, config, { mode: 'fast' }),
      );
      const before = await waitReadyPods(kube, namespace, 'web', 2);
      const generation = (await kube.apps.readNamespacedDeployment({ name: 'web', namespace })).metadata
        ?.generation as number;
      const pods = await PodTracker.start(kube, namespace, 'web');

      const sha = await app.commit(
        repo,
        { 'chart/values-prod.yaml': 'mode: slow\n' },
        'values-prod: mode slow',
      );
      await app.waitSynced(sha);
      const rolled = await waitRolledOut(kube, namespace, 'web', 2);
      expect((await kube.core.readNamespacedConfigMap({ name: config, namespace })).data).toEqual({
        mode: 'slow',
      });
      const next = expectedHash(key, namespace, config, { mode: 'slow' });
      expect(rolled.spec?.template?.metadata?.annotations?.[ANNOTATION]).toBe(next);
      expect(rolled.metadata?.generation, 'one template change').toBe(generation + 1);
      expect(await replicaSets(kube, namespace, 'web')).toHaveLength(2);
      await waitReadyPods(kube, namespace, 'web', 2);
      const settled = Date.now();
      await app.expectStaysSyncedAndHealthy(settled);
      pods.stop();
      expectOneRollout(pods, before, 2);
      const final = await app.read();
      expect(final.status?.sync?.status).toBe('Synced');
      expect(final.status?.health?.status).toBe('Healthy');
    } finally {
      await app.delete();
    }
  });
});
