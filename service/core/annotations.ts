// The annotation policy: which config changes reload which workload, read from our own
// gitops-reloader.io keys and from Stakater Reloader's keys with Reloader's meaning and precedence.
// docs/annotations.md is the user-facing description of this file; keep the two in step.

import { formatDuration, parseDuration } from './duration.ts';
import { compileNameList, EMPTY_NAME_LIST, matchName, type NameList, splitList } from './name-pattern.ts';
import { parseRestartWindows, type RestartWindows } from './restart-window.ts';
import {
  type ConfigKind,
  type ConfigRef,
  RELOAD_STRATEGIES,
  type ReloadStrategy,
  type WorkloadKind,
} from './types.ts';

export type Annotations = Readonly<Record<string, string>>;

/** The same setting under our key and under Reloader's. */
interface KeyPair {
  readonly ours: string;
  readonly reloader: string;
}

interface TypedKeys {
  readonly auto: KeyPair;
  readonly reload: KeyPair;
  readonly exclude: KeyPair;
}

export const KEYS = {
  auto: { ours: 'gitops-reloader.io/auto', reloader: 'reloader.stakater.com/auto' },
  search: { ours: 'gitops-reloader.io/search', reloader: 'reloader.stakater.com/search' },
  match: { ours: 'gitops-reloader.io/match', reloader: 'reloader.stakater.com/match' },
  ignore: { ours: 'gitops-reloader.io/ignore', reloader: 'reloader.stakater.com/ignore' },
  typed: {
    ConfigMap: {
      auto: { ours: 'configmap.gitops-reloader.io/auto', reloader: 'configmap.reloader.stakater.com/auto' },
      reload: {
        ours: 'configmap.gitops-reloader.io/reload',
        reloader: 'configmap.reloader.stakater.com/reload',
      },
      exclude: {
        ours: 'configmap.gitops-reloader.io/exclude',
        reloader: 'configmaps.exclude.reloader.stakater.com/reload',
      },
    },
    Secret: {
      auto: { ours: 'secret.gitops-reloader.io/auto', reloader: 'secret.reloader.stakater.com/auto' },
      reload: { ours: 'secret.gitops-reloader.io/reload', reloader: 'secret.reloader.stakater.com/reload' },
      exclude: {
        ours: 'secret.gitops-reloader.io/exclude',
        reloader: 'secrets.exclude.reloader.stakater.com/reload',
      },
    },
    // Secrets Store CSI driver classes, read only with --enable-csi-integration (docs/csi.md).
    SecretProviderClass: {
      auto: {
        ours: 'secretproviderclass.gitops-reloader.io/auto',
        reloader: 'secretproviderclass.reloader.stakater.com/auto',
      },
      reload: {
        ours: 'secretproviderclass.gitops-reloader.io/reload',
        reloader: 'secretproviderclass.reloader.stakater.com/reload',
      },
      exclude: {
        ours: 'secretproviderclass.gitops-reloader.io/exclude',
        reloader: 'secretproviderclasses.exclude.reloader.stakater.com/reload',
      },
    },
  } satisfies Record<ConfigKind, TypedKeys>,
  strategy: 'gitops-reloader.io/strategy',
  debounce: 'gitops-reloader.io/debounce',
  /** Maintenance windows: a reload outside them is held until one opens (core/restart-window.ts). */
  restartWindow: 'gitops-reloader.io/restart-window',
  /** Progressive reloads: the order in a change's waves (a higher priority first; default 0). */
  reloadPriority: 'gitops-reloader.io/reload-priority',
  /** Progressive reloads: "false" takes the workload out of the waves (it reloads at once). */
  progressive: 'gitops-reloader.io/progressive',
  /** On a ConfigMap or Secret: a new value resumes its halted progressive reload (docs/progressive-reloads.md). */
  progressiveResume: 'gitops-reloader.io/progressive-resume',
  /** Reloader's pause after a Deployment reload; read as a batch window (see readPausePeriod). */
  pausePeriod: 'deployment.reloader.stakater.com/pause-period',
  /** Reloader's per-Rollout choice between a template rollout and spec.restartAt. */
  rolloutStrategy: 'reloader.stakater.com/rollout-strategy',
  /** Written by the annotate and git strategies on the pod template. */
  configHash: 'gitops-reloader.io/config-hash',
  /** Written on the Jobs a reload creates (from a CronJob, or recreating a Job): the configs that changed. */
  reloadedFor: 'gitops-reloader.io/reloaded-for',
  /** Written with reloadedFor: the reload's cutoff, which makes creating the Job idempotent. */
  reloadCutoff: 'gitops-reloader.io/reload-cutoff',
  /** Written on workload metadata by the Argo CD "reload (drift-free)" resource action. */
  reloadRequestedAt: 'gitops-reloader.io/reload-requested-at',
  /** Git strategy, Helm sources: the values map that holds pod annotations (default podAnnotations). */
  gitValuesPath: 'gitops-reloader.io/git-values-path',
} as const;

