// `gitops-reloader checksum [DIR|-]`: writes the config-hash annotation into every workload whose
// ConfigMaps or Secrets are in the same directory or stream, for CI, pre-commit and the Argo CD
// config-management plugin. Everything else in the input is left byte for byte as it was.
import { readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FlagError, type FlagSpec, parseFlags, usage } from '../service/config/flags.ts';
import { readKeyFile } from '../service/config/hash-key.ts';
import { KEYS } from '../service/core/annotations.ts';
import { parseTenantKey, type TenantKey, tenantKeys } from '../service/core/tenant-key.ts';
import { injectChecksums, isKubernetesObject, type ManifestSource } from './checksums.ts';
import { listYamlFiles } from './locate.ts';
import { parseStream } from './manifest-edit.ts';

export const checksumFlags: readonly FlagSpec[] = [
  {
    name: 'key-file',
    type: 'string',
    help: 'File holding the HMAC key (≥32 bytes): the same key as serve --hash-key-file, so the values match. Falls back to GITOPS_RELOADER_HASH_KEY_FILE.',
  },
  {
    name: 'namespace-key-file',
    type: 'string',
    help: "Instead of --key-file: a namespace's own key (one line from gitops-reloader tenant-key, given to the namespace's team by the platform team). It computes that namespace's values only: --namespace defaults to it and --confine is on. Falls back to GITOPS_RELOADER_NAMESPACE_KEY_FILE.",
  },
  { name: 'in-place', type: 'bool', help: 'Rewrite the files of DIR instead of printing.', default: 'false' },
  {
    name: 'check',
    type: 'bool',
    help: 'Write nothing; exit 1 if an annotation is missing or stale.',
    default: 'false',
  },
  { name: 'annotation', type: 'string', help: 'The annotation key.', default: KEYS.configHash },
  {
    name: 'namespace',
    type: 'string',
    help: 'Namespace of objects that name none (in the Argo CD plugin: $ARGOCD_APP_NAMESPACE). Default: none, which matches the live value only for objects that name theirs.',
  },
  {
    name: 'confine',
    type: 'bool',
    help: 'Refuse (exit 1, print nothing) when a ConfigMap, Secret or workload names a namespace other than --namespace. The Argo CD plugin sets it, so a tenant cannot have it compute values for another namespace.',
    default: 'false',
  },
];

export const CHECKSUM_USAGE = `Usage: gitops-reloader checksum [DIR|-] [--in-place] [--check] (--key-file F | --namespace-key-file F) [--annotation K] [--namespace NS [--confine]]

Reads the YAML files under DIR (default .) or a multi-document stream on stdin (-). For every
Deployment, StatefulSet, DaemonSet, CronJob or Rollout whose ConfigMaps/Secrets are in the same
input, sets the annotation on its pod template to a keyed hash of what it uses of them.
Without --in-place or --check, prints the resulting manifests.

${usage(checksumFlags)}
`;

export interface ChecksumIO {
  readStdin(): Promise<string>;
  err(text: string): void;
}

const processIO: ChecksumIO = {
  async readStdin() {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  },
  err: (text) => process.stderr.write(text),
};

