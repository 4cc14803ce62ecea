import { describe, expect, it } from 'vitest';
import { checkSpokeName } from './spoke.ts';
import { clusterConfig, clusterSecret, managerObjects } from './spoke-registration.ts';

const caPem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

describe('the cluster Secret of a spoke', () => {
  it('is labelled as an Argo CD cluster and names the spoke and its server', () => {
    const s = clusterSecret({ name: 'b', server: 'https://127.0.0.1:4443', bearerToken: 't0k', caPem }) as {
      metadata: { name: string; namespace: string; labels: Record<string, string> };
      stringData: Record<string, string>;
    };
    expect(s.metadata.labels['argocd.argoproj.io/secret-type']).toBe('cluster');
    expect(s.metadata.namespace).toBe('argocd');
    expect(s.metadata.name).toBe('cluster-spoke-b');
    expect(s.stringData.name).toBe('b');
    expect(s.stringData.server).toBe('https://127.0.0.1:4443');
    expect(JSON.parse(s.stringData.config ?? '')).toEqual(JSON.parse(clusterConfig('t0k', caPem)));
  });

  it('carries the bearer token and the CA as base64 of the PEM, verified (not insecure)', () => {
    const c = JSON.parse(clusterConfig('t0k', caPem));
    expect(c.bearerToken).toBe('t0k');
    expect(c.tlsClientConfig.insecure).toBe(false);
    expect(Buffer.from(c.tlsClientConfig.caData, 'base64').toString('utf8')).toBe(caPem);
    expect(Object.keys(c).sort()).toEqual(['bearerToken', 'tlsClientConfig']);
  });
});

describe('the objects argocd cluster add would make in a spoke', () => {
  it('bind argocd-manager to cluster-admin and ask for its long-lived token', () => {
    const [sa, binding, token] = managerObjects() as Array<{ roleRef?: unknown; subjects?: unknown }>;
    expect(sa).toMatchObject({
      kind: 'ServiceAccount',
      metadata: { name: 'argocd-manager', namespace: 'kube-system' },
    });
    expect(binding?.roleRef).toMatchObject({ kind: 'ClusterRole', name: 'cluster-admin' });
    expect(binding?.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'argocd-manager', namespace: 'kube-system' },
    ]);
    expect(token).toMatchObject({
      type: 'kubernetes.io/service-account-token',
      metadata: {
        name: 'argocd-manager-long-lived-token',
        namespace: 'kube-system',
        annotations: { 'kubernetes.io/service-account.name': 'argocd-manager' },
      },
    });
  });
});

describe('spoke names', () => {
  it('are short DNS labels, since they prefix Secret, process and log names', () => {
    expect(checkSpokeName('spoke-b')).toBe('spoke-b');
    for (const bad of ['', 'B', '-b', 'b-', 'a/b', 'x'.repeat(31)])
      expect(() => checkSpokeName(bad)).toThrow();
  });
});
