// A Stakater Reloader installation as `migrate` reads it: the container's args and env, plus the
// chart-level settings that are not flags (replicas, scheduling, monitoring). Read from a Helm values
// file (rendered into args and env the way Reloader's chart template does), or from a live
// Deployment. Pure: the command does the reading.

/** One env var of the Reloader container: a value, or where it comes from. */
export type EnvSource = { value: string } | { fieldPath: string } | { secret: string };

export interface ReloaderInstall {
  /** Where it came from, for the output's header. */
  source: string;
  /** The namespace Reloader ran in, when known (watchGlobally=false watches only it). */
  namespace?: string;
  /** Flags as name → value; a bare boolean flag is "true". The last occurrence wins, as with cobra. */
  flags: Map<string, string>;
  env: Map<string, EnvSource>;
  /** Chart values that are not flags, by Reloader's value path (e.g. "deployment.replicas"). */
  chart: Map<string, unknown>;
}

/** Parses container args as cobra does: --name=value, --name value, and bare --name for booleans. */
export function parseArgs(args: readonly string[], bools: ReadonlySet<string>): Map<string, string> {
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    if (eq > 0) {
      flags.set(a.slice(2, eq), a.slice(eq + 1));
    } else if (bools.has(a.slice(2))) {
      flags.set(a.slice(2), 'true');
    } else {
      flags.set(a.slice(2), args[i + 1] ?? '');
      i++;
    }
  }
  return flags;
}

/** Reloader's boolean flags (Go bool flags may be given bare). */
export const RELOADER_BOOL_FLAGS: ReadonlySet<string> = new Set([
  'auto-reload-all',
  'enable-ha',
  'sync-after-restart',
  'enable-pprof',
  'enable-csi-integration',
]);

type Values = Record<string, unknown>;
const obj = (v: unknown): Values => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Values) : {});
const isSet = (v: unknown) => v !== undefined && v !== null && v !== '' && v !== false;

/**
 * A Reloader chart values file as the installation it renders: the args and env its Deployment
 * template (deployments/kubernetes/chart/reloader/templates/deployment.yaml) would produce, and the
 * chart-level values. Keys the chart does not know are reported in `unknown`.
 */