/** The longest debounce accepted; longer would overflow Node timers long before it was useful. */
export const MAX_DEBOUNCE_MS = 24 * 3_600_000;

// Reloader keys we know and deliberately do not act on: a warning, and the workload is still
// reloaded. Every Reloader key we claim is one its released source (v1.4.x) defines: the annotation
// defaults in internal/pkg/config/config.go and the CSI and pause-deployment ones. Any other
// *reloader.stakater.com key is reported as unknown.
const UNSUPPORTED: Readonly<Record<string, { message: string }>> = {
  'deployment.reloader.stakater.com/paused-at': {
    message:
      "was written by Reloader's pause-period and is not read. If spec.paused is still true, Reloader paused " +
      'this Deployment and is no longer there to resume it: run kubectl rollout resume',
  },
  'reloader.stakater.com/last-reloaded-from': {
    message:
      "was written by Reloader's annotations strategy and is neither read nor updated. It is harmless; " +
      'removing it from the pod template restarts the pods once',
  },
};

/** How one config kind (ConfigMaps, Secrets or SecretProviderClasses) reaches this workload. */
export interface KindRules {
  /** Where the opt-in keys for this kind were read: Reloader reads the pod template only when the metadata has none. */
  readonly source: 'metadata' | 'pod template';
  readonly named: readonly KeyedList[];
  readonly exclude: readonly KeyedList[];
  /** The untyped auto key (either family); undefined when unset or empty. */
  readonly auto: KeyedBool | undefined;
  /** The typed auto key for this kind (either family). */
  readonly typedAuto: KeyedBool | undefined;
  readonly search: KeyedBool | undefined;
}

export interface KeyedList {
  readonly key: string;
  readonly list: NameList;
}

export interface KeyedBool {
  readonly key: string;
  readonly value: boolean;
}

export interface WorkloadPolicy {
  readonly configMaps: KindRules;
  readonly secrets: KindRules;
  /** Secrets Store CSI driver classes mounted through CSI volumes (acted on with --enable-csi-integration). */
  readonly providerClasses: KindRules;
  readonly strategy: ReloadStrategy;
  /** The key that chose the strategy, or 'default'. */
  readonly strategySource: string;
  /** Per-workload debounce override in ms; undefined means the global debounce. */
  readonly debounceMs: number | undefined;
  /**
   * Least time between the end of one reload and the start of the next (Reloader's pause-period on a
   * Deployment): changes in between wait and become one reload. Undefined: the global minimum.
   */
  readonly batchWindowMs: number | undefined;
  /** Maintenance windows: a reload starts only inside one. Undefined: any time. */
  readonly windows: RestartWindows | undefined;
  /** Progressive reloads: its place in a change's waves (higher first), and false when it opted out. */
  readonly priority: number;
  readonly progressive: boolean;
}

export interface ParsedWorkloadPolicy {
  readonly policy: WorkloadPolicy;
  /** Bad values. When there is any, skip the workload and emit a ReloadConfigInvalid Event. */
  readonly problems: string[];
  /** Keys that are not acted on (unsupported, misplaced, unknown, not read). Report; keep reloading. */
  readonly warnings: string[];
  /** Reloader keys read with a meaning of our own (pause-period). Report once, as a Normal Event. */
  readonly notes: string[];
}

