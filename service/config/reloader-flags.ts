// Stakater Reloader's flags (v1.4.x, internal/pkg/util/util.go ConfigureReloaderFlags), accepted
// under their own names so a Reloader Deployment's args work unchanged. Each one is translated into
// our equivalent flag here, once, at start-up, or refused with a message that names the equivalent.
// Flags both tools share by name (--auto-reload-all, --namespaces, --namespace-selector,
// --resource-label-selector, --log-level, --webhook-url) are our own flags; config.ts accepts
// Reloader's spelling of their values too.
import { type AnnotationAliases, annotationKeyProblem } from '../core/annotation-keys.ts';
import type { FlagSpec, FlagValue } from './flags.ts';
import { FlagError } from './flags.ts';

/** Reloader's default for each custom-annotation-name flag. */
export const RELOADER_ANNOTATION_FLAGS: Readonly<Record<string, string>> = {
  'auto-annotation': 'reloader.stakater.com/auto',
  'configmap-annotation': 'configmap.reloader.stakater.com/reload',
  'secret-annotation': 'secret.reloader.stakater.com/reload',
  'ignore-annotation': 'reloader.stakater.com/ignore',
  'configmap-auto-annotation': 'configmap.reloader.stakater.com/auto',
  'secret-auto-annotation': 'secret.reloader.stakater.com/auto',
  'auto-search-annotation': 'reloader.stakater.com/search',
  'search-match-annotation': 'reloader.stakater.com/match',
  'pause-deployment-annotation': 'deployment.reloader.stakater.com/pause-period',
  'pause-deployment-time-annotation': 'deployment.reloader.stakater.com/paused-at',
};

const reloader = (what: string) => `Stakater Reloader's flag, accepted for migration: ${what}`;

export const reloaderFlags: readonly FlagSpec[] = [
  ...Object.entries(RELOADER_ANNOTATION_FLAGS).map(
    ([name, key]): FlagSpec => ({
      name,
      type: 'string',
      help: reloader(
        `the annotation key read instead of "${key}" (default); gitops-reloader.io/* keys are always read too.`,
      ),
    }),
  ),
  {
    name: 'resources-to-ignore',
    type: 'list',
    help: reloader('configmaps or secrets (not both) → --ignore-resources.'),
  },
  {
    name: 'ignored-workload-types',
    type: 'list',
    help: reloader('jobs, cronjobs → --ignore-workload-kinds=Job,CronJob.'),
  },
  { name: 'namespaces-to-ignore', type: 'list', help: reloader('→ --ignore-namespaces.') },
  {
    name: 'is-Argo-Rollouts',
    type: 'string',
    help: reloader(
      'true → Rollouts are reloaded when the CRD is served (our default); false → --ignore-workload-kinds=Rollout.',
    ),
  },
  {
    name: 'reload-strategy',
    type: 'string',
    help: reloader(
      'annotations → --default-strategy=annotate (writes a hash annotation into the pod template, as Reloader does; needs patch on workloads); env-vars or default → our restart strategy, which never writes the pod template.',
    ),
  },
  {
    name: 'reload-on-create',
    type: 'string',
    help: reloader(
      'true: a created config a workload names in a reload list but does not use is a change, as a created config it uses always is; false (the default): it is recorded, not reloaded (a created config the pods use is always a change).',
    ),
  },
  {
    name: 'sync-after-restart',
    type: 'bool',
    help: reloader(
      'true is our behaviour: changes made while the service was down are found in the ledger at start-up; false is refused.',
    ),
  },
  { name: 'enable-ha', type: 'bool', help: reloader('→ --leader-elect.') },
  { name: 'leader-election-lease-duration', type: 'duration', help: reloader('→ --lease-duration.') },
  { name: 'leader-election-renew-deadline', type: 'duration', help: reloader('→ --lease-renew-deadline.') },
  { name: 'leader-election-retry-period', type: 'duration', help: reloader('→ --lease-retry-period.') },
  {
    name: 'log-format',
    type: 'string',
    help: reloader(
      "json (the default without the flag), or text: one logfmt line per entry (also an empty value, Reloader's text default). Other values are refused.",
    ),
  },
  {
    name: 'enable-pprof',
    type: 'bool',
    help: reloader(
      'false only; there is no Go pprof (use the process_* and nodejs_* metrics, or node --inspect).',
    ),
  },
  {
    name: 'pprof-addr',
    type: 'string',
    help: reloader('accepted and unused, since --enable-pprof=true is refused.'),
  },
];

