// The chart's optional ValidatingAdmissionPolicy (rbac.surgePodPolicy), installed with helm on the
// real API server: the chart's ServiceAccount, which RBAC lets create and delete any pod, may create
// and delete only pods labelled gitops-reloader.io/surge; evictions still go through, and nobody
// else is affected.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { kubeconfigAccess } from '../../service/kube/access.ts';
import { requestJson } from '../../service/kube/watch-http.ts';
import { it, statusOf } from '../support/kube.ts';
import { kubeConfigAs, writeKubeConfig } from '../support/service-account.ts';
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
    const tmpDir = await mkdtemp(path.join(tmpdir(), 'gr-sa-'));
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
      const asSa = await kubeConfigAs(kube, namespace, fullname);
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
      // Patches (docs/adr/0019): an old pod may get the lowest pod-deletion-cost and nothing else; a
      // surge pod may be handed to its ReplicaSet (labels and owner references) and nothing else.
      await kube.core.createNamespacedPod({ namespace, body: pod('old', { app: 'web' }) });
      // Sent by the service's own request code (a JSON merge patch), with the service account's token.
      const saAccess = await kubeconfigAccess(await writeKubeConfig(asSa, tmpDir));
      const patch = (name: string, metadata: Record<string, unknown>) =>
        outcome(() =>
          requestJson(
            saAccess,
            'PATCH',
            `/api/v1/namespaces/${namespace}/pods/${name}`,
            { metadata },
            AbortSignal.timeout(30_000),
            30_000,
          ),
        );
      const COST = 'controller.kubernetes.io/pod-deletion-cost';
      expect(await patch('old', { annotations: { [COST]: '-2147483648' } })).toBe('ok');
      expect(await patch('old', { annotations: { 'example.com/other': 'x' } })).toMatch(
        /^403 .*patch a pod only to hand a surge pod/,
      );
      expect(await patch('old', { labels: { app: 'other' } })).toMatch(/^403 /);
      expect(await patch('surge', { annotations: { [COST]: '1' } })).toMatch(/^403 /);
      expect(
        await patch('surge', {
          labels: { 'pod-template-hash': 'abc', [SURGE]: null },
          ownerReferences: null,
        }),
      ).toBe('ok');
      // Handed over, it is an ordinary pod now: the service account may no longer delete it.
      expect(await outcome(() => sa.deleteNamespacedPod({ namespace, name: 'surge' }))).toMatch(/^403 /);
      await kube.core.deleteNamespacedPod({ namespace, name: 'surge' });
    } finally {
      await helmOnCluster(['uninstall', release, '--namespace', namespace]).catch(() => undefined);
      await rm(tmpDir, { recursive: true, force: true });
    }
  });
});
