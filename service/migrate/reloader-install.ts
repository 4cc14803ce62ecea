// A Stakater Reloader installation as `migrate` reads it: the container's args and env, plus the
// chart-level settings that are not flags (replicas, scheduling, monitoring) and what no value of
// ours can carry. Read from a running Deployment or from `helm template` output of Reloader's chart
// (fromManifests), or from a Helm values file, which is first rendered into the Deployment Reloader's
// chart 2.2.16 would make (reloader-chart.ts) and then read like one: one reading for all three.
// Pure: the command does the reading of files and the API.
import { chartDefault, renderChart } from './reloader-chart.ts';

/** One env var of the Reloader container: a value, or where it comes from. */
export type EnvSource = { value: string } | { fieldPath: string } | { secret: string; key: string };

export interface ReloaderInstall {
  /** Where it came from, for the output's header. */
  source: string;
  /** The namespace Reloader ran in, when known (watchGlobally=false watches only it). */
  namespace?: string;
  /** Flags as name → value; a bare boolean flag is "true". A list flag given twice is joined. */
  flags: Map<string, string>;
  env: Map<string, EnvSource>;
  /** Chart values that are not flags, by Reloader's value path (e.g. "deployment.replicas"). */
  chart: Map<string, unknown>;
  /** Settings read that nothing of gitops-reloader carries, each a sentence naming the value. */
  reported: string[];
  /** Settings that had no effect in Reloader either (e.g. a value its chart does not render). */
  inert: string[];
}

/**
 * Reloader's list flags (pflag string slices): each occurrence is a CSV record, and occurrences
 * add up. Joined here with commas; translate splits them as pflag does.
 */
export const RELOADER_SLICE_FLAGS: ReadonlySet<string> = new Set([
  'resources-to-ignore',
  'ignored-workload-types',
  'namespaces',
  'namespaces-to-ignore',
  'namespace-selector',
  'resource-label-selector',
]);

/** Parses container args as cobra does: --name=value, --name value, and bare --name for booleans. */
export function parseArgs(args: readonly string[], bools: ReadonlySet<string>): Map<string, string> {
  const flags = new Map<string, string>();
  const set = (name: string, v: string) => {
    const before = flags.get(name);
    flags.set(name, RELOADER_SLICE_FLAGS.has(name) && before !== undefined ? `${before},${v}` : v);
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    if (eq > 0) {
      set(a.slice(2, eq), a.slice(eq + 1));
    } else if (bools.has(a.slice(2))) {
      set(a.slice(2), 'true');
    } else {
      set(a.slice(2), args[i + 1] ?? '');
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
const empty = (v: unknown) =>
  v === undefined ||
  v === null ||
  v === '' ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);
const same = (a: unknown, b: unknown) => JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(b));
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Values)[k])]),
    );
  return v;
}
const show = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/**
 * A Reloader chart values file as the installation it renders. The values are first rendered as
 * Reloader's chart 2.2.16 renders them (reloader-chart.ts), then read as rendered manifests are.
 */
export function fromValues(values: unknown, source: string, namespace?: string): ReloaderInstall {
  const rendered = renderChart(values, namespace);
  const install = fromManifests(rendered.objects, source, rendered.namespace);
  install.reported.push(...rendered.reported);
  install.inert.push(...rendered.inert);
  return install;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath?: string };
    secretKeyRef?: { name?: string; key?: string };
    resourceFieldRef?: { resource?: string };
  };
}

interface Container {
  name?: string;
  image?: string;
  args?: string[];
  command?: string[];
  env?: EnvVar[];
  [k: string]: unknown;
}

// Env vars Reloader's chart sets for itself (its own namespace and name, HA identity, Go's runtime
// sized from the limits): nothing to carry, our chart sets its own.
const CHART_ENV = new Set(['RELOADER_NAMESPACE', 'RELOADER_DEPLOYMENT_NAME', 'POD_NAME', 'POD_NAMESPACE']);

