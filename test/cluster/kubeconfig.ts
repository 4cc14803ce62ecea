// Renders a kubeconfig with the credentials embedded, so the file alone is enough to connect.
import { stringify } from 'yaml';

export interface KubeconfigInput {
  server: string;
  caPem: string;
  certPem: string;
  keyPem: string;
  user: string;
  cluster?: string;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

export function renderKubeconfig(input: KubeconfigInput): string {
  const cluster = input.cluster ?? 'gitops-reloader-test';
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: cluster, cluster: { server: input.server, 'certificate-authority-data': b64(input.caPem) } },
    ],
    users: [
      {
        name: input.user,
        user: { 'client-certificate-data': b64(input.certPem), 'client-key-data': b64(input.keyPem) },
      },
    ],
    contexts: [{ name: cluster, context: { cluster, user: input.user } }],
    'current-context': cluster,
  });
}