/** Where each Reloader flag lands among ours (for messages, docs and `migrate`). */
export const RELOADER_FLAG_EQUIVALENT: Readonly<Record<string, string>> = {
  'resources-to-ignore': '--ignore-resources',
  'ignored-workload-types': '--ignore-workload-kinds',
  'namespaces-to-ignore': '--ignore-namespaces',
  'is-Argo-Rollouts': '--ignore-workload-kinds=Rollout (false); nothing (true)',
  'reload-strategy': '--default-strategy=annotate (annotations); restart (env-vars, default)',
  'enable-ha': '--leader-elect',
  'leader-election-lease-duration': '--lease-duration',
  'leader-election-renew-deadline': '--lease-renew-deadline',
  'leader-election-retry-period': '--lease-retry-period',
};

const WORKLOAD_TYPES: Readonly<Record<string, string>> = { jobs: 'Job', cronjobs: 'CronJob' };

export interface Translation {
  /** Lines for the start-up log: what each accepted Reloader flag became. */
  notes: string[];
  /** The custom annotation keys: Reloader's default key → the key to read instead. */
  aliases: AnnotationAliases;
}

/**
 * Reloader's custom annotation-key flags (--auto-annotation, …): its default key → the key read
 * instead. Shared by `serve` and `plan`, so both read a workload the same way. A bad key is refused.
 */
export function readAnnotationAliases(
  values: Readonly<Record<string, FlagValue>>,
  explicit: ReadonlySet<string>,
): { aliases: AnnotationAliases; notes: string[] } {
  const notes: string[] = [];
  const set = (name: string) => explicit.has(name) && values[name] !== undefined;
  const str = (name: string) => String(values[name] ?? '').trim();
  const refuse = (name: string, why: string) => {
    throw new FlagError(`--${name}=${str(name)} is refused: ${why}`);
  };
  const aliases: Record<string, string> = {};
  const taken = new Map<string, string>();
  for (const [name, key] of Object.entries(RELOADER_ANNOTATION_FLAGS)) {
    if (!set(name) || str(name) === key) continue;
    const custom = str(name);
    const problem = annotationKeyProblem(custom);
    if (problem) refuse(name, `not an annotation key: ${problem}`);
    if (custom.includes('gitops-reloader.io'))
      refuse(name, 'gitops-reloader.io keys are our own and always read; give a key of your own');
    if (Object.values(RELOADER_ANNOTATION_FLAGS).includes(custom))
      refuse(name, `"${custom}" is the default key of another flag`);
    const other = taken.get(custom);
    if (other) refuse(name, `--${other} names the same key`);
    taken.set(custom, name);
    // paused-at is written by Reloader and never read here: nothing to rename.
    if (name !== 'pause-deployment-time-annotation') aliases[key] = custom;
    notes.push(`--${name}=${custom}: read as ${key} (which is then no longer read)`);
  }

  return { aliases, notes };
}

/**
 * Translates the Reloader flags that were set into our flag values, in place. `explicit` holds the
 * flags given on the command line or in the environment (not defaults), so a contradiction between
 * a Reloader flag and ours is an error instead of a silent choice.
 */