export interface ParseOptions {
  readonly kind: WorkloadKind;
  readonly defaultStrategy: ReloadStrategy;
  /** --enable-csi-integration: without it the SecretProviderClass keys are reported as not acted on. */
  readonly csi?: boolean;
}

/** The rules of one config kind in a policy. */
export function rulesFor(policy: WorkloadPolicy, kind: ConfigKind): KindRules {
  if (kind === 'ConfigMap') return policy.configMaps;
  if (kind === 'Secret') return policy.secrets;
  return policy.providerClasses;
}

export const CONFIG_KINDS: readonly ConfigKind[] = ['ConfigMap', 'Secret', 'SecretProviderClass'];

/** Global options, compiled once at start-up by compileGlobals. */
export interface AnnotationGlobals {
  readonly autoReloadAll: boolean;
  readonly ignoreConfigMaps: NameList;
  readonly ignoreSecrets: NameList;
}

export interface ConfigChange {
  readonly ref: ConfigRef;
  /** The ConfigMap's or Secret's own annotations. */
  readonly annotations: Annotations | undefined;
  /** Whether the workload's pod template uses the config (env, envFrom, volume, projection). */
  readonly referenced: boolean;
}

/** Which rule decided. `invalid` means the config's own annotations are bad: see `problem`. */
export type DecisionRule =
  | 'global-ignore'
  | 'ignore'
  | 'exclude'
  | 'named'
  | 'search'
  | 'auto'
  | 'auto-all'
  | 'not-referenced'
  | 'not-opted-in'
  | 'invalid';

export interface Decision {
  readonly reload: boolean;
  readonly rule: DecisionRule;
  /** One line for logs and Events, naming the key that decided. */
  readonly reason: string;
  /** Set when rule is 'invalid': a bad annotation on the config, worth an Event on the workload. */
  readonly problem?: string;
}

// --- values ---------------------------------------------------------------------------------------

// Reloader reads the auto keys with Go's strconv.ParseBool and compares search/match/ignore to
// "true" only. We accept the same spellings and report anything else instead of treating it as false.
const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

type BoolStyle = 'go' | 'strict';

function parseBool(value: string, style: BoolStyle): boolean | string {
  if (style === 'go') {
    if (GO_TRUE.has(value)) return true;
    if (GO_FALSE.has(value)) return false;
    return `${JSON.stringify(value)} is not a boolean; use "true" or "false"`;
  }
  if (value === 'true') return true;
  if (value === 'false') return false;
  return `${JSON.stringify(value)} is not understood; use "true" or "false" (Reloader accepts only these two)`;
}

const where = (source: string) => (source === 'metadata' ? '' : ` (on the ${source})`);

/** Reads one boolean from both families. Empty means unset; the two families must agree. */
function readBool(
  ann: Annotations,
  pair: KeyPair,
  style: BoolStyle,
  problems: Set<string>,
  source: string,
): KeyedBool | undefined {
  let found: KeyedBool | undefined;
  for (const key of [pair.ours, pair.reloader]) {
    const raw = ann[key];
    if (raw === undefined || raw.trim() === '') continue;
    const v = parseBool(raw.trim(), style);
    if (typeof v === 'string') {
      problems.add(`${key}${where(source)}: ${v}`);
      continue;
    }
    if (found && found.value !== v) {
      problems.add(`${found.key}=${found.value} and ${key}=${v} disagree${where(source)}; set one of them`);
      continue;
    }
    found ??= { key, value: v };
  }
  return found;
}

/**
 * Reads a name list. A bad entry is a problem (the workload is skipped), or, with `skipEntry`, a
 * warning: the entry alone is left out and the others are read.
 */
function readList(
  ann: Annotations,
  key: string,
  mode: 'pattern' | 'exact',
  problems: Set<string>,
  source: string,
  skipEntry?: Set<string>,
): KeyedList | undefined {
  const raw = ann[key];
  if (raw === undefined) return undefined;
  const { list, problems: bad } = compileNameList(splitList(raw), mode);
  for (const p of bad) {
    if (skipEntry) skipEntry.add(`${key}${where(source)}: ${p}; that entry is left out, the others are read`);
    else problems.add(`${key}${where(source)}: ${p}`);
  }
  return list.entries.length > 0 ? { key, list } : undefined;
}

