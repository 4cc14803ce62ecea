// The service, run with the chart's own ServiceAccount token (real RBAC on the real API server,
// not cluster-admin), reloads every workload kind it supports and is never refused.
import { randomBytes } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { createArgoObject } from '../support/argo.ts';
import { it } from '../support/kube.ts';
import { events, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { killAll, startService } from '../support/service.ts';
import { kubeConfigAs, writeKubeConfig } from '../support/service-account.ts';
import { configMap, deployment, statefulSet } from '../support/workloads.ts';
import { chartDir, helmOnCluster } from './tools.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };
const USES = { envFrom: [{ configMapRef: { name: 'app' } }] };

const helm = helmOnCluster;

describe('least-privilege RBAC', () => {
  it('reloads every kind with only the permissions the chart grants', async ({ kube, namespace }) => {
    // The release lives in the test namespace; the workloads in a second one.
    const release = `gr-${randomBytes(3).toString('hex')}`;
    const fullname = `${release}-gitops-reloader`;
    const apps = (await kube.core.createNamespace({ body: { metadata: { generateName: 'lp-apps-' } } }))
      .metadata?.name as string;
    try {
      await helm(['install', release, chartDir, '--namespace', namespace]);
      const asSa = await kubeConfigAs(kube, namespace, fullname);
      const kubeconfig = await writeKubeConfig(asSa, await mkdtemp(path.join(tmpdir(), 'gr-lp-')));

      await kube.core.createNamespacedConfigMap({ namespace: apps, body: configMap('app', { k: '1' }) });
      await kube.apps.createNamespacedDeployment({
        namespace: apps,
        body: deployment('web', { annotations: AUTO, container: USES }),
      });
      await kube.apps.createNamespacedStatefulSet({
        namespace: apps,
        body: statefulSet('db', 2, { annotations: AUTO, container: USES }),
      });
      await kube.apps.createNamespacedDaemonSet({
        namespace: apps,
        body: {
          metadata: { name: 'agent', annotations: AUTO },
          spec: {
            selector: { matchLabels: { app: 'agent' } },
            template: {
              metadata: { labels: { app: 'agent' } },
              spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1', ...USES }] },
            },
          },
        },
      });
      await createArgoObject(kube.custom, {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Rollout',
        metadata: { name: 'canary', namespace: apps, annotations: AUTO },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'canary' } },
          template: {
            metadata: { labels: { app: 'canary' } },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1', ...USES }] },
          },
          strategy: { canary: {} },
        },
      });
      await kube.custom.createNamespacedCustomObject({
        group: 'batch',
        version: 'v1',
        namespace: apps,
        plural: 'cronjobs',
        body: {
          apiVersion: 'batch/v1',
          kind: 'CronJob',
          metadata: { name: 'nightly', annotations: AUTO },
          spec: {
            schedule: '0 3 * * *',
            jobTemplate: {
              spec: {
                template: {
                  spec: {
                    restartPolicy: 'Never',
                    containers: [{ name: 'app', image: 'registry.invalid/app:1', ...USES }],
                  },
                },
              },
            },
          },
        },
      });
      // A Job reload deletes and creates the Job: the chart must allow both, and nothing more.
      await kube.custom.createNamespacedCustomObject({
        group: 'batch',
        version: 'v1',
        namespace: apps,
        plural: 'jobs',
        body: {
          apiVersion: 'batch/v1',
          kind: 'Job',
          metadata: { name: 'migrate', annotations: AUTO },
          spec: {
            template: {
              spec: {
                restartPolicy: 'Never',
                containers: [{ name: 'app', image: 'registry.invalid/app:1', ...USES }],
              },
            },
          },
        },
      });
      await waitReadyPods(kube, apps, 'web', 1);
      await waitReadyPods(kube, apps, 'db', 2);
      await waitReadyPods(kube, apps, 'agent', 3);

      const svc = startService([
        'serve',
        `--kubeconfig=${kubeconfig}`,
        `--namespaces=${apps}`,
        `--release-namespace=${namespace}`,
        `--release-name=${fullname}`,
        // As the chart runs it: the service creates its hash-key Secret, with the chart's RBAC.
        '--create-hash-key=true',
        '--http-address=127.0.0.1:0',
        '--debounce=0s',
        '--min-reload-interval=0s',
        '--argocd-namespaces=',
        '--log-level=debug',
      ]);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: apps,
        body: configMap('app', { k: '2' }),
      });

      for (const name of ['web', 'db', 'agent', 'canary', 'nightly', 'migrate'])
        await waitForEvent(kube, apps, 'Reloaded', name, 90_000);
      await svc.waitForLog(
        'all six done',
        () => svc.logs.filter((l) => l.msg === 'reload complete').length >= 6,
        90_000,
      );

      const refused = [...svc.logs.map((l) => JSON.stringify(l)), ...svc.text].filter((l) =>
        /forbidden|\b403\b/i.test(l),
      );
      expect(refused).toEqual([]);
      const http = svc.logs.find((l) => l.msg === 'http listening');
      const metrics = await (await fetch(`${String(http?.url)}/metrics`)).text();
      expect(metrics).toMatch(/^reloader_reload_executed_total\{success="true"\} 6$/m);
      expect(await events(kube, apps, 'ReloadFailed')).toHaveLength(0);
    } finally {
      await helm(['uninstall', release, '--namespace', namespace]).catch(() => undefined);
      await kube.core.deleteNamespace({ name: apps });
    }
  });
});
