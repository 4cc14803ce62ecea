// One change that concerns many workloads in several namespaces (a shared CA bundle): the reloads run
// at once, not a few at a time behind the concurrency cap, and what paces them is the write rate limit
// (--api-write-qps, --api-write-burst), which the service's writes never exceed (docs/adr/0018).
// Counted on the wire by a loopback proxy; no timing is asserted, only order, overlap and counts.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect } from 'vitest';
import { ApiProxy } from '../support/api-proxy.ts';
import { it, type Kube } from '../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const NAMESPACES = 5;
const PER_NAMESPACE = 2;
const QPS = 3;
const BURST = 3;

/** A ServiceAccount in `home` with the service's rights in `namespaces` only, reached through `proxy`. */
async function kubeconfigThrough(kube: Kube, home: string, namespaces: string[], proxy: ApiProxy) {
  const name = 'gitops-reloader';
  await kube.core.createNamespacedServiceAccount({ namespace: home, body: { metadata: { name } } });
  for (const namespace of namespaces) {
    await kube.rbac.createNamespacedRole({
      namespace,
      body: {
        metadata: { name },
        rules: [
          {
            apiGroups: ['', 'apps', 'batch', 'policy', 'coordination.k8s.io'],
            resources: ['*'],
            verbs: ['*'],
          },
          { apiGroups: ['argoproj.io'], resources: ['rollouts', 'rollouts/status'], verbs: ['*'] },
        ],
      },
    });
    await kube.rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: [{ kind: 'ServiceAccount', name, namespace: home }],
      },
    });
  }
  const token = await kube.core.createNamespacedServiceAccountToken({
    name,
    namespace: home,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const file = path.join(await mkdtemp(path.join(tmpdir(), 'gr-bulk-')), 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'proxy', cluster: { server: proxy.url, 'certificate-authority-data': await proxy.caData() } },
    ],
    users: [{ name, user: { token: token.status?.token } }],
    contexts: [{ name: 'proxy', context: { cluster: 'proxy', user: name } }],
    'current-context': 'proxy',
  };
  await writeFile(file, JSON.stringify(config), { mode: 0o600 });
  return file;
}

describe('bulk reloads', () => {
  it('runs the reloads of many namespaces at once, paced only by the write rate limit, which holds', async ({
    kube,
    namespace,
  }) => {
    const made: string[] = [];
    const proxy = await ApiProxy.start(kube.kc);
    try {
      for (let i = 0; i < NAMESPACES; i++) {
        const ns = await kube.core.createNamespace({ body: { metadata: { generateName: 'bulk-' } } });
        made.push(ns.metadata?.name as string);
      }
      const apps = made.flatMap((ns) =>
        Array.from({ length: PER_NAMESPACE }, (_, i) => ({ ns, name: `web-${i}` })),
      );
      for (const a of apps) {
        await kube.core.createNamespacedConfigMap({ namespace: a.ns, body: configMap(a.name, { k: '1' }) });
        await kube.apps.createNamespacedDeployment({
          namespace: a.ns,
          body: deployment(a.name, {
            annotations: { 'reloader.stakater.com/auto': 'true' },
            container: { envFrom: [{ configMapRef: { name: a.name } }] },
          }),
        });
      }
      for (const a of apps) await waitReadyPods(kube, a.ns, a.name, 1);
      const kubeconfig = await kubeconfigThrough(kube, namespace, [namespace, ...made], proxy);
      // The default concurrency cap; a low write rate, so that it is what paces the reloads.
      const args = serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        '--leader-elect=false',
        `--api-write-qps=${QPS}`,
        `--api-write-burst=${BURST}`,
      ]).map((a) =>
        a.startsWith('--kubeconfig=')
          ? `--kubeconfig=${kubeconfig}`
          : a.startsWith('--namespaces=')
            ? `--namespaces=${[namespace, ...made].join(',')}`
            : a,
      );
      const svc = startService(args);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      const url = String((await svc.waitForLog('http', (l) => l.msg === 'http listening')).url);

      const from = proxy.requests.length;
      await Promise.all(
        apps.map((a) =>
          kube.core.replaceNamespacedConfigMap({
            name: a.name,
            namespace: a.ns,
            body: configMap(a.name, { k: '2' }),
          }),
        ),
      );
      await waitFor(
        () => {
          const n = svc.logs.filter((l) => l.msg === 'reload complete').length;
          return n === apps.length ? n : pending(n);
        },
        { describe: `${apps.length} reloads complete`, timeout: 180_000 },
      );
      for (const a of apps) await waitForEvent(kube, a.ns, 'Reloaded', a.name);

      // Overlap: replaying the log, more reloads ran at once than the old cap (5) allowed, and every
      // namespace had one started before the first one finished.
      let running = 0;
      let peak = 0;
      const startedEarly = new Set<string>();
      let anyDone = false;
      for (const l of svc.logs) {
        if (l.msg === 'reload started') {
          running++;
          peak = Math.max(peak, running);
          if (!anyDone) startedEarly.add(String(l.namespace));
        } else if (l.msg === 'reload complete') {
          running--;
          anyDone = true;
        }
      }
      expect(peak).toBeGreaterThan(5);
      expect([...startedEarly].sort()).toEqual([...made].sort());

      // The rate: the reloads' writes (every method but GET, Lease renewals aside) as the API server
      // got them. In any span, at most the burst plus the rate × the span went out (+1 for the hop's
      // jitter at the span's edges).
      const writes = proxy.requests
        .slice(from)
        .filter((q) => q.method !== 'GET' && !q.path.includes('/leases'))
        .map((q) => q.sentAt)
        .sort((a, b) => a - b);
      // Per reload at least: the pending and done ledger writes, a surge pod, an eviction, the Event.
      expect(writes.length).toBeGreaterThanOrEqual(apps.length * 5);
      for (const span of [1000, 3000]) {
        for (const start of writes) {
          const inSpan = writes.filter((t) => t >= start && t < start + span).length;
          expect(inSpan, `writes in the ${span} ms from ${start}`).toBeLessThanOrEqual(
            BURST + (QPS * span) / 1000 + 1,
          );
        }
      }
      // And the service says it throttled them: writes waited for their turn.
      const text = await (await fetch(`${url}/metrics`)).text();
      const value = (name: string) => Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);
      expect(value('gitops_reloader_api_write_wait_seconds_count')).toBeGreaterThanOrEqual(writes.length);
      expect(value('gitops_reloader_api_write_wait_seconds_sum')).toBeGreaterThan(0);
      expect(value('gitops_reloader_api_writes_waiting')).toBe(0);
    } finally {
      await proxy.close();
      for (const ns of made) await kube.core.deleteNamespace({ name: ns });
    }
  });
});