// --- workload policy ------------------------------------------------------------------------------

// The keys whose presence on the metadata stops Reloader from reading the pod template.
const optInKeys = (kind: ConfigKind): string[] => {
  const t = KEYS.typed[kind];
  return [KEYS.auto, KEYS.search, t.auto, t.reload].flatMap((p) => [p.ours, p.reloader]);
};

const hasAny = (ann: Annotations, keys: readonly string[]) => keys.some((k) => Object.hasOwn(ann, k));

function kindRules(
  kind: ConfigKind,
  meta: Annotations,
  template: Annotations,
  problems: Set<string>,
  warnings: Set<string>,
): KindRules {
  const keys = KEYS.typed[kind];
  // Reloader: if the workload metadata has none of the opt-in keys for this kind (presence, even
  // empty), every opt-in key is read from the pod template instead. Decided per kind.
  const source =
    hasAny(meta, optInKeys(kind)) || !hasAny(template, optInKeys(kind)) ? 'metadata' : 'pod template';
  const sel = source === 'metadata' ? meta : template;
  // A bad entry in a reload list leaves out that entry only, as Reloader skips it (its regex does
  // not compile) and reads the rest; the workload still reloads on the others. An exclude list stays
  // strict: leaving out a bad exclude entry would reload what its author meant to exclude.
  const named = [
    readList(sel, keys.reload.ours, 'pattern', problems, source, warnings),
    readList(sel, keys.reload.reloader, 'pattern', problems, source, warnings),
  ];
  // Reloader reads its exclude lists from the metadata only; the reimplementation in its
  // internal/pkg/reload reads them from wherever the opt-in keys are. Honour both.
  const exclude = [
    readList(meta, keys.exclude.ours, 'pattern', problems, 'metadata'),
    readList(meta, keys.exclude.reloader, 'exact', problems, 'metadata'),
  ];
  if (source === 'pod template') {
    exclude.push(
      readList(template, keys.exclude.ours, 'pattern', problems, source),
      readList(template, keys.exclude.reloader, 'exact', problems, source),
    );
  }
  return {
    source,
    named: named.filter((x) => x !== undefined),
    exclude: exclude.filter((x) => x !== undefined),
    auto: readBool(sel, KEYS.auto, 'go', problems, source),
    typedAuto: readBool(sel, keys.auto, 'go', problems, source),
    search: readBool(sel, KEYS.search, 'strict', problems, source),
  };
}

function readStrategy(
  meta: Annotations,
  template: Annotations,
  opts: ParseOptions,
  problems: Set<string>,
  warnings: Set<string>,
): { strategy: ReloadStrategy; source: string } {
  let ours: { strategy: ReloadStrategy; source: string } | undefined;
  for (const [ann, source] of [
    [meta, 'metadata'],
    [template, 'pod template'],
  ] as const) {
    const raw = ann[KEYS.strategy]?.trim();
    if (raw === undefined || raw === '') continue;
    if ((RELOAD_STRATEGIES as readonly string[]).includes(raw)) {
      ours = { strategy: raw as ReloadStrategy, source: `${KEYS.strategy}${where(source)}` };
    } else {
      problems.add(
        `${KEYS.strategy}${where(source)}: ${JSON.stringify(raw)} is not a strategy; use ${RELOAD_STRATEGIES.join(', ')}`,
      );
    }
    break;
  }

  // reloader.stakater.com/rollout-strategy: read by Reloader on an Argo Rollout's metadata only.
  // "restart" sets spec.restartAt (our restart strategy does the same for Rollouts); "rollout"
  // changes the pod template so the Rollout runs its steps, which is our annotate strategy.
  let reloaders: ReloadStrategy | undefined;
  const rs = meta[KEYS.rolloutStrategy]?.trim();
  if (template[KEYS.rolloutStrategy] !== undefined) {
    warnings.add(
      `${KEYS.rolloutStrategy} on the pod template is not read; Reloader reads it on the Rollout's metadata`,
    );
  }
  if (rs !== undefined && rs !== '') {
    if (opts.kind !== 'Rollout') {
      warnings.add(
        `${KEYS.rolloutStrategy} only applies to Argo Rollouts (as in Reloader); it is ignored on a ${opts.kind}`,
      );
    } else if (rs === 'restart') reloaders = 'restart';
    else if (rs === 'rollout') reloaders = 'annotate';
    else
      problems.add(
        `${KEYS.rolloutStrategy}: ${JSON.stringify(rs)} is not a rollout strategy; use "restart" or "rollout"`,
      );
  }

  if (ours) {
    if (reloaders !== undefined && reloaders !== ours.strategy) {
      warnings.add(`${ours.source} overrides ${KEYS.rolloutStrategy}=${rs}`);
    }
    return ours;
  }
  if (reloaders !== undefined) return { strategy: reloaders, source: KEYS.rolloutStrategy };
  return { strategy: opts.defaultStrategy, source: 'default' };
}

