// The reload engine against the real control plane, observed the way a user would: pods,
// generations, Events. Each test runs its own gitops-reloader process confined to its namespace.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterEach, describe, expect, inject } from 'vitest';
import { repoRoot } from '../cluster/paths.ts';
import { it, type Kube } from '../support/kube.ts';
import {
  events,
  livePods,
  PodTracker,
  waitAllReplaced,
  waitForEvent,
  waitReadyPods,
  waitRolledOut,
} from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const AUTO = { 'reloader.stakater.com/auto': 'true' };

async function setCm(kube: Kube, namespace: string, name: string, data: Record<string, string>) {
  await kube.core.replaceNamespacedConfigMap({ name, namespace, body: configMap(name, data) });
}

async function generation(kube: Kube, namespace: string, name: string) {
  const d = await kube.apps.readNamespacedDeployment({ name, namespace });
  return { generation: d.metadata?.generation, resourceVersion: d.metadata?.resourceVersion };
}

describe('reload engine', () => {
  it('reloads a Deployment exactly once when three of its ConfigMaps change within the debounce window', async ({
    kube,
    namespace,
  }) => {
    for (const n of ['env', 'files', 'keyed']) {
      await kube.core.createNamespacedConfigMap({ namespace, body: configMap(n, { k: '1', other: 'x' }) });
    }
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        annotations: AUTO,
        container: {
          envFrom: [{ configMapRef: { name: 'env' } }],
          env: [{ name: 'K', valueFrom: { configMapKeyRef: { name: 'keyed', key: 'k' } } }],
          volumeMounts: [{ name: 'files', mountPath: '/etc/files' }],
        },
        volumes: [{ name: 'files', configMap: { name: 'files' } }],
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=2s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const { generation: gen } = await generation(kube, namespace, 'web');
    const tracker = await PodTracker.start(kube, namespace, 'web');

    const changedAt = Date.now();
    await setCm(kube, namespace, 'env', { k: '2', other: 'x' });
    await setCm(kube, namespace, 'files', { k: '2', other: 'x' });
    await setCm(kube, namespace, 'keyed', { k: '2', other: 'x' });

    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    const after = await waitAllReplaced(kube, namespace, 'web', before, 2);
    await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
    );
    tracker.stop();

    // One batch held all three configs, so there was one reload.
    expect(reloaded.message).toMatch(/ConfigMap\/env.*ConfigMap\/files.*ConfigMap\/keyed/);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
    // I3: each pod was replaced once: exactly 2 replacement pods ever existed. With 2 replicas the
    // default 25% resolves to maxSurge 1, maxUnavailable 0: each old pod gave way to a surge pod that
    // was handed to the ReplicaSet once Ready (ADR 0019), so the ReplicaSet started none of its own.
    expect(tracker.newSince(before)).toHaveLength(2);
    expect(tracker.handedOver()).toHaveLength(2);
    expect(tracker.surgePods()).toHaveLength(2);
    expect(after.some((p) => p.surge)).toBe(false);
    // I1: the Deployment object was never written.
    expect((await generation(kube, namespace, 'web')).generation).toBe(gen);
    // I2: every pod is newer than the change (creationTimestamp has 1 s precision).
    for (const p of after) expect(p.createdAt).toBeGreaterThanOrEqual(Math.floor(changedAt / 1000) * 1000);
  });

  it('does not reload when a key the workload does not reference changes', async ({ kube, namespace }) => {
    await kube.core.createNamespacedConfigMap({
      namespace,
      body: configMap('app', { used: '1', unused: '1' }),
    });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { env: [{ name: 'U', valueFrom: { configMapKeyRef: { name: 'app', key: 'used' } } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    await setCm(kube, namespace, 'app', { used: '1', unused: '2' });
    await svc.waitForLog(
      'the change judged irrelevant to web',
      (l) => l.msg === 'no reload needed' && l.workload === 'Deployment/web',
    );
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(before.map((p) => p.uid));

    // The same workload does reload when the key it uses changes.
    await setCm(kube, namespace, 'app', { used: '2', unused: '2' });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitAllReplaced(kube, namespace, 'web', before, 1);
  });

  it('restarts nothing on a fresh install, and reloads at start-up what changed while it was down', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const key = await hashKeyFile();

    const first = startService(serviceArgs(namespace, key));
    await first.waitForLog(
      'baseline',
      (l) => l.msg === 'baseline recorded' && l.workload === 'Deployment/web',
    );
    await first.waitForLog('ready', (l) => l.msg === 'ready');
    expect(await first.stop()).toBe(0);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(before.map((p) => p.uid));
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);

    await setCm(kube, namespace, 'app', { k: '2' });
    const second = startService(serviceArgs(namespace, key));
    await second.waitForLog('ready', (l) => l.msg === 'ready');
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(ev.message).toMatch(/ConfigMap\/app/);
    await waitAllReplaced(kube, namespace, 'web', before, 1);
  });

  it('reports a bad annotation as an Event and keeps reloading other workloads', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const uses = { envFrom: [{ configMapRef: { name: 'app' } }] };
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('bad', {
        annotations: { ...AUTO, 'gitops-reloader.io/strategy': 'yolo' },
        container: uses,
      }),
    });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('good', { annotations: AUTO, container: uses }),
    });
    const badBefore = await waitReadyPods(kube, namespace, 'bad', 1);
    const goodBefore = await waitReadyPods(kube, namespace, 'good', 1);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    const invalid = await waitForEvent(kube, namespace, 'ReloadConfigInvalid', 'bad');
    expect(invalid.message).toMatch(/yolo/);
    expect(invalid.type).toBe('Warning');
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    await setCm(kube, namespace, 'app', { k: '2' });
    await waitForEvent(kube, namespace, 'Reloaded', 'good');
    await waitAllReplaced(kube, namespace, 'good', goodBefore, 1);
    expect((await livePods(kube, namespace, 'bad')).map((p) => p.uid)).toEqual(badBefore.map((p) => p.uid));
    expect(svc.proc.exitCode).toBeNull();
  });

  it('changes nothing in --dry-run mode, and says what it would do', async ({ kube, namespace }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const key = await hashKeyFile();
    const first = startService(serviceArgs(namespace, key));
    await first.waitForLog('ready', (l) => l.msg === 'ready');
    await first.stop();
    // The deployment controller's last status write lands after the pods are Ready; wait for it so
    // that any later change of resourceVersion is a write by the service under test.
    await waitRolledOut(kube, namespace, 'web', 2);
    const rv = await generation(kube, namespace, 'web');

    const svc = startService(serviceArgs(namespace, key, ['--dry-run', '--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await setCm(kube, namespace, 'app', { k: '2' });
    const line = await svc.waitForLog(
      'dry-run plan',
      (l) => l.msg === 'dry-run: would reload' && l.workload === 'Deployment/web',
    );
    expect(line.strategy).toBe('restart');
    expect(await generation(kube, namespace, 'web')).toEqual(rv);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid).sort()).toEqual(
      before.map((p) => p.uid).sort(),
    );
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(0);
  });

  it('plan prints which workloads would reload and how, without writing anything', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const uses = { envFrom: [{ configMapRef: { name: 'app' } }] };
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', { annotations: AUTO, container: uses }),
    });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('optout', { container: uses }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    // As above: the controller's status write must land before the resourceVersion is taken.
    await waitRolledOut(kube, namespace, 'web', 1);
    const rv = await generation(kube, namespace, 'web');

    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const p = spawn(process.execPath, [
        path.join(repoRoot, 'service', 'cli.ts'),
        'plan',
        `--kubeconfig=${inject('kubeconfig')}`,
        `--namespace=${namespace}`,
        '--configmap=app',
      ]);
      let stdout = '';
      let stderr = '';
      p.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
      });
      p.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      p.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/Deployment\/web\s.*restart/);
    expect(out.stdout).toMatch(/Deployment\/optout\s.*skip.*not opted in/);
    expect(await generation(kube, namespace, 'web')).toEqual(rv);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(before.map((p) => p.uid));
  });

  it('restarts once for each distinct gitops-reloader.io/reload-requested-at value', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'web', 1);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    const request = async (value: string) => {
      await kube.apps.patchNamespacedDeployment({
        name: 'web',
        namespace,
        body: [{ op: 'add', path: '/metadata/annotations/gitops-reloader.io~1reload-requested-at', value }],
      });
    };
    await request('2026-12-02T10:00:00Z');
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(ev.message).toMatch(/reload-requested-at/);
    const first = await waitAllReplaced(kube, namespace, 'web', before, 1);
    await svc.waitForLog('first done', (l) => l.msg === 'reload complete');

    // The same value again asks for nothing; a new value asks for one more restart.
    await kube.apps.patchNamespacedDeployment({
      name: 'web',
      namespace,
      body: [{ op: 'add', path: '/metadata/labels/touched', value: 'yes' }],
    });
    await request('2026-12-02T11:00:00Z');
    await waitFor(
      async () => {
        const n = (await events(kube, namespace, 'Reloaded', 'web')).length;
        return n === 2 ? n : pending(n);
      },
      { describe: 'a second Reloaded Event', timeout: 60_000 },
    );
    await waitAllReplaced(kube, namespace, 'web', first, 1);
  });
});
