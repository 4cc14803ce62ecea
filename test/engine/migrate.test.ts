// `gitops-reloader migrate --deployment` reads a running Reloader Deployment's args and env through
// the real API server (the pod need not run Reloader: only its spec is read).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, inject } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../cluster/paths.ts';
import { it } from '../support/kube.ts';
import { deployment } from '../support/workloads.ts';

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [path.join(repoRoot, 'service', 'cli.ts'), ...args], (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('migrate --deployment', () => {
  it('prints our values for a live Reloader Deployment, and exits 3 on what cannot be carried over', async ({
    kube,
    namespace,
  }) => {
    const body = deployment('reloader', { container: {} });
    const c = body.spec?.template.spec?.containers[0];
    if (!c) throw new Error('no container');
    c.args = [
      '--namespaces-to-ignore=kube-system',
      '--resource-label-selector=reloader:enabled',
      '--reload-strategy=annotations',
      '--webhook-url',
      'http://127.0.0.1:9/hook',
    ];
    c.env = [
      { name: 'KUBERNETES_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'ALERT_ON_RELOAD', value: 'true' },
    ];
    await kube.apps.createNamespacedDeployment({ namespace, body });
    const r = await cli([
      'migrate',
      `--deployment=${namespace}/reloader`,
      `--kubeconfig=${inject('kubeconfig')}`,
    ]);
    expect(r.code, r.stderr).toBe(3);
    const values = parse(r.stdout) as Record<string, unknown>;
    expect(values).toMatchObject({
      reload: {
        namespaces: [namespace],
        ignoreNamespaces: ['kube-system'],
        resourceLabelSelector: 'reloader=enabled',
        defaultStrategy: 'restart',
      },
      reloadWebhook: { url: 'http://127.0.0.1:9/hook' },
    });
    expect(r.stdout).toMatch(
      new RegExp(`translated from Stakater Reloader \\(Deployment ${namespace}/reloader\\)`),
    );
    expect(r.stdout).toMatch(/NOT CARRIED OVER[\s\S]*ALERT_ON_RELOAD/);
    expect(r.stderr).toMatch(/1 setting\(s\) could not be carried over/);

    const missing = await cli([
      'migrate',
      `--deployment=${namespace}/nope`,
      `--kubeconfig=${inject('kubeconfig')}`,
    ]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(new RegExp(`Deployment ${namespace}/nope not found`));
  });
});