/** Runs the command; resolves to the exit code (0 ok, 1 stale or failed, 2 usage). */
export async function checksum(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: (text: string) => void,
  io: ChecksumIO = processIO,
): Promise<number> {
  let values: ReturnType<typeof parseFlags>['values'];
  let positionals: string[];
  try {
    ({ values, positionals } = parseFlags(checksumFlags, argv, env));
    if (positionals.length > 1) throw new FlagError(`expected one DIR or -, got ${positionals.join(' ')}`);
    if (values['in-place'] && values.check) throw new FlagError('--in-place and --check exclude each other');
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    io.err(`gitops-reloader checksum: ${err.message}\n\n${CHECKSUM_USAGE}`);
    return 2;
  }
  const input = positionals[0] ?? '.';
  const stream = input === '-';
  const inPlace = values['in-place'] === true;
  const check = values.check === true;
  if (stream && inPlace) {
    io.err('gitops-reloader checksum: --in-place needs a directory, not -\n');
    return 2;
  }
  if (values.confine === true && typeof values.namespace !== 'string') {
    io.err(
      'gitops-reloader checksum: --confine needs --namespace (the namespace to confine the render to)\n',
    );
    return 2;
  }
  const nsKeyFile =
    (values['namespace-key-file'] as string | undefined) ??
    (values['key-file'] === undefined ? env.GITOPS_RELOADER_NAMESPACE_KEY_FILE : undefined);
  const keyFile =
    nsKeyFile === undefined
      ? ((values['key-file'] as string | undefined) ?? env.GITOPS_RELOADER_HASH_KEY_FILE)
      : undefined;
  if (nsKeyFile !== undefined && values['key-file'] !== undefined) {
    io.err('gitops-reloader checksum: --key-file and --namespace-key-file exclude each other\n');
    return 2;
  }
  if (!keyFile && !nsKeyFile) {
    io.err(
      "gitops-reloader checksum: --key-file (the HMAC key the service uses) or --namespace-key-file (a namespace's key from gitops-reloader tenant-key) is required\n",
    );
    return 2;
  }
  try {
    let key: Parameters<typeof injectChecksums>[1];
    let namespace = typeof values.namespace === 'string' ? values.namespace : undefined;
    let confine = values.confine === true;
    if (nsKeyFile !== undefined) {
      const tenant = readTenantKey(nsKeyFile);
      if (namespace !== undefined && namespace !== tenant.namespace) {
        io.err(
          `gitops-reloader checksum: --namespace ${namespace} is not the namespace of --namespace-key-file (${tenant.namespace})\n`,
        );
        return 2;
      }
      namespace = tenant.namespace;
      // A namespace's key computes its own namespace's values; anything naming another is refused.
      confine = true;
      key = tenantKeys(tenant);
    } else {
      key = readKeyFile(keyFile as string, '--key-file');
    }
    const sources = stream ? [{ name: '-', text: await io.readStdin() }] : await readDir(input, io);
    const result = injectChecksums(sources, key, {
      annotation: values.annotation as string,
      ...(namespace !== undefined ? { namespace } : {}),
      confine,
    });
    if (check) {
      const bad = result.workloads.filter((w) => w.previous !== w.hash);
      for (const w of bad) {
        const what = w.previous === undefined ? 'missing' : 'stale';
        io.err(`${what}: ${w.kind} ${w.namespace ? `${w.namespace}/` : ''}${w.name} in ${w.source}\n`);
      }
      io.err(
        bad.length === 0
          ? `${result.workloads.length} workload checksum(s) up to date\n`
          : `${bad.length} of ${result.workloads.length} workload checksum(s) need gitops-reloader checksum --in-place\n`,
      );
      return bad.length === 0 ? 0 : 1;
    }
    if (inPlace) {
      const changed = result.sources.filter((s) => s.changed);
      for (const s of changed) await writeFile(path.join(input, s.name), s.text, 'utf8');
      io.err(`${changed.length} file(s) updated, ${result.workloads.length} workload checksum(s)\n`);
      return 0;
    }
    if (stream) {
      out(result.sources[0]?.text ?? '');
      return 0;
    }
    out(concatenate(result.sources));
    return 0;
  } catch (err) {
    io.err(`gitops-reloader checksum: ${(err as Error).message}\n`);
    return 1;
  }
}

/** A --namespace-key-file: errors name the file, never its content. */
function readTenantKey(file: string): TenantKey {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(
      `cannot read --namespace-key-file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
  try {
    return parseTenantKey(text);
  } catch (err) {
    throw new Error(`--namespace-key-file ${file}: ${(err as Error).message}`);
  }
}

/** The manifest files of a directory; files that are not YAML (Helm templates, say) are skipped with a note. */
async function readDir(dir: string, io: ChecksumIO): Promise<ManifestSource[]> {
  const sources: ManifestSource[] = [];
  for (const file of await listYamlFiles(dir)) {
    const name = path.relative(dir, file).split(path.sep).join('/');
    const text = await readFile(file, 'utf8');
    try {
      if (!parseStream(text).some((d) => isKubernetesObject(d.toJS()))) continue;
    } catch (err) {
      io.err(`skipped ${name}: ${(err as Error).message}\n`);
      continue;
    }
    sources.push({ name, text });
  }
  return sources;
}

/** Files joined into one stream, each byte for byte, separated by `---`. */
function concatenate(sources: readonly ManifestSource[]): string {
  return sources
    .map((s, i) => {
      const body = s.text.endsWith('\n') || s.text === '' ? s.text : `${s.text}\n`;
      return i === 0 || /^---(\s|$)/.test(body) ? body : `---\n${body}`;
    })
    .join('');
}
