// `gitops-reloader resume`: continues a change that a progressive reload halted
// (docs/progressive-reloads.md, "A halt"). It sets the config's gitops-reloader.io/progressive-resume
// annotation to a new value with the caller's own credentials, so only who may edit the config can
// resume its change, exactly as by hand: the service acts on the annotation, the CLI holds no right of it.

import { FlagError, type FlagSpec, parseFlags, usage } from './config/flags.ts';
import { KEYS } from './core/annotations.ts';
import { loadClusterAccess } from './kube/access.ts';
import { KubeHttpError, requestJson } from './kube/watch-http.ts';

export const resumeFlags: readonly FlagSpec[] = [
  {
    name: 'kubeconfig',
    type: 'string',
    help: 'Path to a kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config).',
  },
  { name: 'timeout', type: 'duration', default: '10s', min: 1, help: 'How long to wait for the API server.' },
];

export const RESUME_USAGE = `Usage: gitops-reloader resume (configmap|secret)/NAMESPACE/NAME [--kubeconfig PATH]

Continues the change of one ConfigMap or Secret that a progressive reload halted: sets its
${KEYS.progressiveResume} annotation to a new value, with your own credentials (you need the
right to patch that config). The service then starts the halted change again from the workload that
failed it; \`gitops-reloader status\` shows the halt and, after this, the reloads.

  gitops-reloader resume configmap/shop/feature-flags

${usage(resumeFlags)}
`;

const KINDS = { configmap: 'configmaps', secret: 'secrets' } as const;
/** A Kubernetes object name (RFC 1123 subdomain) and a namespace (RFC 1123 label). */
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The config a `resume` argument names, parsed once: its API path and how to say it. */
export function resumeTarget(arg: string): { path: string; label: string } {
  const [kind = '', namespace = '', name = '', ...rest] = arg.split('/');
  const plural = KINDS[kind.toLowerCase() as keyof typeof KINDS];
  if (!plural || rest.length > 0 || !NAMESPACE.test(namespace) || !NAME.test(name))
    throw new FlagError(
      `invalid config ${JSON.stringify(arg)}: expected configmap/NAMESPACE/NAME or secret/NAMESPACE/NAME`,
    );
  return {
    path: `/api/v1/namespaces/${namespace}/${plural}/${name}`,
    label: `${plural === 'configmaps' ? 'ConfigMap' : 'Secret'} ${namespace}/${name}`,
  };
}

export async function resume(
  argv: string[],
  env: NodeJS.ProcessEnv,
  out: (s: string) => void,
  err: (s: string) => void,
  now: () => Date = () => new Date(),
): Promise<number> {
  const { values: v, positionals } = parseFlags(resumeFlags, argv, env);
  if (positionals.length !== 1)
    throw new FlagError(`resume takes one config, configmap/NAMESPACE/NAME or secret/NAMESPACE/NAME`);
  const target = resumeTarget(positionals[0] as string);
  const kc = await loadClusterAccess(v.kubeconfig as string | undefined);
  // A new value each time: the service resumes on any change of it.
  const value = now().toISOString();
  try {
    await requestJson(
      kc,
      'PATCH',
      target.path,
      { metadata: { annotations: { [KEYS.progressiveResume]: value } } },
      AbortSignal.timeout(v.timeout as number),
      v.timeout as number,
    );
  } catch (e) {
    const why =
      e instanceof KubeHttpError && e.status === 404
        ? 'it does not exist'
        : e instanceof KubeHttpError && e.status === 403
          ? 'your credentials may not patch it'
          : (e as Error).message;
    err(`gitops-reloader resume: could not set ${KEYS.progressiveResume} on ${target.label}: ${why}\n`);
    return 1;
  }
  out(`${target.label}: ${KEYS.progressiveResume}=${value}; its halted change, if any, continues\n`);
  return 0;
}
