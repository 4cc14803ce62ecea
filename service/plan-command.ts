// `gitops-reloader plan`: reads a live namespace and prints which workloads a change to one
// ConfigMap or Secret would reload, and how. It writes nothing.
import { randomBytes } from 'node:crypto';
import type { FlagSpec } from './config/flags.ts';
import { FlagError, parseFlags } from './config/flags.ts';
import { RELOADER_ANNOTATION_FLAGS, readAnnotationAliases, reloaderFlags } from './config/reloader-flags.ts';
import { compileGlobals, decide, type WorkloadPolicy } from './core/annotations.ts';
import { formatDuration } from './core/duration.ts';
import { windowState } from './core/restart-window.ts';
import type { ConfigKind, ConfigRef } from './core/types.ts';
import { configId } from './core/types.ts';
import { type ClusterAccess, loadClusterAccess } from './kube/access.ts';
import { collectionPath, WORKLOAD_RESOURCES } from './kube/resources.ts';
import { configRecord, type RawObject, workloadRecord } from './kube/to-record.ts';
import { getJson, KubeHttpError } from './kube/watch-http.ts';
import { ClusterState } from './state.ts';

export const planFlags: readonly FlagSpec[] = [
  {
    name: 'kubeconfig',
    type: 'string',
    help: 'Path to a kubeconfig (default: in-cluster, $KUBECONFIG, ~/.kube/config).',
  },
  { name: 'namespace', type: 'string', help: 'Namespace of the config (required).' },
  { name: 'configmap', type: 'string', help: 'Name of the ConfigMap that would change.' },
  { name: 'secret', type: 'string', help: 'Name of the Secret that would change.' },
  { name: 'auto-reload-all', type: 'bool', help: 'As for serve.', default: 'false' },
  { name: 'ignore-configmaps', type: 'list', help: 'As for serve.', default: 'kube-root-ca.crt' },
  { name: 'ignore-secrets', type: 'list', help: 'As for serve.' },
  {
    name: 'default-strategy',
    type: 'enum',
    values: ['restart', 'annotate', 'git'],
    help: 'As for serve.',
    default: 'restart',
  },
  // Reloader's custom annotation keys, read as serve reads them (a workload using them plans the same).
  ...reloaderFlags.filter((f) => Object.hasOwn(RELOADER_ANNOTATION_FLAGS, f.name)),
];

const HOW: Record<string, Record<string, string>> = {
  restart: {
    Deployment: 'evict pods created before the change within maxUnavailable, with surge pods within maxSurge',
    StatefulSet: 'evict pods created before the change, highest ordinal first',
    DaemonSet: 'evict pods created before the change, node by node',
    Rollout: 'set spec.restartAt (Argo Rollouts restarts the pods)',
    CronJob:
      'create one Job from its jobTemplate now (none while suspended; Forbid waits for the running Job, Replace replaces it)',
    Job: 'delete the Job and create it again with the same spec, so it runs again',
  },
  annotate: {
    Job: "not reloaded: a Job's pod template cannot change (use the restart strategy)",
    '*': 'set gitops-reloader.io/config-hash on the pod template (changes the template: drift)',
  },
  git: {
    Job: "not reloaded: a Job's pod template cannot change (use the restart strategy)",
    '*': 'commit a checksum bump to git (not enabled in this release)',
  },
};

/** When the reload would start: maintenance windows and the pause-period batch window. */
export function timing(policy: WorkloadPolicy, nowMs: number): string {
  let out = '';
  if (policy.windows) {
    const w = windowState(policy.windows, nowMs);
    out += w.open
      ? `; window "${policy.windows.text}" open until ${new Date(w.closesAt).toISOString()}`
      : `; held until ${new Date(w.opensAt).toISOString()}, when a window of "${policy.windows.text}" opens`;
  }
  if (policy.batchWindowMs !== undefined) {
    out += `; after a batch window of ${formatDuration(policy.batchWindowMs)} (pause-period), with every change made in it`;
  }
  return out;
}