function readDebounce(meta: Annotations, template: Annotations, problems: Set<string>): number | undefined {
  for (const [ann, source] of [
    [meta, 'metadata'],
    [template, 'pod template'],
  ] as const) {
    const raw = ann[KEYS.debounce]?.trim();
    if (raw === undefined || raw === '') continue;
    const ms = parseDuration(raw);
    if (ms === undefined) {
      problems.add(
        `${KEYS.debounce}${where(source)}: ${JSON.stringify(raw)} is not a duration; write e.g. 500ms, 30s, 2m or 1h30m`,
      );
      return undefined;
    }
    if (ms > MAX_DEBOUNCE_MS) {
      problems.add(`${KEYS.debounce}${where(source)}: ${JSON.stringify(raw)} is longer than the 24h limit`);
      return undefined;
    }
    return ms;
  }
  return undefined;
}

/** The most a priority may be, either way: far beyond any useful ordering, and exact as a number. */
const MAX_PRIORITY = 1_000_000;

/** Progressive reloads: the workload's place in a change's waves, and whether it takes part. */
function readProgressive(
  meta: Annotations,
  template: Annotations,
  problems: Set<string>,
): { priority: number; progressive: boolean } {
  let priority = 0;
  let progressive = true;
  for (const [ann, source] of [
    [template, 'pod template'],
    [meta, 'metadata'],
  ] as const) {
    const p = ann[KEYS.reloadPriority]?.trim();
    if (p !== undefined && p !== '') {
      if (!/^-?\d{1,7}$/.test(p) || Math.abs(Number(p)) > MAX_PRIORITY)
        problems.add(
          `${KEYS.reloadPriority}${where(source)}: ${JSON.stringify(p)} is not a whole number between -${MAX_PRIORITY} and ${MAX_PRIORITY}`,
        );
      else priority = Number(p);
    }
    const o = ann[KEYS.progressive]?.trim();
    if (o !== undefined && o !== '') {
      if (o !== 'true' && o !== 'false')
        problems.add(`${KEYS.progressive}${where(source)}: ${JSON.stringify(o)} is not "true" or "false"`);
      else progressive = o === 'true';
    }
  }
  return { priority, progressive };
}

/**
 * Reloader pauses a Deployment (spec.paused) after a reload for `pause-period`, so that changes in that
 * time roll out together when it resumes it. Pausing would write the workload object, so we keep the
 * meaning and not the mechanism: the first change reloads at once, later ones wait until the period
 * has passed since that reload ended, then reload once. Read, as Reloader does, on a Deployment's
 * metadata only.
 */
function readPausePeriod(
  meta: Annotations,
  template: Annotations,
  opts: ParseOptions,
  problems: Set<string>,
  warnings: Set<string>,
  notes: Set<string>,
): number | undefined {
  const key = KEYS.pausePeriod;
  if (template[key] !== undefined) {
    warnings.add(`${key} on the pod template is not read; Reloader reads it on the Deployment's metadata`);
  }
  const raw = meta[key]?.trim();
  if (raw === undefined || raw === '') return undefined;
  if (opts.kind !== 'Deployment') {
    warnings.add(`${key} only applies to Deployments (as in Reloader); it is ignored on a ${opts.kind}`);
    return undefined;
  }
  const ms = parseDuration(raw);
  if (ms === undefined) {
    problems.add(`${key}: ${JSON.stringify(raw)} is not a duration; write e.g. 30s, 5m or 1h`);
    return undefined;
  }
  if (ms > MAX_DEBOUNCE_MS) {
    problems.add(`${key}: ${JSON.stringify(raw)} is longer than the 24h limit`);
    return undefined;
  }
  notes.add(
    `${key}=${raw} is read as a batch window: a change waits ${formatDuration(ms)}, and every ` +
      'change in that time reloads once when it ends; the Deployment is never paused',
  );
  return ms;
}

