// What Stakater Reloader's Helm chart 2.2.16 (Reloader v1.4.21) renders for a values file: the
// Reloader Deployment (its args, env, replicas and pod fields, as templates/deployment.yaml writes
// them) and the chart-level objects migrate reads back (Service, ServiceAccount, RBAC, PDB,
// NetworkPolicy, monitors, VPA). Written from reading the chart, not copied from it; kept honest by
// test/compat/reloader-chart/ (hand-written renders of the chart for several value sets) and the
// optional check `npm run compat -- --migrate-chart PATH`, which runs real `helm template`.
// The chart's quirks are kept on purpose, since they are what Reloader really ran with: the
// namespace selector is wrapped in literal quotes, webhookUrl is passed only alongside
// custom_annotations, `replicas > 1` turns on --enable-ha even when the Deployment keeps one replica,
// the release namespace joins --namespaces. Pure.

type Values = Record<string, unknown>;
const obj = (v: unknown): Values => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Values) : {});
/** Go template truthiness: false, 0, "", nil and empty collections are false. */
const truthy = (v: unknown) =>
  !(
    v === undefined ||
    v === null ||
    v === false ||
    v === 0 ||
    v === '' ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0)
  );
/** How Go's template prints a value into a string (a list prints as `[a b]`). */
const goString = (v: unknown): string =>
  Array.isArray(v)
    ? `[${v.map(goString).join(' ')}]`
    : typeof v === 'object' && v !== null
      ? `map[...]`
      : String(v);

/** The chart's defaults that shape its render (values.yaml of chart 2.2.16, the parts that matter). */
const DEFAULTS: Values = {
  reloader: {
    autoReloadAll: false,
    isArgoRollouts: false,
    isOpenshift: false,
    ignoreSecrets: false,
    ignoreConfigMaps: false,
    ignoreJobs: false,
    ignoreCronJobs: false,
    reloadOnCreate: false,
    reloadOnDelete: false,
    syncAfterRestart: false,
    reloadStrategy: 'default',
    ignoreNamespaces: '',
    namespaceSelector: '',
    resourceLabelSelector: '',
    logFormat: '',
    logLevel: 'info',
    watchGlobally: true,
    namespaces: [],
    enableHA: false,
    enablePProf: false,
    enableCSIIntegration: false,
    pprofAddr: ':6060',
    readOnlyRootFileSystem: false,
    legacy: { rbac: false },
    matchLabels: {},
    enableMetricsByNamespace: false,
    deployment: {
      dnsConfig: {},
      replicas: 1,
      revisionHistoryLimit: 2,
      hostUsers: null,
      nodeSelector: null,
      affinity: {},
      volumeMounts: [],
      volumes: [],
      securityContext: { runAsNonRoot: true, runAsUser: 65534, seccompProfile: { type: 'RuntimeDefault' } },
      containerSecurityContext: {},
      tolerations: [],
      topologySpreadConstraints: [],
      annotations: {},
      labels: { provider: 'stakater', group: 'com.stakater.platform', version: 'v1.4.21' },
      env: { open: null, secret: null, field: null, existing: null },
      livenessProbe: {},
      readinessProbe: {},
      resources: {},
      pod: { annotations: {} },
      priorityClassName: '',
      runtimeClassName: '',
      schedulerName: '',
      gomaxprocsOverride: '',
      gomemlimitOverride: '',
    },
    service: {},
    rbac: { enabled: true, labels: {} },
    serviceAccount: { create: true, labels: {}, annotations: {}, name: null },
    custom_annotations: {},
    serviceMonitor: {
      enabled: false,
      labels: {},
      annotations: {},
      honorLabels: true,
      metricRelabelings: [],
      relabelings: [],
      targetLabels: [],
    },
    podMonitor: {
      enabled: false,
      labels: {},
      annotations: {},
      honorLabels: true,
      metricRelabelings: [],
      relabelings: [],
      podTargetLabels: [],
    },
    podDisruptionBudget: { enabled: false },
    netpol: { enabled: false, from: [], to: [] },
    verticalPodAutoscaler: {
      enabled: false,
      controlledResources: [],
      maxAllowed: {},
      minAllowed: {},
      updatePolicy: { updateMode: 'Auto' },
    },
    webhookUrl: '',
  },
  global: { imageRegistry: '', imagePullSecrets: [] },
  kubernetes: { host: 'https://kubernetes.default' },
  nameOverride: '',
  fullnameOverride: '',
  image: {
    name: 'stakater/reloader',
    repository: 'ghcr.io/stakater/reloader',
    tag: 'v1.4.21',
    pullPolicy: 'IfNotPresent',
  },
};