export function fromValues(
  values: unknown,
  source: string,
  namespace?: string,
): { install: ReloaderInstall; unknown: string[] } {
  const root = obj(values);
  const r = obj(root.reloader);
  const flags = new Map<string, string>();
  const env = new Map<string, EnvSource>();
  const chart = new Map<string, unknown>();
  const unknown: string[] = [];
  const flag = (name: string, v: unknown) => flags.set(name, String(v));

  const handled = new Set<string>();
  const take = (key: string) => {
    handled.add(key);
    return r[key];
  };
  if (take('autoReloadAll') === true) flag('auto-reload-all', true);
  if (take('isArgoRollouts') === true) flag('is-Argo-Rollouts', true);
  if (take('ignoreSecrets') === true) flag('resources-to-ignore', 'secrets');
  if (take('ignoreConfigMaps') === true) flag('resources-to-ignore', 'configMaps');
  const ignoreTypes = [
    take('ignoreJobs') === true ? 'jobs' : '',
    take('ignoreCronJobs') === true ? 'cronjobs' : '',
  ]
    .filter(Boolean)
    .join(',');
  if (ignoreTypes) flag('ignored-workload-types', ignoreTypes);
  for (const [key, name] of [
    ['ignoreNamespaces', 'namespaces-to-ignore'],
    ['namespaceSelector', 'namespace-selector'],
    ['resourceLabelSelector', 'resource-label-selector'],
    ['logFormat', 'log-format'],
    ['logLevel', 'log-level'],
    ['webhookUrl', 'webhook-url'],
    ['namespaces', 'namespaces'],
  ] as const) {
    const v = take(key);
    if (isSet(v)) flag(name, Array.isArray(v) ? v.join(',') : v);
  }
  for (const [key, name] of [
    ['reloadOnCreate', 'reload-on-create'],
    ['reloadOnDelete', 'reload-on-delete'],
    ['syncAfterRestart', 'sync-after-restart'],
    ['enableCSIIntegration', 'enable-csi-integration'],
    ['enablePProf', 'enable-pprof'],
  ] as const) {
    if (take(key) === true) flag(name, true);
  }
  const strategy = take('reloadStrategy');
  if (isSet(strategy) && strategy !== 'default') flag('reload-strategy', strategy);
  if (take('enableHA') === true) flag('enable-ha', true);
  const le = obj(take('leaderElection'));
  for (const [key, name] of [
    ['leaseDuration', 'leader-election-lease-duration'],
    ['renewDeadline', 'leader-election-renew-deadline'],
    ['retryPeriod', 'leader-election-retry-period'],
  ] as const) {
    if (isSet(le[key]) && flags.get('enable-ha') === 'true') flag(name, le[key]);
  }
  const custom = obj(take('custom_annotations'));
  for (const [key, name] of [
    ['configmap', 'configmap-annotation'],
    ['secret', 'secret-annotation'],
    ['auto', 'auto-annotation'],
    ['secret_auto', 'secret-auto-annotation'],
    ['configmap_auto', 'configmap-auto-annotation'],
    ['search', 'auto-search-annotation'],
    ['match', 'search-match-annotation'],
  ] as const) {
    if (isSet(custom[key])) flag(name, custom[key]);
  }
  if (take('enableMetricsByNamespace') === true) env.set('METRICS_COUNT_BY_NAMESPACE', { value: 'enabled' });
  if (take('watchGlobally') === false) env.set('KUBERNETES_NAMESPACE', { fieldPath: 'metadata.namespace' });
  for (const key of ['isOpenshift', 'readOnlyRootFileSystem']) chart.set(key, take(key));

  const d = obj(take('deployment'));
  const e = obj(d.env);
  for (const [name, v] of Object.entries(obj(e.open))) if (isSet(v)) env.set(name, { value: String(v) });
  for (const [name, v] of Object.entries(obj(e.secret))) if (isSet(v)) env.set(name, { secret: name });
  for (const [name, v] of Object.entries(obj(e.field))) if (isSet(v)) env.set(name, { fieldPath: String(v) });
  for (const [secret, keys] of Object.entries(obj(e.existing))) {
    for (const name of Object.keys(obj(keys))) env.set(name, { secret });
  }
  for (const key of [
    'replicas',
    'resources',
    'nodeSelector',
    'tolerations',
    'affinity',
    'topologySpreadConstraints',
    'priorityClassName',
    'securityContext',
    'containerSecurityContext',
  ]) {
    if (d[key] !== undefined) chart.set(`deployment.${key}`, d[key]);
  }
  if (obj(d.pod).annotations !== undefined) chart.set('deployment.pod.annotations', obj(d.pod).annotations);
  for (const [key, path] of [
    ['rbac', 'rbac.enabled'],
    ['serviceMonitor', 'serviceMonitor.enabled'],
    ['podMonitor', 'podMonitor.enabled'],
    ['podDisruptionBudget', 'podDisruptionBudget.enabled'],
    ['netpol', 'netpol.enabled'],
  ] as const) {
    const v = take(key);
    if (obj(v).enabled !== undefined) chart.set(path, obj(v).enabled);
  }
  const sa = obj(take('serviceAccount'));
  if (sa.create !== undefined) chart.set('serviceAccount.create', sa.create);
  if (isSet(sa.name)) chart.set('serviceAccount.name', sa.name);
  // Values with no effect on what Reloader does, or that every chart has its own way of setting.
  for (const key of [
    'legacy',
    'matchLabels',
    'service',
    'volumeMounts',
    'volumes',
    'podMonitor',
    'serviceMonitor',
  ])
    handled.add(key);
  for (const key of Object.keys(r)) if (!handled.has(key)) unknown.push(`reloader.${key}`);
  for (const key of Object.keys(root)) {
    if (!['reloader', 'global', 'nameOverride', 'fullnameOverride', 'image', 'kubernetes'].includes(key))
      unknown.push(key);
  }
  return { install: { source, ...(namespace ? { namespace } : {}), flags, env, chart }, unknown };
}

interface Container {
  name?: string;
  image?: string;
  args?: string[];
  command?: string[];
  env?: Array<{
    name: string;
    value?: string;
    valueFrom?: { fieldRef?: { fieldPath?: string }; secretKeyRef?: { name?: string } };
  }>;
}

/** A Reloader Deployment as read from the API: its Reloader container's args and env. */
export function fromDeployment(d: unknown): ReloaderInstall {
  const dep = obj(d);
  const meta = obj(dep.metadata);
  const spec = obj(dep.spec);
  const pod = obj(obj(spec.template).spec);
  const containers = (pod.containers ?? []) as Container[];
  const c =
    containers.find((x) => /reloader/i.test(`${x.image ?? ''} ${x.name ?? ''}`)) ??
    containers[0] ??
    ({} as Container);
  const flags = parseArgs([...(c.command ?? []).slice(1), ...(c.args ?? [])], RELOADER_BOOL_FLAGS);
  const env = new Map<string, EnvSource>();
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env.set(e.name, { value: e.value });
    else if (e.valueFrom?.fieldRef?.fieldPath) env.set(e.name, { fieldPath: e.valueFrom.fieldRef.fieldPath });
    else if (e.valueFrom?.secretKeyRef) env.set(e.name, { secret: e.valueFrom.secretKeyRef.name ?? '' });
  }
  const chart = new Map<string, unknown>();
  if (spec.replicas !== undefined) chart.set('deployment.replicas', spec.replicas);
  const cont = obj(c);
  if (cont.resources !== undefined) chart.set('deployment.resources', cont.resources);
  for (const key of [
    'nodeSelector',
    'tolerations',
    'affinity',
    'topologySpreadConstraints',
    'priorityClassName',
  ]) {
    if (pod[key] !== undefined) chart.set(`deployment.${key}`, pod[key]);
  }
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : undefined;
  return {
    source: `Deployment ${namespace ?? '?'}/${String(meta.name ?? '?')}`,
    ...(namespace ? { namespace } : {}),
    flags,
    env,
    chart,
  };
}
