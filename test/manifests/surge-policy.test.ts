// The chart's optional ValidatingAdmissionPolicy (rbac.surgePodPolicy), installed with helm on the
// real API server: the chart's ServiceAccount, which RBAC lets create and delete any pod, may create
// and delete only pods labelled gitops-reloader.io/surge; evictions still go through, and nobody
// else is affected.
import { randomBytes } from 'node:crypto';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { it, statusOf } from '../support/kube.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { chartDir, helmOnCluster } from './tools.ts';

const SURGE = 'gitops-reloader.io/surge';

const pod = (name: string, labels: Record<string, string> = {}): V1Pod => ({
  metadata: { name, labels },
  spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
});

/** The API server's answer to a call: 'ok', or the HTTP status and message of the refusal. */
async function outcome(call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
    return 'ok';
  } catch (err) {
    const body = (err as { body?: unknown }).body;
    return `${statusOf(err)} ${typeof body === 'string' ? body : JSON.stringify(body)}`;
  }
}

describe('the surge-pod admission policy', () => {
  it('lets the service account create and delete only surge pods, and still evict any pod', async ({
    kube,
    namespace,
  }) => {
    const release = `gr-${randomBytes(3).toString('hex')}`;
    const fullname = `${release}-gitops-reloader`;
    try {
      await helmOnCluster([
        'install',
        release,
        chartDir,
        '--namespace',
        namespace,
        '--set',
        'rbac.surgePodPolicy=true',
      ]);
      const token = await kube.core.createNamespacedServiceAccountToken({
        name: fullname,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      const cluster = kube.kc.getCurrentCluster();
      if (!cluster) throw new Error('no cluster in the admin kubeconfig');
      const asSa = new KubeConfig();
      asSa.loadFromOptions({
        clusters: [cluster],
        users: [{ name: fullname, token: token.status?.token }],
        contexts: [{ name: 'sa', cluster: cluster.name, user: fullname }],
        currentContext: 'sa',
      });
      const sa = asSa.makeApiClient(CoreV1Api);

      // A policy takes effect a moment after it is created: wait until the plain pod is refused.
      let n = 0;
      const refused = await waitFor(
        async () => {
          const r = await outcome(() =>
            sa.createNamespacedPod({ namespace, body: pod(`plain-${n++}`, { app: 'web' }) }),
          );
          return r === 'ok' ? pending(r) : r;
        },
        { describe: 'the policy refusing a pod without the surge label', timeout: 30_000 },
      );
      expect(refused).toMatch(/^403 .*may create and delete only its surge pods/);
      // Every plain pod the wait created before the policy took effect, removed by the admin.
      for (let i = 0; i < n; i++) {
        await kube.core.deleteNamespacedPod({ namespace, name: `plain-${i}` }).catch(() => undefined);
      }

      expect(
        await outcome(() => sa.createNamespacedPod({ namespace, body: pod('surge', { [SURGE]: 'uid' }) })),
      ).toBe('ok');
      // Anyone else is unaffected: the admin creates an ordinary pod.
      await kube.core.createNamespacedPod({ namespace, body: pod('web', { app: 'web' }) });
      expect(await outcome(() => sa.deleteNamespacedPod({ namespace, name: 'web' }))).toMatch(
        /^403 .*may create and delete only its surge pods/,
      );
      // Evictions are a subresource: the restart strategy still replaces ordinary pods.
      expect(
        await outcome(() =>
          sa.createNamespacedPodEviction({
            namespace,
            name: 'web',
            body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: 'web', namespace } },
          }),
        ),
      ).toBe('ok');
      expect(await outcome(() => sa.deleteNamespacedPod({ namespace, name: 'surge' }))).toBe('ok');
    } finally {
      await helmOnCluster(['uninstall', release, '--namespace', namespace]).catch(() => undefined);
    }
  });
});