/** Pod fields Reloader's chart sets from a value: pod field → the value's path. */
const POD_FIELDS: Readonly<Record<string, string>> = {
  nodeSelector: 'deployment.nodeSelector',
  affinity: 'deployment.affinity',
  tolerations: 'deployment.tolerations',
  topologySpreadConstraints: 'deployment.topologySpreadConstraints',
  priorityClassName: 'deployment.priorityClassName',
  runtimeClassName: 'deployment.runtimeClassName',
  schedulerName: 'deployment.schedulerName',
  dnsConfig: 'deployment.dnsConfig',
  hostUsers: 'deployment.hostUsers',
  securityContext: 'deployment.securityContext',
  imagePullSecrets: 'global.imagePullSecrets',
  automountServiceAccountToken: 'deployment.automountServiceAccountToken',
  volumes: 'deployment.volumes',
};
/** Pod fields the API server fills in when a Deployment is read back (not settings of the install). */
const API_DEFAULTS: Readonly<Record<string, unknown>> = {
  restartPolicy: 'Always',
  terminationGracePeriodSeconds: 30,
  dnsPolicy: 'ClusterFirst',
  schedulerName: 'default-scheduler',
  securityContext: {},
};
/** Container fields: field → the value's path. */
const CONTAINER_FIELDS: Readonly<Record<string, string>> = {
  resources: 'deployment.resources',
  securityContext: 'deployment.containerSecurityContext',
  volumeMounts: 'deployment.volumeMounts',
  livenessProbe: 'deployment.livenessProbe',
  readinessProbe: 'deployment.readinessProbe',
};

/** A Reloader Deployment as read from the API or a render: its Reloader container's args and env. */
export function fromDeployment(d: unknown): ReloaderInstall {
  const dep = obj(d);
  const meta = obj(dep.metadata);
  const spec = obj(dep.spec);
  const template = obj(spec.template);
  const pod = obj(template.spec);
  const containers = (pod.containers ?? []) as Container[];
  const c =
    containers.find((x) => /reloader/i.test(`${x.image ?? ''} ${x.name ?? ''}`)) ??
    containers[0] ??
    ({} as Container);
  const flags = parseArgs([...(c.command ?? []).slice(1), ...(c.args ?? [])], RELOADER_BOOL_FLAGS);
  const env = new Map<string, EnvSource>();
  const reported: string[] = [];
  const inert: string[] = [];
  for (const e of c.env ?? []) {
    if (CHART_ENV.has(e.name)) continue;
    if (e.valueFrom?.resourceFieldRef) continue; // GOMAXPROCS / GOMEMLIMIT from the limits
    if (e.value !== undefined) env.set(e.name, { value: e.value });
    else if (e.valueFrom?.fieldRef?.fieldPath) env.set(e.name, { fieldPath: e.valueFrom.fieldRef.fieldPath });
    else if (e.valueFrom?.secretKeyRef)
      env.set(e.name, {
        secret: e.valueFrom.secretKeyRef.name ?? '',
        key: e.valueFrom.secretKeyRef.key ?? '',
      });
    else reported.push(`env ${e.name}: a source migrate does not read`);
  }
  const chart = new Map<string, unknown>();
  const namespace = typeof meta.namespace === 'string' ? meta.namespace : undefined;
  if (spec.replicas !== undefined) chart.set('deployment.replicas', spec.replicas);
  const ha = flags.get('enable-ha') === 'true';
  const defaults = chartDefault('reloader');
  const check = (path: string, v: unknown) => {
    if (v === undefined || v === null) return;
    if (path === 'deployment.affinity' && ha && same(v, chartDefault(haRelease(v)).haAffinity)) {
      inert.push(
        "deployment.affinity: the chart's default for HA (prefer spreading Reloader's pods over nodes) is not carried; our chart sets no affinity unless you do",
      );
      return;
    }
    const dflt = defaults.values.get(path);
    if (dflt !== undefined && same(v, dflt)) return;
    // Carried by translate (it has an equivalent).
    if (CARRIED.has(path)) {
      if (!empty(v)) chart.set(path, v);
      return;
    }
    if (path === 'deployment.containerSecurityContext' && same(v, { readOnlyRootFilesystem: true })) {
      chart.set('readOnlyRootFileSystem', true);
      return;
    }
    if (path === 'deployment.volumeMounts' && same(v, defaults.tmpMount)) return;
    if (path === 'deployment.volumes' && same(v, defaults.tmpVolume)) return;
    if (empty(v)) return;
    reported.push(`${path}: ${show(v)}: ${NO_EQUIVALENT[path] ?? 'no equivalent value in our chart'}`);
  };
  for (const [field, path] of Object.entries(POD_FIELDS))
    if (!(field in API_DEFAULTS && same(pod[field], API_DEFAULTS[field]))) check(path, pod[field]);
  for (const [field, path] of Object.entries(CONTAINER_FIELDS)) check(path, c[field]);
  // kubectl rollout restart's marker is not a setting.
  const podAnnotations = Object.fromEntries(
    Object.entries(obj(obj(template.metadata).annotations)).filter(
      ([k]) => k !== 'kubectl.kubernetes.io/restartedAt',
    ),
  );
  if (!empty(podAnnotations)) chart.set('deployment.pod.annotations', podAnnotations);
  // Labels the user added (the chart's own are left out).
  const labels = Object.fromEntries(
    Object.entries(obj(obj(template.metadata).labels)).filter(([k]) => !defaults.podLabels.has(k)),
  );
  if (!empty(labels)) chart.set('deployment.labels', labels);
  const annotations = Object.fromEntries(
    Object.entries(obj(meta.annotations)).filter(
      ([k]) =>
        !k.startsWith('meta.helm.sh/') &&
        k !== 'deployment.kubernetes.io/revision' &&
        k !== 'kubectl.kubernetes.io/last-applied-configuration',
    ),
  );
  if (!empty(annotations))
    reported.push(
      `deployment.annotations: ${show(annotations)}: our chart has no annotations for the Deployment itself`,
    );
  // 2: the chart's; 10: the API server's when none was given.
  if (spec.revisionHistoryLimit !== undefined && ![2, 10].includes(spec.revisionHistoryLimit as number))
    reported.push(
      `deployment.revisionHistoryLimit: ${show(spec.revisionHistoryLimit)}: our chart keeps Kubernetes's default`,
    );
  for (const [k, v] of Object.entries(pod)) {
    if (API_DEFAULTS[k] !== undefined && same(v, API_DEFAULTS[k])) continue;
    if (
      !(k in POD_FIELDS) &&
      !['containers', 'serviceAccountName', 'serviceAccount'].includes(k) &&
      !empty(v)
    )
      reported.push(`pod spec ${k}: ${show(v)}: not a field migrate knows`);
  }
  if (containers.length > 1)
    reported.push(
      `containers: ${containers.length - 1} container(s) besides Reloader's (${containers
        .filter((x) => x !== c)
        .map((x) => x.name)
        .join(', ')}): not carried`,
    );
  return {
    source: `Deployment ${namespace ?? '?'}/${String(meta.name ?? '?')}`,
    ...(namespace ? { namespace } : {}),
    flags,
    env,
    chart,
    reported,
    inert,
  };
}

