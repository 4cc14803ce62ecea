// `gitops-reloader migrate`: reads a Stakater Reloader installation (a Helm values file, or a running
// Deployment through the API) and prints gitops-reloader chart values for it. Each value that
// behaves differently from Reloader carries a comment saying how; anything that cannot be carried
// over is listed at the end, and the command then exits 3.
import { readFileSync } from 'node:fs';
import { parse, parseAllDocuments } from 'yaml';
import { allServeFlags } from '../config/config.ts';
import { FlagError, type FlagSpec, parseFlags } from '../config/flags.ts';
import { type ClusterAccess, loadClusterAccess } from '../kube/access.ts';
import { getJson, KubeHttpError } from '../kube/watch-http.ts';
import { fromDeployment, fromManifests, fromValues, type ReloaderInstall } from './reloader-install.ts';
import { render, translate } from './translate.ts';

/** Exit status when something could not be carried over. */
export const NOT_CARRIED_EXIT = 3;

export const migrateFlags: readonly FlagSpec[] = [
  {
    name: 'values',
    type: 'string',
    help: "A Reloader Helm values file ('-' for stdin), read as Reloader's chart 2.2.16 renders it.",
  },
  {
    name: 'manifests',
    type: 'string',
    help: "Reloader's rendered manifests ('-' for stdin): `helm template` output of its chart, or `kubectl get deploy -o yaml`.",
  },
  {
    name: 'deployment',
    type: 'string',
    help: 'A running Reloader Deployment, as NAMESPACE/NAME: its container args and env are read through the API.',
  },
  {
    name: 'namespace',
    type: 'string',
    help: 'With --values or --manifests: the namespace Reloader is installed in (with --values, needed when it watches only its own or a list of namespaces).',
  },
  { name: 'kubeconfig', type: 'string', help: 'With --deployment: path to a kubeconfig.' },
];

export async function migrate(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: (s: string) => void,
  err: (s: string) => void,
  readStdin: () => string = () => readFileSync(0, 'utf8'),
  access: (kubeconfig?: string) => Promise<ClusterAccess> = loadClusterAccess,
): Promise<number> {
  const { values } = parseFlags(migrateFlags, argv, env);
  const file = values.values as string | undefined;
  const manifests = values.manifests as string | undefined;
  const dep = values.deployment as string | undefined;
  if ([file, manifests, dep].filter((x) => x !== undefined).length !== 1) {
    throw new FlagError(
      'migrate needs exactly one of --values FILE, --manifests FILE or --deployment NAMESPACE/NAME',
    );
  }
  const ns = values.namespace as string | undefined;
  const read = (flag: string, f: string) => {
    try {
      return f === '-' ? readStdin() : readFileSync(f, 'utf8');
    } catch (e) {
      throw new FlagError(
        `cannot read --${flag} ${f}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
  };
  let install: ReloaderInstall;
  if (file !== undefined) {
    let doc: unknown;
    try {
      doc = parse(read('values', file));
    } catch (e) {
      if (e instanceof FlagError) throw e;
      throw new FlagError(`--values ${file} is not YAML: ${(e as Error).message.split('\n')[0]}`);
    }
    install = fromValues(doc ?? {}, `values ${file}`, ns);
  } else if (manifests !== undefined) {
    const docs = parseAllDocuments(read('manifests', manifests));
    const bad = docs.find((d) => d.errors.length > 0);
    if (bad)
      throw new FlagError(`--manifests ${manifests} is not YAML: ${bad.errors[0]?.message.split('\n')[0]}`);
    try {
      install = fromManifests(
        docs.map((d) => d.toJS() as unknown),
        `manifests ${manifests}`,
        ns,
      );
    } catch (e) {
      throw new FlagError(`--manifests ${manifests}: ${(e as Error).message}`);
    }
  } else {
    const m = /^([a-z0-9-]+)\/([a-z0-9.-]+)$/.exec(dep as string);
    if (!m)
      throw new FlagError(`invalid value ${JSON.stringify(dep)} for --deployment: expected NAMESPACE/NAME`);
    const kc = await access(values.kubeconfig as string | undefined);
    let obj: unknown;
    try {
      obj = await getJson(
        kc,
        `/apis/apps/v1/namespaces/${m[1]}/deployments/${m[2]}`,
        new AbortController().signal,
        30_000,
      );
    } catch (e) {
      if (e instanceof KubeHttpError && e.status === 404) throw new FlagError(`Deployment ${dep} not found`);
      throw e;
    }
    install = fromDeployment(obj);
  }
  const t = translate(install, { serveFlags: new Set(allServeFlags.map((f) => f.name)) });
  out(render(t, install.source));
  if (t.notCarried.length > 0) {
    err(
      `gitops-reloader migrate: ${t.notCarried.length} setting(s) could not be carried over (listed at the end of the output)\n`,
    );
    return NOT_CARRIED_EXIT;
  }
  return 0;
}