function readWindows(
  meta: Annotations,
  template: Annotations,
  problems: Set<string>,
): RestartWindows | undefined {
  for (const [ann, source] of [
    [meta, 'metadata'],
    [template, 'pod template'],
  ] as const) {
    const raw = ann[KEYS.restartWindow];
    if (raw === undefined || raw.trim() === '') continue;
    const parsed = parseRestartWindows(raw);
    if ('problem' in parsed) {
      problems.add(`${KEYS.restartWindow}${where(source)}: ${parsed.problem}`);
      return undefined;
    }
    return parsed.windows;
  }
  return undefined;
}

const OUR_DOMAIN = /^([a-z0-9-]+\.)*gitops-reloader\.io\//;
const RELOADER_DOMAIN = /^([a-z0-9-]+\.)*reloader\.stakater\.com\//;

/** Reports every key in our or Reloader's domain that this policy does not act on. */
function reportUnread(
  meta: Annotations,
  template: Annotations,
  rules: Record<ConfigKind, KindRules>,
  warnings: Set<string>,
  csi: boolean,
): void {
  const configSide: readonly string[] = [
    KEYS.ignore.ours,
    KEYS.ignore.reloader,
    KEYS.match.ours,
    KEYS.match.reloader,
    KEYS.progressiveResume,
  ];
  const always: readonly string[] = [
    KEYS.strategy,
    KEYS.debounce,
    KEYS.restartWindow,
    KEYS.reloadPriority,
    KEYS.progressive,
    KEYS.pausePeriod,
    KEYS.rolloutStrategy,
    KEYS.configHash,
    KEYS.reloadedFor,
    KEYS.reloadCutoff,
    KEYS.reloadRequestedAt,
    KEYS.gitValuesPath,
  ];
  for (const [ann, source] of [
    [meta, 'metadata'],
    [template, 'pod template'],
  ] as const) {
    for (const key of Object.keys(ann)) {
      if (!OUR_DOMAIN.test(key) && !RELOADER_DOMAIN.test(key)) continue;
      if (always.includes(key)) continue;
      const unsupported = UNSUPPORTED[key];
      if (unsupported) {
        warnings.add(`${key}${where(source)} ${unsupported.message}`);
        continue;
      }
      if (configSide.includes(key)) {
        warnings.add(
          `${key}${where(source)} belongs on the ConfigMap or Secret, not on the workload; it is ignored here`,
        );
        continue;
      }
      // Opt-in and exclude keys: read if this source is the one chosen for a kind they apply to.
      const kinds = CONFIG_KINDS.filter((k) => isWorkloadKey(key, k));
      if (!csi && kinds.length === 1 && kinds[0] === 'SecretProviderClass') {
        warnings.add(
          `${key}${where(source)} is not acted on: CSI SecretProviderClasses are watched only with --enable-csi-integration`,
        );
        continue;
      }
      if (kinds.length > 0) {
        const read = kinds.some(
          (k) => rules[k].source === source || (source === 'metadata' && isExcludeKey(key)),
        );
        if (!read) {
          warnings.add(
            `${key} on the pod template is not read: the workload metadata carries reload annotations, ` +
              'and (as in Reloader) the pod template is read only when it has none',
          );
        }
        continue;
      }
      warnings.add(
        OUR_DOMAIN.test(key)
          ? `${key}${where(source)} is not a gitops-reloader annotation; check the spelling`
          : `${key}${where(source)} is not a Reloader annotation gitops-reloader knows; it is ignored`,
      );
    }
  }
}

const isExcludeKey = (key: string) =>
  Object.values(KEYS.typed).some((t) => key === t.exclude.ours || key === t.exclude.reloader);