export function translateReloaderFlags(
  values: Record<string, FlagValue>,
  explicit: ReadonlySet<string>,
): Translation {
  const notes: string[] = [];
  const set = (name: string) => explicit.has(name) && values[name] !== undefined;
  const str = (name: string) => String(values[name] ?? '').trim();
  const refuse = (name: string, why: string) => {
    throw new FlagError(`--${name}=${str(name)} is refused: ${why}`);
  };
  const agree = (from: string, to: string, v: FlagValue) => {
    if (explicit.has(to) && JSON.stringify(values[to]) !== JSON.stringify(v)) {
      throw new FlagError(
        `--${from}=${String(values[from])} contradicts --${to}=${String(values[to])}; give only --${to}`,
      );
    }
    values[to] = v;
    notes.push(`--${from}=${String(values[from])} → --${to}=${Array.isArray(v) ? v.join(',') : String(v)}`);
  };

  const { aliases, notes: aliasNotes } = readAnnotationAliases(values, explicit);
  notes.push(...aliasNotes);

  if (set('resources-to-ignore')) {
    const kinds = [...new Set((values['resources-to-ignore'] as string[]).map((r) => r.toLowerCase()))];
    const bad = kinds.find((k) => k !== 'configmaps' && k !== 'secrets');
    if (bad !== undefined) refuse('resources-to-ignore', `expected configmaps or secrets, not "${bad}"`);
    if (kinds.length > 1) refuse('resources-to-ignore', 'configmaps and secrets cannot both be ignored');
    const merged = [...new Set([...((values['ignore-resources'] as string[] | undefined) ?? []), ...kinds])];
    values['ignore-resources'] = merged;
    notes.push(`--resources-to-ignore=${kinds.join(',')} → --ignore-resources=${merged.join(',')}`);
  }

  const ignoreKinds = new Set((values['ignore-workload-kinds'] as string[] | undefined) ?? []);
  if (set('ignored-workload-types')) {
    for (const t of values['ignored-workload-types'] as string[]) {
      const kind = WORKLOAD_TYPES[t.toLowerCase()];
      if (!kind) refuse('ignored-workload-types', `expected jobs, cronjobs or both, not "${t}"`);
      ignoreKinds.add(kind as string);
    }
    notes.push(`--ignored-workload-types=${str('ignored-workload-types')} → --ignore-workload-kinds`);
  }
  if (set('is-Argo-Rollouts')) {
    const v = str('is-Argo-Rollouts').toLowerCase();
    if (v === 'false') {
      ignoreKinds.add('Rollout');
      notes.push('--is-Argo-Rollouts=false → --ignore-workload-kinds=Rollout');
    } else if (v !== 'true') {
      refuse('is-Argo-Rollouts', 'expected true or false');
    }
  }
  values['ignore-workload-kinds'] = [...ignoreKinds];

  if (set('namespaces-to-ignore')) {
    const merged = [
      ...new Set([
        ...((values['ignore-namespaces'] as string[] | undefined) ?? []),
        ...(values['namespaces-to-ignore'] as string[]),
      ]),
    ];
    values['ignore-namespaces'] = merged;
    notes.push(`--namespaces-to-ignore → --ignore-namespaces=${merged.join(',')}`);
  }

  if (set('reload-strategy')) {
    const v = str('reload-strategy');
    if (!['env-vars', 'annotations', 'default'].includes(v)) {
      refuse('reload-strategy', 'expected env-vars, annotations or default');
    }
    if (v === 'annotations') {
      // Reloader's meaning: a hash annotation in the pod template. Ours is annotate (it needs patch on
      // the workloads: chart rbac.annotate). It drifts from git, which restart never does.
      agree('reload-strategy', 'default-strategy', 'annotate');
    } else {
      notes.push(
        `--reload-strategy=${v}: reloads use --default-strategy=${String(values['default-strategy'])}, which never writes the pod template (there is no env-var strategy)`,
      );
    }
  }

  // --reload-on-delete is our own flag (config.ts), with Reloader's meaning and default.
  // --reload-on-create=false is our default meaning, as it is Reloader's default: accepted.
  if (set('reload-on-create')) {
    const v = str('reload-on-create').toLowerCase();
    if (v === 'true') {
      notes.push(
        '--reload-on-create=true: a created config a workload names (reload list) but does not use reloads it; one it uses always does',
      );
    } else if (v === 'false') {
      notes.push(
        '--reload-on-create=false (the default): a created config a workload names but does not use is recorded, not reloaded; one its pods use is always a change (a missing config is a state of its own)',
      );
    } else {
      refuse('reload-on-create', 'expected true or false');
    }
  }
  if (set('sync-after-restart')) {
    if (values['sync-after-restart'] === false) {
      refuse(
        'sync-after-restart',
        'gitops-reloader always reloads what changed while it was down (the ledger); drop the flag',
      );
    }
    notes.push('--sync-after-restart=true: changes made while down are found in the ledger at start-up');
  }

  if (set('enable-ha')) agree('enable-ha', 'leader-elect', values['enable-ha']);
  for (const [from, to] of [
    ['leader-election-lease-duration', 'lease-duration'],
    ['leader-election-renew-deadline', 'lease-renew-deadline'],
    ['leader-election-retry-period', 'lease-retry-period'],
  ] as const) {
    if (set(from)) agree(from, to, values[from]);
  }

  if (set('log-format')) {
    // Reloader: empty is its text format, json is JSON. Without the flag ours is JSON.
    const v = str('log-format').toLowerCase();
    if (v === '' || v === 'text' || v === 'logfmt') values['log-format'] = 'text';
    else if (v === 'json') values['log-format'] = 'json';
    else
      refuse('log-format', 'expected json, or text (logfmt; also written as an empty value, as in Reloader)');
  }
  if (set('enable-pprof') && values['enable-pprof'] === true) {
    refuse(
      'enable-pprof',
      'there is no Go pprof in a Node.js service; use the process_* and nodejs_* metrics on /metrics, or node --inspect',
    );
  }
  return { notes, aliases };
}