/** Helm's merge of user values over the chart's: maps merge, anything else replaces, null deletes. */
function merge(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  const b = obj(base);
  const o = obj(over);
  if (
    !(over && typeof over === 'object' && !Array.isArray(over)) ||
    !(base && typeof base === 'object' && !Array.isArray(base))
  )
    return over;
  const out: Values = { ...b };
  for (const [k, v] of Object.entries(o)) {
    if (v === null) delete out[k];
    else out[k] = merge(b[k], v);
  }
  return out;
}

/** Every value path of chart 2.2.16's values.yaml that migrate reads (deeper paths under these are free-form). */
const KNOWN_LEAVES = new Set([
  'reloader.deployment.env.open',
  'reloader.deployment.env.secret',
  'reloader.deployment.env.field',
  'reloader.deployment.env.existing',
  'reloader.custom_annotations',
  'reloader.matchLabels',
  'reloader.verticalPodAutoscaler',
  'reloader.netpol',
  'reloader.serviceMonitor',
  'reloader.podMonitor',
  'reloader.podDisruptionBudget',
  'reloader.service',
  'global',
  'kubernetes',
  'image',
]);

function unknownKeys(user: unknown, dflt: unknown, prefix: string, out: string[]): void {
  for (const [k, v] of Object.entries(obj(user))) {
    const path = prefix ? `${prefix}.${k}` : k;
    const d = obj(dflt);
    if (!(k in d) && path !== 'namespace') {
      out.push(`${path}: not a value of Reloader's chart 2.2.16`);
      continue;
    }
    if (KNOWN_LEAVES.has(path)) continue;
    if (
      v &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      d[k] &&
      typeof d[k] === 'object' &&
      !Array.isArray(d[k])
    )
      if (
        ![
          'affinity',
          'securityContext',
          'containerSecurityContext',
          'resources',
          'labels',
          'annotations',
          'dnsConfig',
          'livenessProbe',
          'readinessProbe',
          'nodeSelector',
          'legacy',
        ].includes(k)
      )
        unknownKeys(v, d[k], path, out);
  }
}

export interface RenderedChart {
  objects: Values[];
  namespace: string | undefined;
  /** Values the render cannot show (or migrate cannot follow) that Reloader did act on. */
  reported: string[];
  /** Values Reloader's chart ignored: they had no effect on Reloader either. */
  inert: string[];
}

/** The chart's HA anti-affinity, its labels and its /tmp volume: not user settings. */
export function chartDefault(release: string) {
  const d = obj(obj(DEFAULTS.reloader).deployment);
  return {
    values: new Map<string, unknown>([
      ['deployment.securityContext', d.securityContext],
      ['deployment.containerSecurityContext', {}],
      ['deployment.livenessProbe', probe('/live', {})],
      ['deployment.readinessProbe', probe('/metrics', {})],
    ]),
    haAffinity: haAffinity(release),
    tmpMount: [{ mountPath: '/tmp/', name: 'tmp-volume' }],
    tmpVolume: [{ emptyDir: {}, name: 'tmp-volume' }],
    podLabels: new Set([
      'app',
      'release',
      'app.kubernetes.io/name',
      'app.kubernetes.io/instance',
      'helm.sh/chart',
      'chart',
      'heritage',
      'app.kubernetes.io/managed-by',
      'app.kubernetes.io/version',
      ...Object.keys(obj(d.labels)),
    ]),
  };
}