/** The release name in the chart's HA anti-affinity term, whatever the release was called. */
function haRelease(affinity: unknown): string {
  const term = obj(
    obj(
      (
        (obj(obj(affinity).podAntiAffinity).preferredDuringSchedulingIgnoredDuringExecution ??
          []) as unknown[]
      )[0],
    ).podAffinityTerm,
  );
  const expr = obj(((obj(term.labelSelector).matchExpressions ?? []) as unknown[])[0]);
  return String(((expr.values ?? []) as unknown[])[0] ?? '');
}

/** Values translate carries (it knows an equivalent for each). */
const CARRIED = new Set([
  'deployment.resources',
  'deployment.nodeSelector',
  'deployment.tolerations',
  'deployment.affinity',
  'deployment.topologySpreadConstraints',
  'deployment.priorityClassName',
  'global.imagePullSecrets',
]);

const NO_EQUIVALENT: Readonly<Record<string, string>> = {
  'deployment.securityContext':
    'not carried: our chart runs non-root (uid 65534, seccomp RuntimeDefault) by default; set podSecurityContext yourself if you need something else',
  'deployment.containerSecurityContext':
    'not carried: ours drops all capabilities, no privilege escalation and a read-only root filesystem by default; set securityContext yourself if you need something else',
  'deployment.volumes': 'not carried: our chart mounts only its own /tmp',
  'deployment.volumeMounts': 'not carried: our chart mounts only its own /tmp',
  'deployment.livenessProbe': 'not carried: our chart has its own probes (/healthz)',
  'deployment.readinessProbe': 'not carried: our chart has its own probes (/healthz)',
  'deployment.runtimeClassName': 'our chart has no runtimeClassName value',
  'deployment.schedulerName': 'our chart has no schedulerName value',
  'deployment.dnsConfig': 'our chart has no dnsConfig value',
  'deployment.hostUsers': 'our chart has no hostUsers value',
  'deployment.automountServiceAccountToken': 'our pods need their token (they call the API)',
};

