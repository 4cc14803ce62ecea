// `gitops-reloader migrate`: reads a Stakater Reloader installation (a Helm values file, or a running
// Deployment through the API) and prints gitops-reloader chart values for it. Each value that
// behaves differently from Reloader carries a comment saying how; anything that cannot be carried
// over is listed at the end, and the command then exits 3.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { allServeFlags } from '../config/config.ts';
import { FlagError, type FlagSpec, parseFlags } from '../config/flags.ts';
import { type ClusterAccess, loadClusterAccess } from '../kube/access.ts';
import { getJson, KubeHttpError } from '../kube/watch-http.ts';
import { fromDeployment, fromValues, type ReloaderInstall } from './reloader-install.ts';
import { render, translate } from './translate.ts';

/** Exit status when something could not be carried over. */
export const NOT_CARRIED_EXIT = 3;

export const migrateFlags: readonly FlagSpec[] = [
  { name: 'values', type: 'string', help: "A Reloader Helm values file ('-' for stdin)." },
  {
    name: 'deployment',
    type: 'string',
    help: 'A running Reloader Deployment, as NAMESPACE/NAME: its container args and env are read through the API.',
  },
  {
    name: 'namespace',
    type: 'string',
    help: 'With --values: the namespace Reloader is installed in (needed when it watches only its own, watchGlobally: false).',
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
  const dep = values.deployment as string | undefined;
  if ((file === undefined) === (dep === undefined)) {
    throw new FlagError('migrate needs exactly one of --values FILE or --deployment NAMESPACE/NAME');
  }
  let install: ReloaderInstall;
  const unknown: string[] = [];
  if (file !== undefined) {
    let text: string;
    try {
      text = file === '-' ? readStdin() : readFileSync(file, 'utf8');
    } catch (e) {
      throw new FlagError(
        `cannot read --values ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    let doc: unknown;
    try {
      doc = parse(text);
    } catch (e) {
      throw new FlagError(`--values ${file} is not YAML: ${(e as Error).message.split('\n')[0]}`);
    }
    const r = fromValues(doc ?? {}, `values ${file}`, values.namespace as string | undefined);
    install = r.install;
    unknown.push(...r.unknown);
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
  t.notCarried.push(...unknown.map((k) => `${k}: not a Reloader chart value that migrate knows`));
  out(render(t, install.source));
  if (t.notCarried.length > 0) {
    err(
      `gitops-reloader migrate: ${t.notCarried.length} setting(s) could not be carried over (listed at the end of the output)\n`,
    );
    return NOT_CARRIED_EXIT;
  }
  return 0;
}