/**
 * One value of a Go pflag string-slice flag (how Reloader reads --namespace-selector,
 * --resource-label-selector, --namespaces and the other list flags), split as pflag splits it: as a
 * CSV record, so `"a=b,c"` with its quotes is one element `a=b,c` and a quote may wrap any element
 * (`""` inside is one quote). Reloader's chart renders `--namespace-selector="…"` with literal quotes,
 * which this removes. Throws on a quote pflag would refuse (a bare or unclosed one).
 */
export function pflagList(raw: string): string[] {
  const out: string[] = [];
  let i = 0;
  if (raw === '') return out;
  for (;;) {
    let field = '';
    if (raw[i] === '"') {
      i++;
      for (;;) {
        const q = raw.indexOf('"', i);
        if (q < 0) throw new Error(`unclosed quote in ${JSON.stringify(raw)}`);
        field += raw.slice(i, q);
        i = q + 1;
        if (raw[i] === '"') {
          field += '"';
          i++;
        } else break;
      }
      if (i < raw.length && raw[i] !== ',')
        throw new Error(`text after a closing quote in ${JSON.stringify(raw)}`);
    } else {
      const c = raw.indexOf(',', i);
      field = raw.slice(i, c < 0 ? undefined : c);
      if (field.includes('"'))
        throw new Error(`a quote inside an unquoted element of ${JSON.stringify(raw)}`);
      i = c < 0 ? raw.length : c;
    }
    out.push(field);
    if (i >= raw.length) return out;
    i++; // the comma
  }
}

/**
 * A selector flag given any number of times, in Reloader's meaning (a pflag string slice): every
 * occurrence split as pflag splits it (quotes removed), all elements joined with commas (so all
 * must match), then read term by term by reloaderSelector.
 */
export function reloaderSelectorFlag(occurrences: readonly string[]): string {
  return reloaderSelector(occurrences.flatMap((o) => pflagList(o)).join(','));
}

/**
 * Reloader's selector list form, `key:value` with `*` for "any value" (its legacy syntax), as a
 * Kubernetes label selector: `team:web,env:*` → `team=web,env`. A selector already in Kubernetes
 * syntax passes through unchanged, except `key=*`, which Reloader also reads as "key exists".
 */
export function reloaderSelector(sel: string): string {
  return sel
    .split(/,(?![^(]*\))/)
    .map((term) => {
      const t = term.trim();
      const colon = /^([A-Za-z0-9./_-]+):(.*)$/.exec(t);
      if (colon) return colon[2] === '*' ? colon[1] : `${colon[1]}=${colon[2]}`;
      const star = /^([A-Za-z0-9./_-]+)\s*==?\s*\*$/.exec(t);
      return star ? (star[1] as string) : t;
    })
    .join(',');
}
