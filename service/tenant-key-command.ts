// `gitops-reloader tenant-key`: prints a namespace's own key, for the platform team to give to that
// namespace's team, whose CI then runs `gitops-reloader checksum --namespace-key-file` without the
// service key (ADR 0022). Run by whoever holds the service key; nothing else can make one. With
// --secret it prints a Secret manifest to apply into the namespace, stamped with the service key's
// fingerprint so that a stale key is visible after a rotation.

import { FlagError, type FlagSpec, parseFlags, usage } from './config/flags.ts';
import { readKeyFile } from './config/hash-key.ts';
import { clusterKey, keyFingerprint } from './core/config-hash.ts';
import { canonicalServerURL } from './core/repo-url.ts';
import { checkNamespaceName, formatTenantKey } from './core/tenant-key.ts';

export const tenantKeyFlags: readonly FlagSpec[] = [
  {
    name: 'namespace',
    type: 'list',
    help: 'The namespace(s) to print a key for (required; comma list or repeated).',
  },
  {
    name: 'key-file',
    type: 'string',
    help: 'The service key (the file serve --hash-key-file reads). Falls back to GITOPS_RELOADER_HASH_KEY_FILE.',
  },
  {
    name: 'secret',
    type: 'string',
    help: 'Print a Secret of this name in each namespace (data key `key`) instead of bare key lines.',
  },
  {
    name: 'cluster-server',
    type: 'string',
    help: 'Hub mode: the server of the served cluster the namespace is in (as in its Argo CD cluster Secret); each served cluster has a key of its own.',
  },
];

/** The annotation on a --secret: the fingerprint of the service key the namespace key was derived from. */
export const SERVICE_KEY_ANNOTATION = 'gitops-reloader.io/service-key-fingerprint';

export const TENANT_KEY_USAGE = `Usage: gitops-reloader tenant-key --namespace NS[,NS…] [--key-file F] [--secret NAME] [--cluster-server URL]

Prints the key of each namespace: one line a team's CI passes to
gitops-reloader checksum --namespace-key-file. It computes that namespace's checksums and no other
namespace's, and it does not reveal the service key. Keep it secret, like the service key.

${usage(tenantKeyFlags)}
`;

/** Runs the command; resolves to the exit code (0 ok, 1 failed, 2 usage). */
export function tenantKey(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: (text: string) => void,
  err: (text: string) => void,
): number {
  let values: ReturnType<typeof parseFlags>['values'];
  try {
    ({ values } = parseFlags(tenantKeyFlags, argv, env));
    const namespaces = (values.namespace as string[] | undefined) ?? [];
    if (namespaces.length === 0) throw new FlagError('--namespace is required');
    for (const ns of namespaces) {
      const bad = checkNamespaceName(ns);
      if (bad) throw new FlagError(`invalid value for --namespace: ${bad}`);
    }
    const secret = values.secret as string | undefined;
    if (secret !== undefined && checkNamespaceName(secret)) {
      throw new FlagError(`invalid value ${JSON.stringify(secret)} for --secret: not a Secret name`);
    }
    const server = values['cluster-server'] as string | undefined;
    if (server !== undefined && canonicalServerURL(server) === undefined) {
      throw new FlagError(
        `invalid value ${JSON.stringify(server)} for --cluster-server: not an http(s) server URL`,
      );
    }
  } catch (e) {
    if (!(e instanceof FlagError)) throw e;
    err(`gitops-reloader tenant-key: ${e.message}\n\n${TENANT_KEY_USAGE}`);
    return 2;
  }
  const keyFile = (values['key-file'] as string | undefined) ?? env.GITOPS_RELOADER_HASH_KEY_FILE;
  if (!keyFile) {
    err('gitops-reloader tenant-key: --key-file is required (the service key)\n');
    return 2;
  }
  try {
    const serviceKey = readKeyFile(keyFile, '--key-file');
    const server = values['cluster-server'] as string | undefined;
    // Hub mode: the served cluster's own key (the engine of that cluster uses it).
    const key =
      server === undefined ? serviceKey : clusterKey(serviceKey, canonicalServerURL(server) as string);
    const secret = values.secret as string | undefined;
    const docs = (values.namespace as string[]).map((ns) => {
      const line = formatTenantKey(key, ns);
      if (secret === undefined) return `${line}\n`;
      return `apiVersion: v1
kind: Secret
metadata:
  name: ${secret}
  namespace: ${ns}
  annotations:
    ${SERVICE_KEY_ANNOTATION}: ${keyFingerprint(key)}
type: Opaque
stringData:
  key: ${line}
`;
    });
    out(secret === undefined ? docs.join('') : docs.join('---\n'));
    return 0;
  } catch (e) {
    err(`gitops-reloader tenant-key: ${(e as Error).message}\n`);
    return 1;
  }
}