const haAffinity = (release: string) => ({
  podAntiAffinity: {
    preferredDuringSchedulingIgnoredDuringExecution: [
      {
        weight: 100,
        podAffinityTerm: {
          labelSelector: {
            matchExpressions: [{ key: 'app.kubernetes.io/instance', operator: 'In', values: [release] }],
          },
          topologyKey: 'kubernetes.io/hostname',
        },
      },
    ],
  },
});

function probe(path: string, v: Values) {
  return {
    httpGet: { path, port: 'http' },
    timeoutSeconds: v.timeoutSeconds || 5,
    failureThreshold: v.failureThreshold || 5,
    periodSeconds: v.periodSeconds || 10,
    successThreshold: v.successThreshold || 1,
    initialDelaySeconds: v.initialDelaySeconds || 10,
  };
}

const sorted = (m: unknown) => Object.entries(obj(m)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** The chart 2.2.16 render of `values` for release `reloader` in `namespace`. */
export function renderChart(values: unknown, namespace?: string, release = 'reloader'): RenderedChart {
  const reported: string[] = [];
  const inert: string[] = [];
  unknownKeys(values, DEFAULTS, '', reported);
  const root = obj(merge(DEFAULTS, values ?? {}));
  const r = obj(root.reloader);
  const d = obj(r.deployment);
  const name = truthy(root.fullnameOverride)
    ? String(root.fullnameOverride)
    : `${release}-${truthy(root.nameOverride) ? String(root.nameOverride) : 'reloader'}`;
  const ns = truthy(root.namespace) ? String(root.namespace) : namespace;
  const relNs = ns ?? '<release namespace>';
  const ha = truthy(r.enableHA);
  const global = r.watchGlobally !== false && truthy(r.watchGlobally);

  // --- args, in the template's order.
  const args: string[] = [];
  const custom = obj(r.custom_annotations);
  const nsSelector = global && truthy(r.namespaceSelector) ? goString(r.namespaceSelector) : '';
  const anyArgs =
    truthy(r.logFormat) ||
    truthy(r.logLevel) ||
    truthy(r.ignoreSecrets) ||
    (truthy(r.ignoreNamespaces) && global) ||
    truthy(r.namespaces) ||
    nsSelector !== '' ||
    truthy(r.resourceLabelSelector) ||
    truthy(r.ignoreConfigMaps) ||
    truthy(r.custom_annotations) ||
    r.isArgoRollouts === true ||
    r.reloadOnCreate === true ||
    r.reloadOnDelete === true ||
    r.reloadStrategy !== 'default' ||
    ha ||
    truthy(r.autoReloadAll) ||
    truthy(r.ignoreJobs) ||
    truthy(r.ignoreCronJobs) ||
    truthy(r.enableCSIIntegration);
  if (anyArgs) {
    if (truthy(r.logFormat)) args.push(`--log-format=${goString(r.logFormat)}`);
    if (truthy(r.logLevel)) args.push(`--log-level=${goString(r.logLevel)}`);
    if (truthy(r.ignoreSecrets)) args.push('--resources-to-ignore=secrets');
    if (truthy(r.ignoreConfigMaps)) args.push('--resources-to-ignore=configmaps');
    if (truthy(r.ignoreJobs) && truthy(r.ignoreCronJobs)) args.push('--ignored-workload-types=jobs,cronjobs');
    else if (truthy(r.ignoreJobs)) args.push('--ignored-workload-types=jobs');
    else if (truthy(r.ignoreCronJobs)) args.push('--ignored-workload-types=cronjobs');
    if (truthy(r.namespaces)) {
      if (ns === undefined)
        reported.push(
          'reloader.namespaces: the chart adds the release namespace to --namespaces; run migrate with --namespace',
        );
      const given = (typeof r.namespaces === 'string' ? r.namespaces.split(',') : (r.namespaces as unknown[]))
        .map((n) => String(n).trim())
        .filter(Boolean);
      const all = [...new Set([...(ns === undefined ? [] : [ns]), ...given])].sort();
      args.push(`--namespaces=${all.join(',')}`);
    }
    if (truthy(r.ignoreNamespaces) && global)
      args.push(`--namespaces-to-ignore=${goString(r.ignoreNamespaces)}`);
    if (nsSelector !== '') args.push(`--namespace-selector="${nsSelector}"`);
    if (truthy(r.resourceLabelSelector))
      args.push(`--resource-label-selector=${goString(r.resourceLabelSelector)}`);
    if (truthy(r.enablePProf)) {
      args.push('--enable-pprof');
      if (truthy(r.pprofAddr)) args.push(`--pprof-addr=${goString(r.pprofAddr)}`);
    }
    if (truthy(r.enableCSIIntegration)) args.push('--enable-csi-integration=true');
    if (truthy(r.custom_annotations)) {
      for (const [key, flag] of [
        ['configmap', 'configmap-annotation'],
        ['secret', 'secret-annotation'],
        ['auto', 'auto-annotation'],
        ['secret_auto', 'secret-auto-annotation'],
        ['configmap_auto', 'configmap-auto-annotation'],
        ['search', 'auto-search-annotation'],
        ['match', 'search-match-annotation'],
        ['ignore', 'ignore-annotation'],
        ['pausePeriod', 'pause-deployment-annotation'],
        ['pauseTime', 'pause-deployment-time-annotation'],
      ] as const) {
        if (truthy(custom[key])) args.push(`--${flag}`, goString(custom[key]));
      }
      if (truthy(r.webhookUrl)) args.push('--webhook-url', goString(r.webhookUrl));
    }
    if (r.isArgoRollouts === true) args.push('--is-Argo-Rollouts=true');
    if (r.reloadOnCreate === true) args.push('--reload-on-create=true');
    if (r.reloadOnDelete === true) args.push('--reload-on-delete=true');
    if (r.syncAfterRestart === true) args.push('--sync-after-restart=true');
    if (r.reloadStrategy !== 'default') args.push(`--reload-strategy=${goString(r.reloadStrategy)}`);
    if (Math.trunc(Number(d.replicas) || 0) > 1 || ha) args.push('--enable-ha=true');
    if (r.autoReloadAll === true) args.push('--auto-reload-all=true');
  } else if (r.syncAfterRestart === true) {
    inert.push(
      'reloader.syncAfterRestart: the chart renders it only when another flag is set, so Reloader ran without it',
    );
  }
  for (const k of Object.keys(custom)) {
    if (
      ![
        'configmap',
        'secret',
        'auto',
        'secret_auto',
        'configmap_auto',
        'search',
        'match',
        'ignore',
        'pausePeriod',
        'pauseTime',
      ].includes(k)
    )
      reported.push(`reloader.custom_annotations.${k}: not a value of Reloader's chart 2.2.16`);
  }
  if (truthy(r.webhookUrl) && !truthy(r.custom_annotations))
    inert.push(
      "reloader.webhookUrl: Reloader's chart passes --webhook-url only together with custom_annotations, so Reloader reloaded and sent no webhook; gitops-reloader reloads too (no reloadWebhook.url)",
    );
  if (!global && truthy(r.ignoreNamespaces))
    inert.push('reloader.ignoreNamespaces: rendered only when watchGlobally is true; Reloader ignored it');
  if (!global && truthy(r.namespaceSelector))
    inert.push('reloader.namespaceSelector: rendered only when watchGlobally is true; Reloader ignored it');
  if (truthy(r.isOpenshift))
    reported.push('reloader.isOpenshift: OpenShift DeploymentConfigs are not reloaded');
  if (obj(r.legacy).rbac === true) reported.push('reloader.legacy.rbac: our chart has no legacy RBAC');
  if (truthy(r.matchLabels))
    reported.push(
      `reloader.matchLabels: ${JSON.stringify(r.matchLabels)}: our chart has its own selector labels`,
    );
  for (const [path, v] of [
    ['rbac.labels', obj(r.rbac).labels],
    ['serviceAccount.labels', obj(r.serviceAccount).labels],
  ] as const)
    if (truthy(v)) reported.push(`${path}: ${JSON.stringify(v)}: our chart has no such labels value`);
  if (
    truthy(obj(root.global).imageRegistry) ||
    truthy(obj(values).image) ||
    truthy(root.nameOverride) ||
    truthy(root.fullnameOverride)
  )
    inert.push(
      "image, global.imageRegistry, nameOverride, fullnameOverride: Reloader's own; our chart has its own image and names",
    );

  // --- env, in the template's order.
  const env: Values[] = [];
  const goEnv = (n: string, override: unknown, resource: string) =>
    env.push(
      truthy(override)
        ? { name: n, value: String(override) }
        : { name: n, valueFrom: { resourceFieldRef: { resource, divisor: '1' } } },
    );
  goEnv('GOMAXPROCS', d.gomaxprocsOverride, 'limits.cpu');
  goEnv('GOMEMLIMIT', d.gomemlimitOverride, 'limits.memory');
  const e = obj(d.env);
  for (const [n, v] of sorted(e.open)) if (truthy(v)) env.push({ name: n, value: String(v) });
  for (const [n, v] of sorted(e.secret))
    if (truthy(v)) env.push({ name: n, valueFrom: { secretKeyRef: { name, key: n } } });
  for (const [secret, keys] of sorted(e.existing))
    for (const [n, key] of sorted(keys))
      if (truthy(n)) env.push({ name: n, valueFrom: { secretKeyRef: { name: secret, key: String(key) } } });
  for (const [n, v] of sorted(e.field))
    if (truthy(v)) env.push({ name: n, valueFrom: { fieldRef: { fieldPath: String(v) } } });
  const fieldNs = { valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } };
  if (r.watchGlobally === false && !truthy(r.namespaces))
    env.push({ name: 'KUBERNETES_NAMESPACE', ...fieldNs });
  env.push({ name: 'RELOADER_NAMESPACE', ...fieldNs });
  env.push({ name: 'RELOADER_DEPLOYMENT_NAME', value: name });
  if (ha) {
    env.push({ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } });
    env.push({ name: 'POD_NAMESPACE', ...fieldNs });
  }
  if (truthy(r.enableMetricsByNamespace)) env.push({ name: 'METRICS_COUNT_BY_NAMESPACE', value: 'enabled' });

  // --- the container and the pod.
  const ro = r.readOnlyRootFileSystem === true;
  const container: Values = {
    name,
    image: 'ghcr.io/stakater/reloader:v1.4.21',
    env,
    ports: [{ name: 'http', containerPort: 9090 }],
    livenessProbe: probe('/live', obj(d.livenessProbe)),
    readinessProbe: probe('/metrics', obj(d.readinessProbe)),
    securityContext: { ...obj(d.containerSecurityContext), ...(ro ? { readOnlyRootFilesystem: true } : {}) },
  };
  if (truthy(d.volumeMounts) || ro)
    container.volumeMounts = [
      ...(ro ? [{ mountPath: '/tmp/', name: 'tmp-volume' }] : []),
      ...((d.volumeMounts as unknown[] | undefined) ?? []),
    ];
  if (args.length > 0) container.args = args;
  if (truthy(d.resources)) container.resources = d.resources;
  const pod: Values = {};
  const pullSecrets = (obj(root.global).imagePullSecrets ?? []) as unknown[];
  if (truthy(pullSecrets))
    pod.imagePullSecrets = pullSecrets.map((s) => (typeof s === 'string' ? { name: s } : s));
  if (typeof d.hostUsers === 'boolean') pod.hostUsers = d.hostUsers;
  if (truthy(d.nodeSelector)) pod.nodeSelector = d.nodeSelector;
  if (truthy(d.affinity) || ha) pod.affinity = truthy(d.affinity) ? d.affinity : haAffinity(release);
  for (const k of [
    'tolerations',
    'topologySpreadConstraints',
    'priorityClassName',
    'runtimeClassName',
    'schedulerName',
    'dnsConfig',
  ])
    if (truthy(d[k])) pod[k] = d[k];
  pod.containers = [container];
  if (truthy(d.securityContext)) pod.securityContext = d.securityContext;
  const sa = obj(r.serviceAccount);
  pod.serviceAccountName = sa.create
    ? truthy(sa.name)
      ? String(sa.name)
      : name
    : truthy(sa.name)
      ? String(sa.name)
      : 'default';
  if ('automountServiceAccountToken' in d) pod.automountServiceAccountToken = d.automountServiceAccountToken;
  if (truthy(d.volumes) || ro)
    pod.volumes = [
      ...(ro ? [{ emptyDir: {}, name: 'tmp-volume' }] : []),
      ...((d.volumes as unknown[] | undefined) ?? []),
    ];
  const labels = { app: name, release, ...obj(d.labels), ...obj(r.matchLabels) };
  const objects: Values[] = [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name,
        ...(ns ? { namespace: ns } : {}),
        annotations: {
          'meta.helm.sh/release-namespace': relNs,
          'meta.helm.sh/release-name': release,
          ...obj(d.annotations),
        },
        labels,
      },
      spec: {
        replicas: ha ? d.replicas : Math.min(Number(d.replicas), 1),
        revisionHistoryLimit: d.revisionHistoryLimit,
        template: {
          metadata: {
            ...(truthy(obj(d.pod).annotations) ? { annotations: obj(d.pod).annotations } : {}),
            labels,
          },
          spec: pod,
        },
      },
    },
  ];

  // --- the chart-level objects migrate reads back.
  const svc = obj(r.service);
  if (truthy(r.service))
    objects.push({
      kind: 'Service',
      metadata: {
        name,
        annotations: obj(svc.annotations),
        labels: { app: name, release, ...obj(svc.labels) },
      },
      spec: {
        ...(truthy(svc.ipFamilyPolicy) ? { ipFamilyPolicy: svc.ipFamilyPolicy } : {}),
        ...(truthy(svc.ipFamilies) ? { ipFamilies: svc.ipFamilies } : {}),
        ports: [{ port: svc.port ?? 9090, name: 'http' }],
      },
    });
  if (sa.create)
    objects.push({ kind: 'ServiceAccount', metadata: { name, annotations: obj(sa.annotations) } });
  if (obj(r.rbac).enabled) objects.push({ kind: global ? 'ClusterRole' : 'Role', metadata: { name } });
  const pdb = obj(r.podDisruptionBudget);
  if (pdb.enabled)
    objects.push({
      kind: 'PodDisruptionBudget',
      metadata: { name },
      spec: truthy(pdb.maxUnavailable)
        ? { maxUnavailable: pdb.maxUnavailable }
        : truthy(pdb.minAvailable)
          ? { minAvailable: pdb.minAvailable }
          : {},
    });
  if (obj(r.netpol).enabled) objects.push({ kind: 'NetworkPolicy', metadata: { name } });
  // ServiceMonitor and VPA render only where their CRDs are served; the values say they were wanted.
  for (const [key, kind] of [
    ['serviceMonitor', 'ServiceMonitor'],
    ['podMonitor', 'PodMonitor'],
    ['verticalPodAutoscaler', 'VerticalPodAutoscaler'],
  ] as const) {
    const m = obj(r[key]);
    if (!m.enabled) continue;
    objects.push({ kind, metadata: { name } });
    const dflt = obj(obj(DEFAULTS.reloader)[key]);
    for (const [k, v] of Object.entries(m))
      if (k !== 'enabled' && truthy(v) && JSON.stringify(v) !== JSON.stringify(dflt[k]))
        reported.push(`${key}.${k}: ${JSON.stringify(v)}: not carried (set serviceMonitor.* in our chart)`);
  }
  return { objects, namespace: ns, reported, inert };
}