const isWorkloadKey = (key: string, kind: ConfigKind) => {
  const t = KEYS.typed[kind];
  return optInKeys(kind).includes(key) || key === t.exclude.ours || key === t.exclude.reloader;
};

/**
 * Reads a workload's reload policy from its metadata annotations and its pod template's
 * annotations (for a CronJob, spec.jobTemplate.spec.template). Never throws: bad values are
 * `problems` (skip the workload), keys not acted on are `warnings`.
 */
export function parseWorkloadPolicy(
  meta: Annotations | undefined,
  template: Annotations | undefined,
  opts: ParseOptions,
): ParsedWorkloadPolicy {
  const m = meta ?? {};
  const t = template ?? {};
  const problems = new Set<string>();
  const warnings = new Set<string>();
  const notes = new Set<string>();
  const rules = {
    ConfigMap: kindRules('ConfigMap', m, t, problems, warnings),
    Secret: kindRules('Secret', m, t, problems, warnings),
    SecretProviderClass: kindRules('SecretProviderClass', m, t, problems, warnings),
  };
  const { strategy, source } = readStrategy(m, t, opts, problems, warnings);
  const debounceMs = readDebounce(m, t, problems);
  const batchWindowMs = readPausePeriod(m, t, opts, problems, warnings, notes);
  const windows = readWindows(m, t, problems);
  const { priority, progressive } = readProgressive(m, t, problems);
  reportUnread(m, t, rules, warnings, opts.csi === true);
  return {
    policy: {
      configMaps: rules.ConfigMap,
      secrets: rules.Secret,
      providerClasses: rules.SecretProviderClass,
      strategy,
      strategySource: source,
      debounceMs,
      batchWindowMs,
      windows,
      priority,
      progressive,
    },
    problems: [...problems],
    warnings: [...warnings],
    notes: [...notes],
  };
}

// --- decision -------------------------------------------------------------------------------------

/** Compiles the global options. Problems name the option; the caller stops start-up on any. */
export function compileGlobals(opts: {
  autoReloadAll: boolean;
  ignoreConfigMaps: readonly string[];
  ignoreSecrets: readonly string[];
}): { globals: AnnotationGlobals; problems: string[] } {
  const cm = compileNameList(opts.ignoreConfigMaps);
  const sec = compileNameList(opts.ignoreSecrets);
  return {
    globals: { autoReloadAll: opts.autoReloadAll, ignoreConfigMaps: cm.list, ignoreSecrets: sec.list },
    problems: [
      ...cm.problems.map((p) => `ignoreConfigMaps: ${p}`),
      ...sec.problems.map((p) => `ignoreSecrets: ${p}`),
    ],
  };
}

export const DEFAULT_GLOBALS: AnnotationGlobals = {
  autoReloadAll: false,
  ignoreConfigMaps: EMPTY_NAME_LIST,
  ignoreSecrets: EMPTY_NAME_LIST,
};

/**
 * Whether a change to `config` reloads the workload, in Reloader's order: ignore, exclude, named,
 * search/match, auto, auto-reload-all. Named entries reload even a config the pod template does not
 * reference (Reloader does the same); search/match and every auto rule need a reference.
 * Call only with a policy whose parse had no problems.
 */
export function decide(policy: WorkloadPolicy, config: ConfigChange, globals: AnnotationGlobals): Decision {
  // Reloader ignores a config only when its ignore annotation is exactly "true" (pkg/common/common.go
  // compares the string): "True" or "yes" leave it watched, and a migrated config keeps reloading as
  // it did. The same here, with the value named on the Event when it is what let the reload through.
  const ann = config.annotations ?? {};
  const odd: string[] = [KEYS.ignore.ours, KEYS.ignore.reloader].filter((k) => {
    const v = ann[k]?.trim();
    return v !== undefined && v !== '' && v !== 'true' && v !== 'false';
  });
  if (odd.length === 0) return decideRules(policy, config, globals);
  const rest = Object.fromEntries(Object.entries(ann).filter(([k]) => !odd.includes(k)));
  const d = decideRules(policy, { ...config, annotations: rest }, globals);
  if (!d.reload || d.problem) return d;
  const values = odd.map((k) => `${k}: ${JSON.stringify(ann[k])}`).join(', ');
  return {
    ...d,
    problem: `${config.ref.kind} ${config.ref.name}: ${values} is not "true", so the ${config.ref.kind} is not ignored (as in Reloader); write "true" to ignore it`,
  };
}

