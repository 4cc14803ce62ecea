// Turns a Reloader installation into gitops-reloader chart values: one entry per value, with a note
// where the meaning changes, and a list of what cannot be carried over. Pure.
import { stringify } from 'yaml';
import { pflagList, RELOADER_ANNOTATION_FLAGS, reloaderSelectorFlag } from '../config/reloader-flags.ts';
import type { EnvSource, ReloaderInstall } from './reloader-install.ts';

export interface ValueEntry {
  /** Path in our values, e.g. ["reload", "autoReloadAll"]. */
  path: string[];
  value: unknown;
  /** Set when the value behaves differently from what Reloader did: says how. */
  changes?: string;
  /** Where it came from in Reloader's terms. */
  from: string;
}

export interface Translation {
  entries: ValueEntry[];
  /** What Reloader did that gitops-reloader cannot do, or that we did not understand. */
  notCarried: string[];
  /** Reloader settings that need no value here (our default already does it), for the record. */
  notes: string[];
}

export interface TranslateOptions {
  /** Flags `gitops-reloader serve` accepts (to tell whether, say, --enable-csi-integration exists). */
  serveFlags: ReadonlySet<string>;
}

const truthy = (v: string | undefined) => v !== undefined && /^(true|t|1)$/i.test(v.trim());
/** A Reloader list flag's value, split as its pflag string slice splits it (CSV, quotes removed). */
function list(v: string): string[] {
  try {
    return pflagList(v)
      .map((s) => s.trim())
      .filter(Boolean);
  } catch {
    return [v];
  }
}
const namespaceName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * How Reloader v1.4.21 turns its selector slice into a label selector (pkg/common
 * GetNamespaceLabelSelector): each element's first `key:value` becomes `key=value` (`*` → `key`),
 * `key=*` becomes `key`, and the elements are joined with commas. An element holding several terms
 * (the chart's quotes make the whole value one element) is converted as one: `"a:x,b:y"` → `a=x,b`.
 */
export function reloaderSelectorReading(elements: readonly string[]): string {
  return elements
    .map((kv) => {
      let s = kv;
      if (kv.includes(':')) {
        const p = kv.split(':');
        s = p[1] === '*' ? (p[0] as string) : `${p[0]}=${p[1]}`;
      }
      if (kv.includes('=')) {
        const p = kv.split('=');
        if (p[1] === '*') s = p[0] as string;
      }
      return s;
    })
    .join(',');
}

const LOG_LEVEL: Record<string, string> = {
  trace: 'debug',
  debug: 'debug',
  info: 'info',
  warning: 'warn',
  warn: 'warn',
  error: 'error',
  fatal: 'error',
  panic: 'error',
};

export function translate(install: ReloaderInstall, o: TranslateOptions): Translation {
  const entries: ValueEntry[] = [];
  const notCarried: string[] = [];
  const notes: string[] = [];
  const f = install.flags;
  const seen = new Set<string>();
  const get = (name: string) => {
    seen.add(name);
    return f.get(name);
  };
  const put = (path: string, value: unknown, from: string, changes?: string) =>
    entries.push({ path: path.split('.'), value, from, ...(changes ? { changes } : {}) });
  const extraArgs: string[] = [];

  if (truthy(get('auto-reload-all'))) put('reload.autoReloadAll', true, '--auto-reload-all');

  const namespaces = get('namespaces');
  const watchOne = install.env.get('KUBERNETES_NAMESPACE');
  seen.add('KUBERNETES_NAMESPACE');
  if (namespaces) {
    const names = list(namespaces);
    const bad = names.filter((n) => !namespaceName.test(n));
    if (bad.length > 0)
      notCarried.push(
        `--namespaces=${namespaces}: ${bad.map((b) => JSON.stringify(b)).join(', ')} is no namespace name`,
      );
    put(
      'reload.namespaces',
      names.filter((n) => namespaceName.test(n)),
      '--namespaces',
    );
  } else if (watchOne) {
    const ns =
      'value' in watchOne
        ? watchOne.value
        : 'fieldPath' in watchOne && watchOne.fieldPath === 'metadata.namespace'
          ? install.namespace
          : undefined;
    if (ns) put('reload.namespaces', [ns], 'KUBERNETES_NAMESPACE (watchGlobally: false)');
    else
      notCarried.push(
        'watchGlobally: false / KUBERNETES_NAMESPACE: the namespace is unknown; run migrate with --namespace',
      );
  }
  for (const [flag, path] of [
    ['namespace-selector', 'reload.namespaceSelector'],
    ['resource-label-selector', 'reload.resourceLabelSelector'],
  ] as const) {
    const v = get(flag);
    if (!v) continue;
    let sel: string;
    try {
      sel = reloaderSelectorFlag([v]);
    } catch (e) {
      notCarried.push(`--${flag}=${v}: ${(e as Error).message}`);
      continue;
    }
    const theirs = reloaderSelectorReading(pflagList(v));
    if (theirs.replace(/\s/g, '') !== sel.replace(/\s/g, '')) {
      notCarried.push(
        `--${flag}=${v}: Reloader v1.4.21 read this as "${theirs}" (its chart's quotes make the list one element, converted as one); gitops-reloader reads it term by term as "${sel}", written above. Check which one you meant`,
      );
    }
    put(
      path,
      sel,
      `--${flag}=${v}`,
      sel !== v ? `Reloader's "key:value" list form, written as a label selector` : undefined,
    );
  }
  const ignoreNs = get('namespaces-to-ignore');
  if (ignoreNs) {
    const names = list(ignoreNs);
    const bad = names.filter((n) => !namespaceName.test(n));
    if (bad.length > 0)
      notCarried.push(
        `--namespaces-to-ignore=${ignoreNs}: ${bad.map((b) => JSON.stringify(b)).join(', ')} is no namespace name (a YAML list in reloader.ignoreNamespaces is rendered by the chart as "[a b]"; Reloader ignored no namespace)`,
      );
    else put('reload.ignoreNamespaces', names, '--namespaces-to-ignore');
  }

  const ignoreRes = get('resources-to-ignore');
  if (ignoreRes) {
    const kinds = [...new Set(list(ignoreRes).map((k) => k.toLowerCase()))];
    if (kinds.length === 1 && (kinds[0] === 'configmaps' || kinds[0] === 'secrets')) {
      put('reload.ignoreResources', kinds, `--resources-to-ignore=${ignoreRes}`);
    } else {
      notCarried.push(`--resources-to-ignore=${ignoreRes}: expected configmaps or secrets (one of them)`);
    }
  }
  const kinds: string[] = [];
  const types = get('ignored-workload-types');
  if (types) {
    for (const t of list(types)) {
      const k = { jobs: 'Job', cronjobs: 'CronJob' }[t.toLowerCase()];
      if (k) kinds.push(k);
      else notCarried.push(`--ignored-workload-types: unknown type "${t}"`);
    }
  }
  if (kinds.length > 0) put('reload.ignoreWorkloadKinds', kinds, `--ignored-workload-types=${types}`);
  if (!truthy(get('is-Argo-Rollouts'))) {
    put(
      'argoRollouts.enabled',
      false,
      "isArgoRollouts: false (Reloader's default)",
      'Reloader left Argo Rollouts alone; set true to reload them drift-free with spec.restartAt',
    );
  }

  const strategy = get('reload-strategy');
  put(
    'reload.defaultStrategy',
    'restart',
    `--reload-strategy=${strategy ?? 'default'}`,
    strategy === 'annotations'
      ? 'Reloader wrote an annotation into the pod template; restart evicts old pods and never writes the template (annotate is the closest to Reloader, and drifts from git)'
      : 'Reloader wrote an env var into the pod template; restart evicts old pods and never writes the template',
  );

  if (!truthy(get('reload-on-create'))) {
    notes.push(
      'reloadOnCreate: false in Reloader: gitops-reloader always reloads when a ConfigMap or Secret a workload references is created (a missing config is a state of its own)',
    );
  } else {
    // The creation of a config a workload names but does not use reloads it only with the flag.
    extraArgs.push('--reload-on-create=true');
  }
  if (truthy(get('reload-on-delete'))) {
    put(
      'reload.reloadOnDelete',
      true,
      '--reload-on-delete=true',
      'a deleted config reloads its workloads, except while a config the pods need is missing: that reload is held until it exists again',
    );
  }
  get('sync-after-restart');
  notes.push(
    'syncAfterRestart: gitops-reloader reloads what changed while it was down (its ledger), nothing more',
  );

  const ha = truthy(get('enable-ha'));
  const replicas = install.chart.get('deployment.replicas');
  put(
    'replicas',
    ha ? (typeof replicas === 'number' ? replicas : 2) : 1,
    ha ? '--enable-ha (enableHA, or deployment.replicas > 1)' : 'enableHA: false',
  );
  put(
    'leaderElection.enabled',
    true,
    ha ? '--enable-ha' : 'enableHA: false',
    ha
      ? undefined
      : 'gitops-reloader elects a leader even with one replica (harmless, and lets you scale out)',
  );
  for (const [from, to] of [
    ['leader-election-lease-duration', '--lease-duration'],
    ['leader-election-renew-deadline', '--lease-renew-deadline'],
    ['leader-election-retry-period', '--lease-retry-period'],
  ] as const) {
    const v = get(from);
    if (v) extraArgs.push(`${to}=${v}`);
  }

  // Alerts and probes keyed on Reloader's Event reason and port keep working.
  put('reloaderCompat', true, "Reloader's ReloadFail Event reason");
  put('http.port', 9090, "Reloader's metrics port :9090 (/metrics, /live)");

  // Reloader logs text unless told json; keep what the team's log pipeline reads.
  const format = (get('log-format') ?? '').toLowerCase();
  if (format === '') put('logFormat', 'text', 'logFormat: "" (Reloader logs text)');
  else if (format === 'json') put('logFormat', 'json', '--log-format=json');
  else notCarried.push(`--log-format=${format}: neither json nor Reloader's text (empty)`);
  const level = get('log-level');
  if (level) {
    const ours = LOG_LEVEL[level.toLowerCase()];
    if (ours) put('logLevel', ours, `--log-level=${level}`, ours !== level ? `read as ${ours}` : undefined);
    else notCarried.push(`--log-level=${level}: unknown level`);
  }

  const webhook = get('webhook-url');
  if (webhook) {
    put(
      'reloadWebhook.url',
      webhook,
      '--webhook-url',
      "one JSON notice per workload and batch (workload, changed configs, cutoff), retried, optionally signed (reloadWebhook.secret); not Reloader's body",
    );
  }

  // Custom annotation keys are read as Reloader's (service/core/annotation-keys.ts).
  for (const [name, key] of Object.entries(RELOADER_ANNOTATION_FLAGS)) {
    const v = get(name);
    if (v !== undefined && v !== key) extraArgs.push(`--${name}=${v}`);
  }
  if (truthy(get('enable-pprof')))
    notCarried.push('--enable-pprof: there is no Go pprof; use the process_* and nodejs_* metrics');
  get('pprof-addr');
  if (truthy(get('enable-csi-integration'))) {
    if (o.serveFlags.has('enable-csi-integration'))
      put('csiIntegration.enabled', true, '--enable-csi-integration');
    else
      notCarried.push(
        '--enable-csi-integration: this version of gitops-reloader does not read SecretProviderClassPodStatus',
      );
  }

  for (const [name] of f) {
    if (!seen.has(name)) notCarried.push(`--${name}: not a Reloader v1.4 flag that migrate knows`);
  }

  // Chat alerts (docs/alerts.md): Reloader's ALERT_* variables become the chart's alerts.* values.
  // A Secret-sourced variable is carried as a reference to that Secret, never as its value.
  const alert = (name: string, src: EnvSource) => {
    const plain = 'value' in src ? src.value : undefined;
    const from = `env ${name}`;
    switch (name) {
      case 'ALERT_ON_RELOAD':
        // Reloader alerts only on exactly "true"; it never alerts on a failed reload.
        if (plain === 'true' && !install.env.has('ALERT_WEBHOOK_URL'))
          notCarried.push(
            `${from}: alerts on without ALERT_WEBHOOK_URL, so Reloader sent none; not turned on`,
          );
        else if (plain === 'true') {
          put('alerts.enabled', true, from);
          put('alerts.onFailure', false, from);
          notes.push(
            `${from}: Reloader alerts on reloads only (alerts.onFailure: false); true adds one alert per run of failed reloads`,
          );
        } else if (plain === undefined)
          notCarried.push(`${from}: from a Secret or field; set alerts.enabled yourself`);
        return;
      case 'ALERT_SINK': {
        const sink = (plain ?? '').toLowerCase();
        if (sink === 'slack' || sink === 'teams' || sink === 'gchat') put('alerts.sink', sink, from);
        else if (sink === 'webhook' || sink === 'raw' || sink === '') put('alerts.sink', 'raw', from);
        else if (plain !== undefined)
          put(
            'alerts.sink',
            'raw',
            from,
            `"${plain}" is no sink: Reloader sends its text raw, and so does raw`,
          );
        else notCarried.push(`${from}: from a Secret or field; set alerts.sink yourself`);
        return;
      }
      case 'ALERT_WEBHOOK_URL':
        if ('secret' in src) {
          put('alerts.webhookUrlSecret', { name: src.secret, key: src.key }, from);
          notes.push(
            `${from}: read from the Secret ${src.secret} (key ${src.key}); if Reloader's chart made that Secret (deployment.env.secret), it goes with Reloader's release: create it yourself first`,
          );
        } else if (plain !== undefined) {
          // A plain value in the Deployment is already in whoever's values wrote it; ours keeps it in a Secret.
          put('alerts.webhookUrl', plain, from, 'kept in the Secret <fullname>-alerts, not in the pod spec');
        } else notCarried.push(`${from}: from a field; set alerts.webhookUrlSecret yourself`);
        return;
      case 'ALERT_WEBHOOK_PROXY':
      case 'ALERT_ADDITIONAL_INFO': {
        const to = name === 'ALERT_WEBHOOK_PROXY' ? 'alerts.proxy' : 'alerts.additionalInfo';
        if (plain !== undefined) put(to, plain, from);
        else notCarried.push(`${from}: from a Secret or field; set ${to} yourself`);
        return;
      }
      default:
        notCarried.push(`${from}: not an alert setting Reloader v1.4 reads`);
    }
  };

  // Env vars Reloader reads.
  for (const [name, src] of install.env) {
    if (name === 'KUBERNETES_NAMESPACE') continue;
    if (name === 'METRICS_COUNT_BY_NAMESPACE') {
      if ('value' in src && src.value === 'enabled')
        put('metrics.countByNamespace', true, 'enableMetricsByNamespace');
    } else if (name === 'POD_NAME' || name === 'POD_NAMESPACE' || name === 'RELOADER_NAMESPACE') {
      // Set by our chart itself.
    } else if (name === 'GOMAXPROCS' || name === 'GOMEMLIMIT') {
      notes.push(
        `${name} (deployment.gom${name === 'GOMAXPROCS' ? 'axprocs' : 'emlimit'}Override): Go's runtime; gitops-reloader is a Node.js service`,
      );
    } else if (name.startsWith('ALERT_')) {
      alert(name, src);
    } else {
      notCarried.push(
        `env ${name}: not something gitops-reloader reads; add it to extraEnv if your set-up needs it`,
      );
    }
  }

  // Chart-level values.
  const c = install.chart;
  for (const [from, to] of [
    ['deployment.resources', 'resources'],
    ['deployment.nodeSelector', 'nodeSelector'],
    ['deployment.tolerations', 'tolerations'],
    ['deployment.affinity', 'affinity'],
    ['deployment.topologySpreadConstraints', 'topologySpreadConstraints'],
    ['deployment.priorityClassName', 'priorityClassName'],
    ['deployment.pod.annotations', 'podAnnotations'],
    ['deployment.labels', 'podLabels'],
    ['global.imagePullSecrets', 'imagePullSecrets'],
    ['service.port', 'service.port'],
    ['service.annotations', 'service.annotations'],
    ['serviceAccount.annotations', 'serviceAccount.annotations'],
    ['podDisruptionBudget.maxUnavailable', 'podDisruptionBudget.maxUnavailable'],
    ['rbac.enabled', 'rbac.create'],
    ['serviceAccount.create', 'serviceAccount.create'],
    ['serviceAccount.name', 'serviceAccount.name'],
    ['podDisruptionBudget.enabled', 'podDisruptionBudget.enabled'],
    ['netpol.enabled', 'networkPolicy.enabled'],
  ] as const) {
    const v = c.get(from);
    if (v !== undefined && !(typeof v === 'object' && v !== null && Object.keys(v).length === 0)) {
      put(
        to,
        v,
        from,
        to === 'resources'
          ? 'gitops-reloader keeps hashes, not config data: it usually needs less memory'
          : undefined,
      );
    }
  }
  const monitor = c.get('podMonitor.enabled') === true || c.get('serviceMonitor.enabled') === true;
  if (monitor) {
    put(
      'serviceMonitor.enabled',
      true,
      c.get('podMonitor.enabled') === true ? 'podMonitor.enabled' : 'serviceMonitor.enabled',
      c.get('podMonitor.enabled') === true
        ? 'scraped through a ServiceMonitor (the chart has no PodMonitor)'
        : undefined,
    );
  }
  if (c.get('readOnlyRootFileSystem') === true)
    notes.push('readOnlyRootFileSystem: gitops-reloader always runs on a read-only root filesystem');
  notCarried.push(...install.reported);
  notes.push(...install.inert);
  if (extraArgs.length > 0) put('extraArgs', extraArgs, 'flags with no chart value');
  return { entries, notCarried, notes };
}

/** The values file: a header, the values with comments, and what was not carried over. */
export function render(t: Translation, source: string): string {
  const out: string[] = [
    `# gitops-reloader chart values, translated from Stakater Reloader (${source}) by \`gitops-reloader migrate\`.`,
    '# "CHANGES MEANING" marks a value that behaves differently from Reloader; read it before installing.',
    '# docs/migrating-from-reloader.md has every annotation, flag, value and metric.',
  ];
  // Group entries by their first path segment, keeping first-seen order.
  const roots = new Map<string, ValueEntry[]>();
  for (const e of t.entries) roots.set(e.path[0] as string, [...(roots.get(e.path[0] as string) ?? []), e]);
  for (const [root, group] of roots) {
    if (group.length === 1 && group[0]?.path.length === 1) {
      out.push(...entryLines(group[0], 0));
      continue;
    }
    out.push(`${root}:`);
    for (const e of group) out.push(...entryLines({ ...e, path: e.path.slice(1) }, 1));
  }
  if (t.notes.length > 0) {
    out.push('', '# Reloader settings that need no value here:');
    for (const n of t.notes) out.push(`#   ${n}`);
  }
  if (t.notCarried.length > 0) {
    out.push('', '# NOT CARRIED OVER (migrate exits non-zero):');
    for (const n of t.notCarried) out.push(`#   ${n}`);
  }
  return `${out.join('\n')}\n`;
}

function entryLines(e: ValueEntry, depth: number): string[] {
  const pad = '  '.repeat(depth);
  const lines: string[] = [];
  if (e.changes) lines.push(`${pad}# CHANGES MEANING: ${e.changes}`);
  const key = e.path.join('.');
  const scalar =
    e.value === null ||
    typeof e.value !== 'object' ||
    (Array.isArray(e.value) && e.value.every((v) => typeof v !== 'object'));
  if (scalar) {
    const text = stringify(e.value, { flow: true }).trimEnd();
    lines.push(`${pad}${key}: ${text}  # from ${e.from}`);
  } else {
    lines.push(`${pad}${key}:  # from ${e.from}`);
    const body = stringify(e.value).trimEnd().split('\n');
    for (const l of body) lines.push(`${pad}  ${l}`);
  }
  return lines;
}
