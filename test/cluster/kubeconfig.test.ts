import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { renderKubeconfig } from './kubeconfig.ts';

describe('renderKubeconfig', () => {
  it('writes a kubeconfig that client-node loads with the embedded credentials', () => {
    const text = renderKubeconfig({
      server: 'https://127.0.0.1:6443',
      caPem: 'CA-PEM',
      certPem: 'CERT-PEM',
      keyPem: 'KEY-PEM',
      user: 'admin',
    });
    const kc = new KubeConfig();
    kc.loadFromString(text);
    expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
    expect(Buffer.from(kc.getCurrentCluster()?.caData ?? '', 'base64').toString()).toBe('CA-PEM');
    expect(Buffer.from(kc.getCurrentUser()?.certData ?? '', 'base64').toString()).toBe('CERT-PEM');
    expect(Buffer.from(kc.getCurrentUser()?.keyData ?? '', 'base64').toString()).toBe('KEY-PEM');
    expect(kc.getCurrentUser()?.name).toBe('admin');
  });
});