function decideRules(policy: WorkloadPolicy, config: ConfigChange, globals: AnnotationGlobals): Decision {
  const { kind, name } = config.ref;
  const rules = rulesFor(policy, kind);
  const on = where(rules.source);
  const ann = config.annotations ?? {};

  // The global ignore lists name ConfigMaps and Secrets; Reloader has none for SecretProviderClasses.
  const globalList =
    kind === 'ConfigMap'
      ? globals.ignoreConfigMaps
      : kind === 'Secret'
        ? globals.ignoreSecrets
        : EMPTY_NAME_LIST;
  const globalHit = matchName(globalList, name);
  if (globalHit) {
    const opt = kind === 'ConfigMap' ? 'ignoreConfigMaps' : 'ignoreSecrets';
    return {
      reload: false,
      rule: 'global-ignore',
      reason: `ignored by the global ${opt} option (entry ${JSON.stringify(globalHit.text)})`,
    };
  }

  const configProblems = new Set<string>();
  const ignore = readBool(ann, KEYS.ignore, 'strict', configProblems, 'metadata');
  if (configProblems.size > 0) return invalid(config.ref, configProblems);
  if (ignore?.value) {
    return { reload: false, rule: 'ignore', reason: `ignored by ${ignore.key} on the ${kind}` };
  }

  for (const { key, list } of rules.exclude) {
    if (matchName(list, name)) {
      return { reload: false, rule: 'exclude', reason: `excluded by ${key} on the workload` };
    }
  }

  for (const { key, list } of rules.named) {
    const hit = matchName(list, name);
    if (hit) {
      const entry = hit.text === name ? '' : ` (entry ${JSON.stringify(hit.text)})`;
      const ref = config.referenced
        ? ''
        : '; named configs reload even when the pod template does not use them';
      return { reload: true, rule: 'named', reason: `named in ${key}${on}${entry}${ref}` };
    }
  }

  let searchMiss: string | undefined;
  if (rules.search?.value) {
    const match = readBool(ann, KEYS.match, 'strict', configProblems, 'metadata');
    if (configProblems.size > 0) return invalid(config.ref, configProblems);
    if (match?.value) {
      const why = `${rules.search.key}${on} and ${match.key} on the ${kind}`;
      if (config.referenced) return { reload: true, rule: 'search', reason: `matched by ${why}` };
      searchMiss = `matched by ${why}, but the pod template does not use this ${kind}`;
    }
  }

  const auto = [rules.auto, rules.typedAuto].find((b) => b?.value === true);
  if (auto) {
    return referenced(config, 'auto', `auto-reload by ${auto.key}${on}`, kind);
  }
  if (globals.autoReloadAll && rules.auto === undefined && rules.typedAuto === undefined) {
    return referenced(config, 'auto-all', 'auto-reload by the global autoReloadAll option', kind);
  }
  if (searchMiss) return { reload: false, rule: 'not-referenced', reason: searchMiss };

  const optOut = [rules.auto, rules.typedAuto].find((b) => b?.value === false);
  return {
    reload: false,
    rule: 'not-opted-in',
    reason: optOut ? `not opted in (${optOut.key}=false${on})` : `not opted in`,
  };
}

function referenced(
  config: ConfigChange,
  rule: 'auto' | 'auto-all',
  why: string,
  kind: ConfigKind,
): Decision {
  if (config.referenced) return { reload: true, rule, reason: why };
  return {
    reload: false,
    rule: 'not-referenced',
    reason: `${why}, but the pod template does not use this ${kind}`,
  };
}

function invalid(ref: ConfigRef, problems: Set<string>): Decision {
  const problem = `${ref.kind} ${ref.name}: ${[...problems].join('; ')}`;
  return { reload: false, rule: 'invalid', reason: `not reloaded, bad annotation on ${problem}`, problem };
}