/** Kinds of Reloader's chart read for chart-level values (the rest carries nothing). */
const KNOWN_KINDS = new Set([
  'Deployment',
  'Service',
  'ServiceAccount',
  'ClusterRole',
  'ClusterRoleBinding',
  'Role',
  'RoleBinding',
  'Secret',
  'PodDisruptionBudget',
  'NetworkPolicy',
  'ServiceMonitor',
  'PodMonitor',
  'VerticalPodAutoscaler',
]);

/**
 * `helm template` output of Reloader's chart (or any set of its manifests): the Reloader Deployment
 * read as fromDeployment reads it, and the chart-level values read back from the other objects.
 */
export function fromManifests(
  objects: readonly unknown[],
  source: string,
  namespace?: string,
): ReloaderInstall {
  // `kubectl get … -o yaml` of several objects prints one List.
  const docs = objects
    .map(obj)
    .flatMap((o) => (o.kind === 'List' && Array.isArray(o.items) ? o.items.map(obj) : [o]))
    .filter((o) => typeof o.kind === 'string');
  const deployments = docs.filter((o) => o.kind === 'Deployment');
  const dep =
    deployments.find((d) =>
      ((obj(obj(obj(d.spec).template).spec).containers ?? []) as Container[]).some((c) =>
        /reloader/i.test(`${c.image ?? ''} ${c.name ?? ''}`),
      ),
    ) ?? deployments[0];
  if (!dep) throw new Error(`${source} holds no Deployment`);
  const install = fromDeployment(dep);
  install.source = source;
  if (namespace !== undefined) install.namespace = namespace;
  const { chart, reported } = install;
  const byKind = (kind: string) => docs.filter((o) => o.kind === kind);
  const helmAnnotations = (m: Values) =>
    Object.fromEntries(Object.entries(obj(m.annotations)).filter(([k]) => !k.startsWith('meta.helm.sh/')));

  // Only what differs from our chart's defaults (RBAC and a ServiceAccount made by the chart).
  if (byKind('ClusterRole').length + byKind('Role').length === 0) chart.set('rbac.enabled', false);
  const sa = byKind('ServiceAccount')[0];
  if (sa === undefined) chart.set('serviceAccount.create', false);
  const saName = String(obj(obj(obj(dep.spec).template).spec).serviceAccountName ?? '');
  if (sa === undefined && saName !== '' && saName !== 'default') chart.set('serviceAccount.name', saName);
  if (sa !== undefined) {
    const ann = helmAnnotations(obj(sa.metadata));
    if (!empty(ann)) chart.set('serviceAccount.annotations', ann);
  }
  const svc = byKind('Service')[0];
  if (svc !== undefined) {
    const s = obj(svc.spec);
    const port = obj(((s.ports ?? []) as unknown[])[0]).port;
    if (port !== undefined) chart.set('service.port', port);
    const ann = helmAnnotations(obj(svc.metadata));
    if (!empty(ann)) chart.set('service.annotations', ann);
    const labels = Object.fromEntries(
      Object.entries(obj(obj(svc.metadata).labels)).filter(([k]) => !chartDefault('').podLabels.has(k)),
    );
    if (!empty(labels))
      reported.push(`service.labels: ${show(labels)}: our chart has no labels value for its Service`);
    for (const k of ['ipFamilyPolicy', 'ipFamilies'] as const)
      if (!empty(s[k])) reported.push(`service.${k}: ${show(s[k])}: our chart has no ${k} value`);
  }
  const pdb = byKind('PodDisruptionBudget')[0];
  if (pdb !== undefined) {
    chart.set('podDisruptionBudget.enabled', true);
    const p = obj(pdb.spec);
    if (p.maxUnavailable !== undefined) chart.set('podDisruptionBudget.maxUnavailable', p.maxUnavailable);
    if (p.minAvailable !== undefined)
      reported.push(
        `podDisruptionBudget.minAvailable: ${show(p.minAvailable)}: our chart sets maxUnavailable only`,
      );
  }
  if (byKind('NetworkPolicy').length > 0) chart.set('netpol.enabled', true);
  if (byKind('ServiceMonitor').length > 0) chart.set('serviceMonitor.enabled', true);
  if (byKind('PodMonitor').length > 0) chart.set('podMonitor.enabled', true);
  if (byKind('VerticalPodAutoscaler').length > 0)
    reported.push('verticalPodAutoscaler: our chart has no VerticalPodAutoscaler');
  for (const o of docs) {
    if (!KNOWN_KINDS.has(String(o.kind)))
      reported.push(`${String(o.kind)} ${String(obj(o.metadata).name ?? '')}: not an object migrate knows`);
  }
  return install;
}