async function list(kc: ClusterAccess, path: string): Promise<RawObject[]> {
  const signal = new AbortController().signal;
  try {
    const body = (await getJson(kc, path, signal, 30_000)) as { items?: RawObject[] };
    return body.items ?? [];
  } catch (err) {
    if (err instanceof KubeHttpError && err.status === 404) return []; // e.g. Argo Rollouts not installed
    throw err;
  }
}

export async function plan(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  out: (s: string) => void,
): Promise<number> {
  const { values, explicit } = parseFlags(planFlags, argv, env);
  const { aliases } = readAnnotationAliases(values, explicit);
  const namespace = values.namespace as string | undefined;
  const cm = values.configmap as string | undefined;
  const secret = values.secret as string | undefined;
  if (!namespace) throw new FlagError('--namespace is required');
  if ((cm === undefined) === (secret === undefined))
    throw new FlagError('give exactly one of --configmap or --secret');
  const kind: ConfigKind = cm !== undefined ? 'ConfigMap' : 'Secret';
  const target: ConfigRef = { kind, namespace, name: (cm ?? secret) as string };
  const { globals, problems } = compileGlobals({
    autoReloadAll: values['auto-reload-all'] === true,
    ignoreConfigMaps: values['ignore-configmaps'] as string[],
    ignoreSecrets: (values['ignore-secrets'] as string[] | undefined) ?? [],
  });
  if (problems.length > 0) throw new FlagError(problems.join('; '));

  const kc = await loadClusterAccess(values.kubeconfig as string | undefined);
  const key = randomBytes(32); // digests are only compared within this run
  const state = new ClusterState(values['default-strategy'] as 'restart');
  for (const [k, plural] of [
    ['ConfigMap', 'configmaps'],
    ['Secret', 'secrets'],
  ] as const) {
    for (const raw of await list(kc, `/api/v1/namespaces/${namespace}/${plural}`)) {
      const rec = configRecord(k, raw, key, aliases);
      if (rec) state.putConfig(rec);
    }
  }
  for (const r of WORKLOAD_RESOURCES) {
    for (const raw of await list(kc, collectionPath(r, namespace))) {
      const rec = workloadRecord(r.kind, raw, aliases);
      if (rec) state.putWorkload(rec);
    }
  }

  const exists = state.get(target) !== undefined;
  out(`If ${configId(target)} changes${exists ? '' : ' (it does not exist yet)'}:\n`);
  const rows: string[][] = [];
  for (const t of state.workloads.values()) {
    const referenced = t.rec.uses.some((u) => configId(u.config) === configId(target));
    const label = `${t.rec.ref.kind}/${t.rec.ref.name}`;
    if (t.parsed.problems.length > 0) {
      rows.push([label, 'skip', `invalid annotations: ${t.parsed.problems.join('; ')}`]);
      continue;
    }
    const d = decide(
      t.parsed.policy,
      { ref: target, annotations: state.get(target)?.annotations, referenced },
      globals,
    );
    if (!d.reload) {
      if (referenced || d.rule !== 'not-referenced')
        rows.push([label, 'skip', `${d.rule.replace(/-/g, ' ')}: ${d.reason}`]);
      continue;
    }
    const strategy = t.parsed.policy.strategy;
    const how =
      HOW[strategy]?.[t.rec.ref.kind] ?? HOW[strategy]?.['*'] ?? `not handled for ${t.rec.ref.kind} yet`;
    rows.push([label, strategy, `${d.reason}; ${how}${timing(t.parsed.policy, Date.now())}`]);
  }
  if (rows.length === 0) out('  no workload in the namespace references it or names it\n');
  const width = Math.max(...rows.map((r) => (r[0] as string).length), 8);
  for (const [w, action, why] of rows.sort((a, b) => (a[0] as string).localeCompare(b[0] as string))) {
    out(`  ${(w as string).padEnd(width)}  ${(action as string).padEnd(8)}  ${why}\n`);
  }
  return 0;
}
