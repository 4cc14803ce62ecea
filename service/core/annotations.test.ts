import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  type AnnotationGlobals,
  type Annotations,
  compileGlobals,
  DEFAULT_GLOBALS,
  type Decision,
  type DecisionRule,
  decide,
  KEYS,
  type ParseOptions,
  parseWorkloadPolicy,
  type WorkloadPolicy,
} from './annotations.ts';
import {
  checkPattern,
  compileNameList,
  MAX_ENTRY_LENGTH,
  MAX_UNBOUNDED_REPEATS,
  matchName,
  splitList,
} from './name-pattern.ts';
import { extractReferences, type PodSpecLike } from './references.ts';
import type { ConfigKind, ReloadStrategy, WorkloadKind } from './types.ts';

const deployment: ParseOptions = { kind: 'Deployment', defaultStrategy: 'restart' };

function parse(meta?: Annotations, template?: Annotations, opts: ParseOptions = deployment) {
  return parseWorkloadPolicy(meta, template, opts);
}

/** Parses, requires no problems, and returns the policy. */
function policyOf(
  meta?: Annotations,
  template?: Annotations,
  opts: ParseOptions = deployment,
): WorkloadPolicy {
  const { policy, problems } = parse(meta, template, opts);
  expect(problems).toEqual([]);
  return policy;
}

interface Change {
  kind?: ConfigKind;
  name: string;
  annotations?: Annotations;
  referenced?: boolean;
}

function check(policy: WorkloadPolicy, c: Change, globals: AnnotationGlobals = DEFAULT_GLOBALS): Decision {
  return decide(
    policy,
    {
      ref: { kind: c.kind ?? 'ConfigMap', namespace: 'ns', name: c.name },
      annotations: c.annotations,
      referenced: c.referenced ?? true,
    },
    globals,
  );
}

const globalsWith = (
  o: Partial<{ autoReloadAll: boolean; ignoreConfigMaps: string[]; ignoreSecrets: string[] }>,
) => {
  const { globals, problems } = compileGlobals({
    autoReloadAll: o.autoReloadAll ?? false,
    ignoreConfigMaps: o.ignoreConfigMaps ?? [],
    ignoreSecrets: o.ignoreSecrets ?? [],
  });
  expect(problems).toEqual([]);
  return globals;
};

const families = [
  ['ours', 'ours'],
  ['Reloader', 'reloader'],
] as const;

describe('auto', () => {
  describe.each(families)('%s key', (_, fam) => {
    it('reloads for a referenced ConfigMap and Secret', () => {
      const p = policyOf({ [KEYS.auto[fam]]: 'true' });
      expect(check(p, { name: 'app-config' })).toMatchObject({ reload: true, rule: 'auto' });
      expect(check(p, { kind: 'Secret', name: 'app-secret' })).toMatchObject({ reload: true, rule: 'auto' });
      expect(check(p, { name: 'app-config' }).reason).toBe(`auto-reload by ${KEYS.auto[fam]}`);
    });

    it('does not reload for a config the pod template does not use', () => {
      const d = check(policyOf({ [KEYS.auto[fam]]: 'true' }), { name: 'other', referenced: false });
      expect(d).toMatchObject({ reload: false, rule: 'not-referenced' });
      expect(d.reason).toContain('does not use this ConfigMap');
    });

    it('"false" does not opt in', () => {
      const d = check(policyOf({ [KEYS.auto[fam]]: 'false' }), { name: 'app-config' });
      expect(d).toEqual({
        reload: false,
        rule: 'not-opted-in',
        reason: `not opted in (${KEYS.auto[fam]}=false)`,
      });
    });
  });

  it.each(['1', 't', 'T', 'TRUE', 'true', 'True'])('accepts Go ParseBool true spelling %j', (v) => {
    expect(check(policyOf({ 'reloader.stakater.com/auto': v }), { name: 'c' }).reload).toBe(true);
  });

  it.each(['0', 'f', 'F', 'FALSE', 'false', 'False'])('accepts Go ParseBool false spelling %j', (v) => {
    expect(check(policyOf({ 'gitops-reloader.io/auto': v }), { name: 'c' }).reload).toBe(false);
  });

  it('both families agreeing is fine, the first key is reported', () => {
    const p = policyOf({ 'gitops-reloader.io/auto': 'true', 'reloader.stakater.com/auto': 'True' });
    expect(check(p, { name: 'c' }).reason).toBe('auto-reload by gitops-reloader.io/auto');
  });

  it('an empty value counts as unset', () => {
    const p = policyOf({ 'reloader.stakater.com/auto': '' });
    expect(p.configMaps.auto).toBeUndefined();
    expect(check(p, { name: 'c' }).rule).toBe('not-opted-in');
  });
});

describe('typed auto', () => {
  describe.each(families)('%s keys', (_, fam) => {
    it.each(['ConfigMap', 'Secret'] as const)('%s auto reloads only that kind', (kind) => {
      const other: ConfigKind = kind === 'ConfigMap' ? 'Secret' : 'ConfigMap';
      const p = policyOf({ [KEYS.typed[kind].auto[fam]]: 'true' });
      expect(check(p, { kind, name: 'x' })).toMatchObject({ reload: true, rule: 'auto' });
      expect(check(p, { kind, name: 'x' }).reason).toBe(`auto-reload by ${KEYS.typed[kind].auto[fam]}`);
      expect(check(p, { kind: other, name: 'x' })).toMatchObject({ reload: false, rule: 'not-opted-in' });
    });
  });

  it('either auto or typed auto being true is enough', () => {
    const p = policyOf({
      'reloader.stakater.com/auto': 'false',
      'configmap.reloader.stakater.com/auto': 'true',
    });
    expect(check(p, { name: 'c' })).toMatchObject({ reload: true, rule: 'auto' });
    expect(check(p, { kind: 'Secret', name: 's' })).toMatchObject({ reload: false });
  });
});

describe('named reload lists', () => {
  describe.each(families)('%s keys', (_, fam) => {
    it.each(['ConfigMap', 'Secret'] as const)(
      '%s: an exact name reloads, even when not referenced',
      (kind) => {
        const key = KEYS.typed[kind].reload[fam];
        const p = policyOf({ [key]: 'app-config' });
        const d = check(p, { kind, name: 'app-config', referenced: false });
        expect(d).toMatchObject({ reload: true, rule: 'named' });
        expect(d.reason).toBe(
          `named in ${key}; named configs reload even when the pod template does not use them`,
        );
        expect(check(p, { kind, name: 'app-config' }).reason).toBe(`named in ${key}`);
      },
    );
  });

  it('is per kind: a ConfigMap list does not name a Secret of the same name', () => {
    const p = policyOf({ 'configmap.reloader.stakater.com/reload': 'shared' });
    expect(check(p, { kind: 'Secret', name: 'shared' }).reload).toBe(false);
  });

  it('trims entries and ignores empty ones', () => {
    const p = policyOf({ 'configmap.gitops-reloader.io/reload': ' a ,, b ,' });
    expect(check(p, { name: 'a' }).reload).toBe(true);
    expect(check(p, { name: 'b' }).reload).toBe(true);
    expect(check(p, { name: '' }).reload).toBe(false);
  });

  it('combines both families', () => {
    const p = policyOf({
      'configmap.gitops-reloader.io/reload': 'a',
      'configmap.reloader.stakater.com/reload': 'b',
    });
    expect(check(p, { name: 'a' }).reason).toBe('named in configmap.gitops-reloader.io/reload');
    expect(check(p, { name: 'b' }).reason).toBe('named in configmap.reloader.stakater.com/reload');
  });

  describe('regex entries are anchored to the whole name', () => {
    const p = policyOf({ 'configmap.reloader.stakater.com/reload': 'app-config, tls-.*, a|b, v[0-9]+' });
    it.each([
      ['app-config', true],
      ['my-app-config-2', false],
      ['app-config-2', false],
      ['tls-eu', true],
      ['my-tls-eu', false],
      ['a', true],
      ['b', true],
      ['a-suffix', false],
      ['prefix-b', false],
      ['v12', true],
      ['v12x', false],
    ])('%s → %s', (name, reload) => {
      expect(check(p, { name }).reload).toBe(reload);
    });

    it('names the regex entry that matched', () => {
      expect(check(p, { name: 'tls-eu' }).reason).toBe(
        'named in configmap.reloader.stakater.com/reload (entry "tls-.*")',
      );
    });
  });
});

describe('exclude lists', () => {
  it.each(['ConfigMap', 'Secret'] as const)(
    '%s: Reloader key excludes exact names and beats auto',
    (kind) => {
      const key = KEYS.typed[kind].exclude.reloader;
      const p = policyOf({ 'reloader.stakater.com/auto': 'true', [key]: 'big, huge' });
      expect(check(p, { kind, name: 'big' })).toEqual({
        reload: false,
        rule: 'exclude',
        reason: `excluded by ${key} on the workload`,
      });
      expect(check(p, { kind, name: 'small' }).reload).toBe(true);
    },
  );

  it("Reloader's exclude lists are exact names, not regexes (as in Reloader)", () => {
    const p = policyOf({
      'reloader.stakater.com/auto': 'true',
      'configmaps.exclude.reloader.stakater.com/reload': 'app-.*',
    });
    expect(check(p, { name: 'app-x' }).reload).toBe(true);
    expect(check(p, { name: 'app-.*' }).reload).toBe(false);
  });

  it.each(['ConfigMap', 'Secret'] as const)('%s: our exclude key takes name patterns', (kind) => {
    const key = KEYS.typed[kind].exclude.ours;
    const p = policyOf({ 'gitops-reloader.io/auto': 'true', [key]: 'cache-.*' });
    expect(check(p, { kind, name: 'cache-1' }).rule).toBe('exclude');
    expect(check(p, { kind, name: 'my-cache-1' }).rule).toBe('auto');
  });

  it('beats a named list', () => {
    const p = policyOf({
      'configmap.reloader.stakater.com/reload': 'x',
      'configmaps.exclude.reloader.stakater.com/reload': 'x',
    });
    expect(check(p, { name: 'x' }).rule).toBe('exclude');
  });

  it('a ConfigMap exclude list does not exclude a Secret', () => {
    const p = policyOf({
      'reloader.stakater.com/auto': 'true',
      'configmaps.exclude.reloader.stakater.com/reload': 'x',
    });
    expect(check(p, { kind: 'Secret', name: 'x' }).reload).toBe(true);
  });
});

describe('search and match', () => {
  const match = (fam: 'ours' | 'reloader', v = 'true') => ({ [KEYS.match[fam]]: v });

  describe.each(families)('%s search key', (_, fam) => {
    it.each(families)('with the %s match key reloads a referenced config', (__, mfam) => {
      const p = policyOf({ [KEYS.search[fam]]: 'true' });
      const d = check(p, { kind: 'Secret', name: 's', annotations: match(mfam) });
      expect(d).toEqual({
        reload: true,
        rule: 'search',
        reason: `matched by ${KEYS.search[fam]} and ${KEYS.match[mfam]} on the Secret`,
      });
    });
  });

  it('needs the config to be referenced', () => {
    const p = policyOf({ 'reloader.stakater.com/search': 'true' });
    const d = check(p, { name: 'c', annotations: match('reloader'), referenced: false });
    expect(d.reload).toBe(false);
    expect(d.rule).toBe('not-referenced');
  });

  it('needs match on the config', () => {
    const p = policyOf({ 'reloader.stakater.com/search': 'true' });
    expect(check(p, { name: 'c' }).rule).toBe('not-opted-in');
    expect(check(p, { name: 'c', annotations: match('ours', 'false') }).rule).toBe('not-opted-in');
  });

  it('match on a config does nothing without search on the workload', () => {
    expect(check(policyOf({}), { name: 'c', annotations: match('ours') }).rule).toBe('not-opted-in');
  });

  it('with auto as well, a config without match still reloads through auto (auto wins)', () => {
    const p = policyOf({ 'reloader.stakater.com/search': 'true', 'reloader.stakater.com/auto': 'true' });
    expect(check(p, { name: 'c' }).rule).toBe('auto');
    expect(check(p, { name: 'c', annotations: match('reloader') }).rule).toBe('search');
  });
});

describe('ignore on the config', () => {
  it.each(families)('%s key beats a named list', (_, fam) => {
    const p = policyOf({ 'configmap.reloader.stakater.com/reload': 'c' });
    expect(check(p, { name: 'c', annotations: { [KEYS.ignore[fam]]: 'true' } })).toEqual({
      reload: false,
      rule: 'ignore',
      reason: `ignored by ${KEYS.ignore[fam]} on the ConfigMap`,
    });
  });

  it('"false" does not ignore', () => {
    const p = policyOf({ 'reloader.stakater.com/auto': 'true' });
    expect(check(p, { name: 'c', annotations: { 'gitops-reloader.io/ignore': 'false' } }).reload).toBe(true);
  });
});

describe('global options', () => {
  it('ignoreConfigMaps beats everything, with anchored patterns', () => {
    const g = globalsWith({ ignoreConfigMaps: ['kube-root-ca.crt', 'istio-.*'] });
    const p = policyOf({ 'configmap.reloader.stakater.com/reload': '.*' });
    expect(check(p, { name: 'kube-root-ca.crt' }, g)).toEqual({
      reload: false,
      rule: 'global-ignore',
      reason: 'ignored by the global ignoreConfigMaps option (entry "kube-root-ca.crt")',
    });
    expect(check(p, { name: 'istio-ca-root-cert' }, g).rule).toBe('global-ignore');
    expect(check(p, { name: 'my-istio-x' }, g).rule).toBe('named');
    expect(check(p, { kind: 'Secret', name: 'kube-root-ca.crt' }, g).rule).toBe('not-opted-in');
  });

  it('ignoreSecrets applies to Secrets only', () => {
    const g = globalsWith({ ignoreSecrets: ['sh\\.helm\\.release\\..*'] });
    const p = policyOf({ 'reloader.stakater.com/auto': 'true' });
    expect(check(p, { kind: 'Secret', name: 'sh.helm.release.v1.app.v3' }, g).rule).toBe('global-ignore');
    expect(check(p, { name: 'sh.helm.release.v1.app.v3' }, g).rule).toBe('auto');
  });

  describe('autoReloadAll', () => {
    const g = globalsWith({ autoReloadAll: true });

    it('reloads a workload without annotations for referenced configs only', () => {
      expect(check(policyOf({}), { name: 'c' }, g)).toEqual({
        reload: true,
        rule: 'auto-all',
        reason: 'auto-reload by the global autoReloadAll option',
      });
      expect(check(policyOf({}), { name: 'c', referenced: false }, g).rule).toBe('not-referenced');
    });

    it.each(families)('%s auto: "false" opts out', (_, fam) => {
      expect(check(policyOf({ [KEYS.auto[fam]]: 'false' }), { name: 'c' }, g).rule).toBe('not-opted-in');
    });

    it('a typed auto "false" opts out for that kind only', () => {
      const p = policyOf({ 'configmap.reloader.stakater.com/auto': 'false' });
      expect(check(p, { name: 'c' }, g).reload).toBe(false);
      expect(check(p, { kind: 'Secret', name: 's' }, g).rule).toBe('auto-all');
    });

    it('still applies to a search workload whose config has no match (as in Reloader)', () => {
      expect(check(policyOf({ 'reloader.stakater.com/search': 'true' }), { name: 'c' }, g).rule).toBe(
        'auto-all',
      );
    });

    it('auto: "false" does not stop a named list', () => {
      const p = policyOf({
        'reloader.stakater.com/auto': 'false',
        'configmap.reloader.stakater.com/reload': 'c',
      });
      expect(check(p, { name: 'c', referenced: false }, g).rule).toBe('named');
    });
  });

  it('reports bad global patterns with the option name', () => {
    const { problems } = compileGlobals({
      autoReloadAll: false,
      ignoreConfigMaps: ['('],
      ignoreSecrets: ['(a+)+'],
    });
    expect(problems).toHaveLength(2);
    expect(problems[0]).toMatch(/^ignoreConfigMaps: entry "\(" is not a valid regex/);
    expect(problems[1]).toMatch(/^ignoreSecrets: entry "\(a\+\)\+" repeats a group/);
  });
});

describe('precedence (Reloader order: ignore, exclude, named, search/match, auto)', () => {
  const everything = {
    'reloader.stakater.com/auto': 'true',
    'reloader.stakater.com/search': 'true',
    'configmap.reloader.stakater.com/reload': 'c',
    'configmaps.exclude.reloader.stakater.com/reload': 'c',
  };
  const g = globalsWith({ autoReloadAll: true, ignoreConfigMaps: ['c'] });
  const matchAndIgnore = { 'reloader.stakater.com/match': 'true', 'reloader.stakater.com/ignore': 'true' };

  it('peels off one rule at a time', () => {
    const steps: [Annotations, Annotations, AnnotationGlobals, DecisionRule][] = [
      [everything, matchAndIgnore, g, 'global-ignore'],
      [everything, matchAndIgnore, DEFAULT_GLOBALS, 'ignore'],
      [everything, { 'reloader.stakater.com/match': 'true' }, DEFAULT_GLOBALS, 'exclude'],
      [
        { ...everything, 'configmaps.exclude.reloader.stakater.com/reload': '' },
        { 'reloader.stakater.com/match': 'true' },
        DEFAULT_GLOBALS,
        'named',
      ],
      [
        { 'reloader.stakater.com/auto': 'true', 'reloader.stakater.com/search': 'true' },
        { 'reloader.stakater.com/match': 'true' },
        DEFAULT_GLOBALS,
        'search',
      ],
      [{ 'reloader.stakater.com/auto': 'true' }, {}, DEFAULT_GLOBALS, 'auto'],
      [{}, {}, globalsWith({ autoReloadAll: true }), 'auto-all'],
      [{}, {}, DEFAULT_GLOBALS, 'not-opted-in'],
    ];
    for (const [meta, config, globals, rule] of steps) {
      expect(check(policyOf(meta), { name: 'c', annotations: config }, globals).rule).toBe(rule);
    }
  });

  it('named is decided before auto, so an unreferenced named config still reloads with auto on', () => {
    const p = policyOf({
      'reloader.stakater.com/auto': 'true',
      'configmap.reloader.stakater.com/reload': 'c',
    });
    expect(check(p, { name: 'c', referenced: false }).rule).toBe('named');
  });
});

describe('metadata versus pod template (Reloader fallback)', () => {
  it('reads the pod template when the metadata has no opt-in key', () => {
    const p = policyOf({ unrelated: 'x' }, { 'reloader.stakater.com/auto': 'true' });
    expect(p.configMaps.source).toBe('pod template');
    expect(check(p, { name: 'c' }).reason).toBe(
      'auto-reload by reloader.stakater.com/auto (on the pod template)',
    );
  });

  it('ignores the pod template when the metadata has an opt-in key, and says so', () => {
    const { policy, problems, warnings } = parse(
      { 'configmap.reloader.stakater.com/reload': 'a' },
      { 'configmap.reloader.stakater.com/reload': 'b' },
    );
    expect(problems).toEqual([]);
    expect(check(policy, { name: 'a' }).reload).toBe(true);
    expect(check(policy, { name: 'b' }).reload).toBe(false);
    expect(warnings).toEqual([
      'configmap.reloader.stakater.com/reload on the pod template is not read: the workload metadata carries ' +
        'reload annotations, and (as in Reloader) the pod template is read only when it has none',
    ]);
  });

  it('an empty opt-in key on the metadata still counts as present', () => {
    const p = policyOf({ 'reloader.stakater.com/auto': '' }, { 'reloader.stakater.com/auto': 'true' });
    expect(p.configMaps.source).toBe('metadata');
    expect(check(p, { name: 'c' }).reload).toBe(false);
  });

  it('decides per kind: a Secret list on the metadata does not hide a template auto for ConfigMaps', () => {
    const p = policyOf(
      { 'secret.reloader.stakater.com/reload': 's' },
      { 'reloader.stakater.com/auto': 'true' },
    );
    expect(p.configMaps.source).toBe('pod template');
    expect(p.secrets.source).toBe('metadata');
    expect(check(p, { name: 'c' }).rule).toBe('auto');
    expect(check(p, { kind: 'Secret', name: 'other' }).rule).toBe('not-opted-in');
    expect(check(p, { kind: 'Secret', name: 's' }).rule).toBe('named');
  });

  it('our keys count as opt-in keys for the fallback too', () => {
    const p = policyOf({ 'gitops-reloader.io/search': 'true' }, { 'reloader.stakater.com/auto': 'true' });
    expect(p.configMaps.source).toBe('metadata');
    expect(check(p, { name: 'c' }).rule).toBe('not-opted-in');
  });

  it('exclude lists are not opt-in keys: they do not stop the fallback, and metadata ones still apply', () => {
    const p = policyOf(
      { 'configmaps.exclude.reloader.stakater.com/reload': 'x' },
      { 'reloader.stakater.com/auto': 'true' },
    );
    expect(p.configMaps.source).toBe('pod template');
    expect(check(p, { name: 'x' }).rule).toBe('exclude');
    expect(check(p, { name: 'y' }).rule).toBe('auto');
  });

  it('exclude lists on the pod template apply when the template is read', () => {
    const p = policyOf(undefined, {
      'reloader.stakater.com/auto': 'true',
      'secrets.exclude.reloader.stakater.com/reload': 'x',
    });
    expect(check(p, { kind: 'Secret', name: 'x' }).rule).toBe('exclude');
  });

  it('exclude lists on the pod template are not read when the metadata is, and that is reported', () => {
    const { policy, warnings } = parse(
      { 'reloader.stakater.com/auto': 'true' },
      { 'configmaps.exclude.reloader.stakater.com/reload': 'x' },
    );
    expect(check(policy, { name: 'x' }).rule).toBe('auto');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /^configmaps\.exclude\.reloader\.stakater\.com\/reload on the pod template is not read/,
    );
  });

  it('bad values in an unread pod template are warnings, not problems', () => {
    const { problems, warnings } = parse(
      { 'reloader.stakater.com/auto': 'true' },
      { 'reloader.stakater.com/auto': 'yes' },
    );
    expect(problems).toEqual([]);
    expect(warnings).toHaveLength(1);
  });

  it('strategy and debounce fall back per key', () => {
    const p = policyOf(
      { 'gitops-reloader.io/strategy': 'annotate' },
      {
        'gitops-reloader.io/strategy': 'git',
        'gitops-reloader.io/debounce': '45s',
      },
    );
    expect(p.strategy).toBe('annotate');
    expect(p.strategySource).toBe('gitops-reloader.io/strategy');
    expect(p.debounceMs).toBe(45_000);
  });

  it('treats missing annotation maps as empty', () => {
    const { policy, problems, warnings } = parse(undefined, undefined);
    expect([problems, warnings]).toEqual([[], []]);
    expect(policy.strategy).toBe('restart');
    expect(check(policy, { name: 'c' }).reason).toBe('not opted in');
  });
});

describe('strategy', () => {
  it.each(['restart', 'annotate', 'git'] as const)('accepts %s', (s) => {
    expect(policyOf({ 'gitops-reloader.io/strategy': s }).strategy).toBe(s);
  });

  it('defaults to the global default', () => {
    const p = policyOf({}, {}, { kind: 'StatefulSet', defaultStrategy: 'annotate' });
    expect([p.strategy, p.strategySource]).toEqual(['annotate', 'default']);
  });

  it.each([
    ['restart', 'restart'],
    ['rollout', 'annotate'],
  ] as const)('maps rollout-strategy %s on a Rollout to %s', (value, strategy) => {
    const p = policyOf({ 'reloader.stakater.com/rollout-strategy': value }, undefined, {
      kind: 'Rollout',
      defaultStrategy: 'restart',
    });
    expect([p.strategy, p.strategySource]).toEqual([strategy, 'reloader.stakater.com/rollout-strategy']);
  });

  it('our strategy key overrides rollout-strategy, with a warning when they differ', () => {
    const { policy, warnings } = parse(
      { 'gitops-reloader.io/strategy': 'restart', 'reloader.stakater.com/rollout-strategy': 'rollout' },
      undefined,
      { kind: 'Rollout', defaultStrategy: 'restart' },
    );
    expect(policy.strategy).toBe('restart');
    expect(warnings).toEqual([
      'gitops-reloader.io/strategy overrides reloader.stakater.com/rollout-strategy=rollout',
    ]);
  });

  it('ignores rollout-strategy on other kinds, with a warning', () => {
    const { policy, problems, warnings } = parse({ 'reloader.stakater.com/rollout-strategy': 'rollout' });
    expect(policy.strategy).toBe('restart');
    expect(problems).toEqual([]);
    expect(warnings).toEqual([
      'reloader.stakater.com/rollout-strategy only applies to Argo Rollouts (as in Reloader); it is ignored on a Deployment',
    ]);
  });

  it('does not read rollout-strategy from the pod template', () => {
    const { policy, warnings } = parse(
      undefined,
      { 'reloader.stakater.com/rollout-strategy': 'rollout' },
      {
        kind: 'Rollout',
        defaultStrategy: 'restart',
      },
    );
    expect(policy.strategy).toBe('restart');
    expect(warnings).toHaveLength(1);
  });
});

describe('debounce', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['2m', 120_000],
    ['1h30m', 5_400_000],
    ['0', 0],
    ['24h', 86_400_000],
  ])('reads %s as %d ms', (v, ms) => {
    expect(policyOf({ 'gitops-reloader.io/debounce': v }).debounceMs).toBe(ms);
  });

  it('is undefined when not set', () => {
    expect(policyOf({}).debounceMs).toBeUndefined();
  });
});

describe("pause-period (Reloader's, read as a batch window)", () => {
  const KEY = 'deployment.reloader.stakater.com/pause-period';

  it('sets the batch window of a Deployment and notes how it is read, once', () => {
    const p = parse({ 'reloader.stakater.com/auto': 'true', [KEY]: '90s' });
    expect(p.problems).toEqual([]);
    expect(p.warnings).toEqual([]);
    expect(p.policy.batchWindowMs).toBe(90_000);
    expect(p.notes).toEqual([
      `${KEY}=90s is read as a batch window: a change waits 90s, and every change in that time ` +
        'reloads once when it ends; the Deployment is never paused',
    ]);
  });

  it('is ignored, with a warning, on other kinds and on the pod template (as in Reloader)', () => {
    const sts = parse({ 'reloader.stakater.com/auto': 'true', [KEY]: '1m' }, undefined, {
      kind: 'StatefulSet',
      defaultStrategy: 'restart',
    });
    expect(sts.policy.batchWindowMs).toBeUndefined();
    expect(sts.warnings).toEqual([
      `${KEY} only applies to Deployments (as in Reloader); it is ignored on a StatefulSet`,
    ]);
    const tpl = parse({ 'reloader.stakater.com/auto': 'true' }, { [KEY]: '1m' });
    expect(tpl.policy.batchWindowMs).toBeUndefined();
    expect(tpl.warnings).toEqual([
      `${KEY} on the pod template is not read; Reloader reads it on the Deployment's metadata`,
    ]);
  });

  it('is unset without the key', () => {
    expect(parse({ 'reloader.stakater.com/auto': 'true' }).policy.batchWindowMs).toBeUndefined();
  });
});

describe('progressive reload keys', () => {
  it('reads a priority and an opt-out, the metadata winning over the pod template', () => {
    expect(policyOf({})).toMatchObject({ priority: 0, progressive: true });
    expect(
      policyOf(
        { 'gitops-reloader.io/reload-priority': '100', 'gitops-reloader.io/progressive': 'false' },
        { 'gitops-reloader.io/reload-priority': '5' },
      ),
    ).toMatchObject({ priority: 100, progressive: false });
    expect(policyOf({}, { 'gitops-reloader.io/reload-priority': '-3' }).priority).toBe(-3);
  });

  it('refuses a priority that is not a bounded whole number, and an opt-out that is not true or false', () => {
    for (const bad of ['1.5', 'high', '10000000', '1e3']) {
      expect(parse({ 'gitops-reloader.io/reload-priority': bad }).problems[0]).toMatch(
        /reload-priority: .* is not a whole number/,
      );
    }
    expect(parse({ 'gitops-reloader.io/progressive': 'no' }).problems[0]).toMatch(
      /progressive: "no" is not "true" or "false"/,
    );
  });

  it('reports the resume key on a workload as not acted on: it belongs on the config', () => {
    expect(parse({ 'gitops-reloader.io/progressive-resume': 'x' }).warnings.join()).toMatch(
      /progressive-resume/,
    );
  });
});

describe('restart-window', () => {
  it('reads the windows from the metadata, else from the pod template', () => {
    const meta = parse({
      'gitops-reloader.io/restart-window': 'Mon-Fri 02:00-04:00 Europe/Berlin; Sat 10:00-11:00',
    });
    expect(meta.problems).toEqual([]);
    expect(meta.policy.windows?.text).toBe('Mon-Fri 02:00-04:00 Europe/Berlin; Sat 10:00-11:00');
    expect(meta.policy.windows?.windows).toHaveLength(2);
    const tpl = parse({}, { 'gitops-reloader.io/restart-window': 'Sun 01:00-02:00' });
    expect(tpl.policy.windows?.windows).toHaveLength(1);
    expect(parse({}).policy.windows).toBeUndefined();
  });

  it('a bad window skips the workload rather than restarting it outside one', () => {
    const p = parse({
      'reloader.stakater.com/auto': 'true',
      'gitops-reloader.io/restart-window': 'weekends',
    });
    expect(p.problems).toEqual([
      'gitops-reloader.io/restart-window: window "weekends": has no time range; write HH:MM-HH:MM, e.g. 02:00-04:00',
    ]);
  });
});

describe('bad values become problems, never exceptions', () => {
  it.each([
    [
      { 'configmap.gitops-reloader.io/exclude': 'ok, bad(' },
      /^configmap\.gitops-reloader\.io\/exclude: entry "bad\(" is not a valid regex: /,
    ],
    [{ 'configmap.gitops-reloader.io/exclude': 'x{' }, undefined],
    [
      { 'gitops-reloader.io/strategy': 'rolling' },
      /^gitops-reloader\.io\/strategy: "rolling" is not a strategy; use restart, annotate, git$/,
    ],
    [{ 'gitops-reloader.io/debounce': '30' }, /^gitops-reloader\.io\/debounce: "30" is not a duration/],
    [{ 'gitops-reloader.io/debounce': '-5s' }, /is not a duration/],
    [{ 'gitops-reloader.io/debounce': '1d' }, /is not a duration/],
    [{ 'gitops-reloader.io/debounce': '25h' }, /is longer than the 24h limit/],
    [
      { 'reloader.stakater.com/auto': 'yes' },
      /^reloader\.stakater\.com\/auto: "yes" is not a boolean; use "true" or "false"$/,
    ],
    [
      { 'configmap.gitops-reloader.io/auto': 'on' },
      /^configmap\.gitops-reloader\.io\/auto: "on" is not a boolean/,
    ],
    [
      { 'reloader.stakater.com/search': 'True' },
      /^reloader\.stakater\.com\/search: "True" is not understood; use "true" or "false" \(Reloader accepts only these two\)$/,
    ],
    [
      { 'gitops-reloader.io/auto': 'true', 'reloader.stakater.com/auto': 'false' },
      /^gitops-reloader\.io\/auto=true and reloader\.stakater\.com\/auto=false disagree; set one of them$/,
    ],
    [
      { 'gitops-reloader.io/restart-window': 'Mon-Fri 2am' },
      /^gitops-reloader\.io\/restart-window: window "Mon-Fri 2am": has no time range/,
    ],
    [
      { 'gitops-reloader.io/restart-window': 'Mon 02:00-04:00 Europe/Nowhere' },
      /^gitops-reloader\.io\/restart-window: window .*"Europe\/Nowhere" is not an IANA time zone/,
    ],
    [
      { 'deployment.reloader.stakater.com/pause-period': 'soon' },
      /^deployment\.reloader\.stakater\.com\/pause-period: "soon" is not a duration/,
    ],
  ] as [Annotations, RegExp | undefined][])('%j', (meta, message) => {
    const { problems } = parse(meta);
    if (message === undefined) {
      // "x{" is a literal brace in both Go and JavaScript: not a problem.
      expect(problems).toEqual([]);
      return;
    }
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(message);
  });

  it.each([
    [
      { 'configmap.reloader.stakater.com/reload': 'ok, bad(' },
      /^configmap\.reloader\.stakater\.com\/reload: entry "bad\(" is not a valid regex: .*; that entry is left out, the others are read$/,
    ],
    [
      { 'secret.gitops-reloader.io/reload': 'ok, (a+)+' },
      /^secret\.gitops-reloader\.io\/reload: entry "\(a\+\)\+" repeats a group.*; that entry is left out, the others are read$/,
    ],
  ] as [Annotations, RegExp][])(
    'a bad entry in a reload list is left out with a warning, the others are read (Reloader skips it too): %j',
    (meta, message) => {
      const { policy, problems, warnings } = parse(meta);
      expect(problems).toEqual([]);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(message);
      const kind = Object.keys(meta)[0]?.startsWith('secret') ? 'Secret' : 'ConfigMap';
      expect(check(policy, { kind, name: 'ok' })).toMatchObject({ reload: true, rule: 'named' });
      expect(check(policy, { kind, name: 'other' }).reload).toBe(false);
    },
  );

  it('an invalid rollout-strategy on a Rollout is a problem', () => {
    const { problems } = parse({ 'reloader.stakater.com/rollout-strategy': 'canary' }, undefined, {
      kind: 'Rollout',
      defaultStrategy: 'restart',
    });
    expect(problems).toEqual([
      'reloader.stakater.com/rollout-strategy: "canary" is not a rollout strategy; use "restart" or "rollout"',
    ]);
  });

  it('names the pod template when the bad value is there', () => {
    const { problems } = parse(undefined, { 'reloader.stakater.com/auto': 'maybe' });
    expect(problems).toEqual([
      'reloader.stakater.com/auto (on the pod template): "maybe" is not a boolean; use "true" or "false"',
    ]);
  });

  it('reports a problem once even though it is read for both kinds', () => {
    expect(parse({ 'reloader.stakater.com/search': 'yes' }).problems).toHaveLength(1);
  });

  it('an ignore value other than "true" leaves the config watched, as in Reloader, with a problem for the Event', () => {
    const p = policyOf({ 'reloader.stakater.com/auto': 'true' });
    for (const v of ['True', 'yes', 'TRUE']) {
      const d = check(p, { name: 'c', annotations: { 'reloader.stakater.com/ignore': v } });
      expect(d).toEqual({
        reload: true,
        rule: 'auto',
        reason: 'auto-reload by reloader.stakater.com/auto',
        problem: `ConfigMap c: reloader.stakater.com/ignore: ${JSON.stringify(v)} is not "true", so the ConfigMap is not ignored (as in Reloader); write "true" to ignore it`,
      });
    }
    // Not reloading anyway: nothing to say.
    expect(
      check(policyOf({}), { name: 'c', annotations: { 'gitops-reloader.io/ignore': 'True' } }),
    ).toMatchObject({ reload: false, rule: 'not-opted-in' });
    // "true" on the other key still ignores.
    expect(
      check(p, {
        name: 'c',
        annotations: { 'reloader.stakater.com/ignore': 'True', 'gitops-reloader.io/ignore': 'true' },
      }).rule,
    ).toBe('ignore');
  });

  it('a bad match value matters only to a searching workload', () => {
    const bad = { 'gitops-reloader.io/match': 'TRUE' };
    expect(
      check(policyOf({ 'reloader.stakater.com/auto': 'true' }), { name: 'c', annotations: bad }).rule,
    ).toBe('auto');
    expect(
      check(policyOf({ 'gitops-reloader.io/search': 'true' }), { name: 'c', annotations: bad }).rule,
    ).toBe('invalid');
  });

  it('contradicting ignore keys on the config are a problem', () => {
    const d = check(policyOf({}), {
      name: 'c',
      annotations: { 'gitops-reloader.io/ignore': 'true', 'reloader.stakater.com/ignore': 'false' },
    });
    expect(d.rule).toBe('invalid');
  });

  it('never throws on arbitrary input', () => {
    const keys = [
      ...Object.values(KEYS).flatMap((v) => (typeof v === 'string' ? [v] : Object.values(v))),
      ...Object.values(KEYS.typed).flatMap((t) => Object.values(t).flatMap((p) => [p.ours, p.reloader])),
    ].filter((k): k is string => typeof k === 'string');
    const values = [
      '',
      ' ',
      'true',
      'x',
      '(',
      ')',
      '[',
      '\\',
      '*',
      'a{2,}',
      '(?<=a)',
      '\u0000',
      'é',
      '1h',
      ',,,',
    ];
    let seed = 7;
    const pick = <T>(xs: readonly T[]): T => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return xs[seed % xs.length] as T;
    };
    for (let n = 0; n < 500; n += 1) {
      const meta: Record<string, string> = {};
      const template: Record<string, string> = {};
      const config: Record<string, string> = {};
      for (let k = 0; k < 4; k += 1) {
        meta[pick(keys)] = pick(values) + pick(values);
        template[pick(keys)] = pick(values);
        config[pick(keys)] = pick(values);
      }
      const kind = pick(['Deployment', 'Rollout', 'CronJob'] as const);
      const { policy } = parse(meta, template, { kind, defaultStrategy: 'restart' });
      const d = check(policy, {
        kind: pick(['ConfigMap', 'Secret'] as const),
        name: pick(values),
        annotations: config,
      });
      expect(typeof d.reason).toBe('string');
    }
  });
});

describe('keys that are not acted on are reported as warnings', () => {
  it.each([
    ['deployment.reloader.stakater.com/paused-at', '2024-01-01T00:00:00Z', /kubectl rollout resume/],
    [
      'secretproviderclass.reloader.stakater.com/reload',
      'spc',
      /not acted on: CSI SecretProviderClasses are watched only with --enable-csi-integration$/,
    ],
    ['secretproviderclass.reloader.stakater.com/auto', 'true', /only with --enable-csi-integration$/],
    ['secretproviderclasses.exclude.reloader.stakater.com/reload', 'spc', /--enable-csi-integration$/],
    ['secretproviderclass.gitops-reloader.io/reload', 'spc', /--enable-csi-integration$/],
    // Keys no released Reloader defines (an unreleased restart-window scheduler used them): unknown.
    ['reloader.stakater.com/restart-window', '{}', /is not a Reloader annotation gitops-reloader knows/],
    ['reloader.stakater.com/pending', '{}', /is not a Reloader annotation gitops-reloader knows/],
    ['reloader.stakater.com/applied', '{}', /is not a Reloader annotation gitops-reloader knows/],
    ['reloader.stakater.com/restart-hash', 'abc', /is not a Reloader annotation gitops-reloader knows/],
    ['reloader.stakater.com/ignore', 'true', /belongs on the ConfigMap or Secret, not on the workload/],
    ['gitops-reloader.io/match', 'true', /belongs on the ConfigMap or Secret/],
    [
      'reloader.stakater.com/frobnicate',
      'true',
      /is not a Reloader annotation gitops-reloader knows; it is ignored$/,
    ],
    ['gitops-reloader.io/stratgey', 'git', /is not a gitops-reloader annotation; check the spelling$/],
    ['configmaps.gitops-reloader.io/reload', 'x', /check the spelling/],
  ])('%s', (key, value, message) => {
    const { problems, warnings } = parse({ 'reloader.stakater.com/auto': 'true', [key]: value });
    expect(problems).toEqual([]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(new RegExp(`^${key.replaceAll('.', '\\.')} `));
    expect(warnings[0]).toMatch(message);
  });

  it("warns about Reloader's last-reloaded-from on the pod template", () => {
    const { warnings } = parse(
      { 'reloader.stakater.com/auto': 'true' },
      { 'reloader.stakater.com/last-reloaded-from': '{"type":"CONFIGMAP"}' },
    );
    expect(warnings).toEqual([
      "reloader.stakater.com/last-reloaded-from (on the pod template) was written by Reloader's annotations " +
        'strategy and is neither read nor updated. It is harmless; removing it from the pod template restarts the pods once',
    ]);
  });

  it('does not warn about our own state keys or unrelated annotations', () => {
    const { warnings } = parse(
      {
        'gitops-reloader.io/reload-requested-at': '2026-01-01T00:00:00Z',
        'kubectl.kubernetes.io/last-applied-configuration': '{}',
        'argocd.argoproj.io/tracking-id': 'app:apps/Deployment:ns/web',
        'example.com/reloader.stakater.com': 'x',
      },
      { 'gitops-reloader.io/config-hash': 'abc' },
    );
    expect(warnings).toEqual([]);
  });
});

// Every example in docs/annotations.md runs here, so the doc cannot drift from the code.
describe('docs/annotations.md examples', () => {
  interface DocCase {
    /** [kind, name, reload, rule] for each config change to try. */
    changes?: [ConfigKind, string, boolean, DecisionRule][];
    strategy?: ReloadStrategy;
    debounceMs?: number;
    batchWindowMs?: number;
    /** How many restart windows the example declares. */
    windows?: number;
    problems?: RegExp[];
    warnings?: RegExp[];
    notes?: RegExp[];
  }

  const cases: Record<string, DocCase> = {
    auto: {
      changes: [
        ['ConfigMap', 'web-config', true, 'auto'],
        ['Secret', 'web-tls', true, 'auto'],
        ['ConfigMap', 'other', false, 'not-referenced'],
        ['Secret', 'other', false, 'not-referenced'],
      ],
    },
    'pod-template': {
      changes: [
        ['ConfigMap', 'worker-config', true, 'auto'],
        ['ConfigMap', 'other', false, 'not-referenced'],
      ],
    },
    'typed-auto': {
      changes: [
        ['Secret', 'api-credentials', true, 'auto'],
        ['ConfigMap', 'api-config', false, 'not-opted-in'],
      ],
    },
    reload: {
      changes: [
        ['ConfigMap', 'gateway-routes', true, 'named'],
        ['ConfigMap', 'flags-eu', true, 'named'],
        ['ConfigMap', 'flags-us', true, 'named'],
        ['Secret', 'gateway-tls', true, 'named'],
        ['ConfigMap', 'my-flags-eu', false, 'not-opted-in'],
        ['Secret', 'flags-eu', false, 'not-opted-in'],
      ],
    },
    exclude: {
      changes: [
        ['ConfigMap', 'search-config', true, 'auto'],
        ['ConfigMap', 'search-synonyms', false, 'exclude'],
      ],
    },
    'search-match': {
      changes: [
        ['ConfigMap', 'db-tuning', true, 'search'],
        ['ConfigMap', 'db-defaults', false, 'not-opted-in'],
      ],
    },
    ignore: {
      changes: [
        ['ConfigMap', 'jobs-config', true, 'named'],
        ['ConfigMap', 'jobs-schedule', false, 'ignore'],
      ],
    },
    strategy: { strategy: 'git' },
    'rollout-strategy': { strategy: 'restart' },
    debounce: { debounceMs: 120_000 },
    precedence: {
      changes: [
        ['ConfigMap', 'shop-config', true, 'named'],
        ['ConfigMap', 'shop-catalog', false, 'exclude'],
        ['ConfigMap', 'shop-banner', false, 'ignore'],
      ],
    },
    'bad-regex': {
      changes: [['ConfigMap', 'legacy-settings', true, 'named']],
      warnings: [
        /^configmap\.reloader\.stakater\.com\/reload: entry "legacy-\(config" is not a valid regex: .*; that entry is left out, the others are read$/,
      ],
    },
    'pause-period': {
      changes: [['ConfigMap', 'billing-config', true, 'auto']],
      batchWindowMs: 300_000,
      notes: [/^deployment\.reloader\.stakater\.com\/pause-period=5m is read as a batch window/],
    },
    'restart-window': {
      changes: [['ConfigMap', 'ledger-config', true, 'auto']],
      windows: 2,
    },
  };

  const doc = readFileSync(new URL('../../docs/annotations.md', import.meta.url), 'utf8');
  const examples = [...doc.matchAll(/<!-- example: ([\w-]+) -->\n```yaml\n([\s\S]*?)```/g)].map(
    (m) => [m[1] as string, m[2] as string] as const,
  );

  it('every example has a test case and every case an example', () => {
    expect(examples.map(([id]) => id).sort()).toEqual(Object.keys(cases).sort());
  });

  const workloadKinds: readonly string[] = ['Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Rollout'];
  // biome-ignore lint/suspicious/noExplicitAny: YAML documents are untyped.
  type Obj = any;

  it.each(examples)('%s', (id, yamlText) => {
    const c = cases[id] as DocCase;
    const docs: Obj[] = parseAllDocuments(yamlText).map((d) => d.toJS());
    const workload = docs.find((d) => workloadKinds.includes(d.kind));
    expect(workload).toBeDefined();
    const template =
      workload.kind === 'CronJob' ? workload.spec?.jobTemplate?.spec?.template : workload.spec?.template;
    const parsed = parseWorkloadPolicy(workload.metadata?.annotations, template?.metadata?.annotations, {
      kind: workload.kind as WorkloadKind,
      defaultStrategy: 'restart',
    });

    expect(parsed.problems).toHaveLength(c.problems?.length ?? 0);
    c.problems?.forEach((re, i) => {
      expect(parsed.problems[i]).toMatch(re);
    });
    expect(parsed.warnings).toHaveLength(c.warnings?.length ?? 0);
    c.warnings?.forEach((re, i) => {
      expect(parsed.warnings[i]).toMatch(re);
    });
    if (c.strategy) expect(parsed.policy.strategy).toBe(c.strategy);
    if (c.debounceMs !== undefined) expect(parsed.policy.debounceMs).toBe(c.debounceMs);
    expect(parsed.policy.batchWindowMs).toBe(c.batchWindowMs);
    expect(parsed.policy.windows?.windows.length).toBe(c.windows);
    expect(parsed.notes).toHaveLength(c.notes?.length ?? 0);
    c.notes?.forEach((re, i) => {
      expect(parsed.notes[i]).toMatch(re);
    });

    const uses = extractReferences('default', (template?.spec ?? {}) as PodSpecLike);
    const globals = globalsWith({ ignoreConfigMaps: ['kube-root-ca.crt'] });
    for (const [kind, name, reload, rule] of c.changes ?? []) {
      const configDoc = docs.find((d) => d.kind === kind && d.metadata?.name === name);
      const d = decide(
        parsed.policy,
        {
          ref: { kind, namespace: 'default', name },
          annotations: configDoc?.metadata?.annotations,
          referenced: uses.some((u) => u.config.kind === kind && u.config.name === name),
        },
        globals,
      );
      expect({ name, kind, reload: d.reload, rule: d.rule }).toEqual({ name, kind, reload, rule });
    }
  });
});

// name-pattern.ts: the exact-or-anchored-regex lists used above.
describe('name lists', () => {
  it('splits, trims and drops empty entries', () => {
    expect(splitList(' a, b ,,c,')).toEqual(['a', 'b', 'c']);
    expect(splitList('')).toEqual([]);
  });

  it('matches plain names by equality and regexes against the whole name', () => {
    const { list, problems } = compileNameList(['app-config', 'app.v1', 'x-.*']);
    expect(problems).toEqual([]);
    expect(list.entries.map((e) => e.regex === undefined)).toEqual([true, false, false]);
    expect(matchName(list, 'app-config')?.text).toBe('app-config');
    expect(matchName(list, 'app.v1')?.text).toBe('app.v1');
    expect(matchName(list, 'x-1')?.text).toBe('x-.*');
    expect(matchName(list, 'my-app-config-2')).toBeUndefined();
    expect(matchName(list, 'y-x-1')).toBeUndefined();
  });

  it('exact mode never treats an entry as a regex', () => {
    const { list } = compileNameList(['a.*'], 'exact');
    expect(matchName(list, 'a.*')).toBeDefined();
    expect(matchName(list, 'abc')).toBeUndefined();
  });

  it.each([
    'app-.*',
    'tls-[a-z0-9]+',
    '(eu|us)-config',
    'app(-[a-z0-9]+)?',
    'flags-\\d{2}',
    '[a-z]+-[a-z]+-[0-9]+',
    'sh\\.helm\\.release\\.v1\\..*',
    'x{',
    '(?:a|b)-c',
  ])('accepts %j', (src) => {
    expect(checkPattern(src)).toBeUndefined();
    expect(compileNameList([src]).problems).toEqual([]);
  });

  it.each([
    ['(a+)+', /repeats a group that itself contains a repetition or an alternation/],
    ['(a|aa)*', /repeats a group/],
    ['((ab)*c)+', /repeats a group/],
    ['(-[a-z]+)*', /repeats a group/],
    ['(a*){2,5}', /repeats a group/],
    ['.*.*.*.*x', /has 4 unbounded repetitions/],
    ['a{1,}b+c*d{2,}', /has 4 unbounded repetitions/],
    ['(a)\\1', /uses \\1/],
    ['(?<n>a)\\k<n>', /uses \\k/],
    ['a(?=b)', /lookahead or lookbehind/],
    ['(?<!a)b', /lookahead or lookbehind/],
    ['\\Aabc\\z', /uses \\A/],
    ['\\pL+', /uses \\p/],
    ['[[:alpha:]]+', /POSIX class/],
    ['[\\pL]', /uses \\p/],
    ['[abc', /unterminated character class/],
    ['a)', /unbalanced/],
    ['abc\\', /lone backslash/],
    ['a'.repeat(257), /257 characters long; the limit is 256/],
  ])('refuses %j', (src, message) => {
    expect(checkPattern(src)).toMatch(message);
    expect(compileNameList([src]).problems).toHaveLength(1);
  });

  it('reports JavaScript syntax errors with the entry', () => {
    expect(compileNameList(['(?i)app']).problems[0]).toMatch(/^entry "\(\?i\)app" is not a valid regex: /);
    expect(compileNameList(['a**']).problems[0]).toMatch(/is not a valid regex/);
  });

  it('keeps the good entries of a list with a bad one', () => {
    const { list, problems } = compileNameList(['good', '(']);
    expect(problems).toHaveLength(1);
    expect(list.entries.map((e) => e.text)).toEqual(['good']);
  });

  it(`allows exactly ${MAX_ENTRY_LENGTH} characters and ${MAX_UNBOUNDED_REPEATS} unbounded repetitions`, () => {
    expect(checkPattern('a'.repeat(MAX_ENTRY_LENGTH))).toBeUndefined();
    expect(checkPattern('.*-.*-.*')).toBeUndefined();
  });
});

describe('SecretProviderClasses (Secrets Store CSI), with --enable-csi-integration', () => {
  const csi: ParseOptions = { kind: 'Deployment', defaultStrategy: 'restart', csi: true };
  const spc = (name: string, more: Partial<Change> = {}): Change => ({
    kind: 'SecretProviderClass',
    name,
    ...more,
  });

  it('reads the SecretProviderClass keys without warnings', () => {
    const { problems, warnings } = parse(
      {
        'secretproviderclass.reloader.stakater.com/reload': 'vault-db',
        'secretproviderclass.reloader.stakater.com/auto': 'true',
        'secretproviderclasses.exclude.reloader.stakater.com/reload': 'other',
        'secretproviderclass.gitops-reloader.io/exclude': 'x-.*',
      },
      undefined,
      csi,
    );
    expect(problems).toEqual([]);
    expect(warnings).toEqual([]);
  });

  it('reloads a class named in secretproviderclass.reloader.stakater.com/reload (anchored regex), mounted or not', () => {
    const policy = policyOf(
      { 'secretproviderclass.reloader.stakater.com/reload': 'vault-.*' },
      undefined,
      csi,
    );
    expect(check(policy, spc('vault-db', { referenced: false }))).toMatchObject({
      reload: true,
      rule: 'named',
    });
    expect(check(policy, spc('my-vault-db'))).toMatchObject({ reload: false, rule: 'not-opted-in' });
    // The list names classes only: a Secret of the same name is not reloaded by it.
    expect(check(policy, { kind: 'Secret', name: 'vault-db' })).toMatchObject({ reload: false });
  });

  it('auto-reloads a mounted class with the typed or the generic auto key, never an unmounted one', () => {
    for (const key of ['secretproviderclass.reloader.stakater.com/auto', 'reloader.stakater.com/auto']) {
      const policy = policyOf({ [key]: 'true' }, undefined, csi);
      expect(check(policy, spc('vault-db'))).toMatchObject({ reload: true, rule: 'auto' });
      expect(check(policy, spc('vault-db', { referenced: false }))).toMatchObject({
        reload: false,
        rule: 'not-referenced',
      });
    }
    // The typed key of another kind does not opt a class in.
    const secretsOnly = policyOf({ 'secret.reloader.stakater.com/auto': 'true' }, undefined, csi);
    expect(check(secretsOnly, spc('vault-db'))).toMatchObject({ reload: false, rule: 'not-opted-in' });
  });

  it('excludes exact names with secretproviderclasses.exclude.reloader.stakater.com/reload, as Reloader does', () => {
    const policy = policyOf(
      {
        'reloader.stakater.com/auto': 'true',
        'secretproviderclasses.exclude.reloader.stakater.com/reload': 'vault-db, azure-.*',
      },
      undefined,
      csi,
    );
    expect(check(policy, spc('vault-db'))).toMatchObject({ reload: false, rule: 'exclude' });
    // Reloader compares exclude entries as plain names: "azure-.*" is not a pattern there.
    expect(check(policy, spc('azure-kv'))).toMatchObject({ reload: true, rule: 'auto' });
    // The exclude list of classes does not exclude a Secret of the same name.
    expect(check(policy, { kind: 'Secret', name: 'vault-db' })).toMatchObject({ reload: true });
  });

  it('honours reloader.stakater.com/ignore and /match on the SecretProviderClass object', () => {
    const auto = policyOf({ 'reloader.stakater.com/auto': 'true' }, undefined, csi);
    expect(
      check(auto, spc('vault-db', { annotations: { 'reloader.stakater.com/ignore': 'true' } })),
    ).toMatchObject({ reload: false, rule: 'ignore' });
    const search = policyOf({ 'reloader.stakater.com/search': 'true' }, undefined, csi);
    expect(
      check(search, spc('vault-db', { annotations: { 'reloader.stakater.com/match': 'true' } })),
    ).toMatchObject({ reload: true, rule: 'search' });
    expect(check(search, spc('vault-db'))).toMatchObject({ reload: false });
  });

  it('reads the pod template when the metadata has no opt-in key for classes (per kind, as Reloader)', () => {
    const policy = policyOf(
      { 'secret.reloader.stakater.com/reload': 'db' },
      { 'secretproviderclass.reloader.stakater.com/reload': 'vault-db' },
      csi,
    );
    expect(policy.providerClasses.source).toBe('pod template');
    expect(check(policy, spc('vault-db'))).toMatchObject({ reload: true, rule: 'named' });
  });

  it('is not ignored by the global ConfigMap and Secret ignore lists', () => {
    const { globals } = compileGlobals({
      autoReloadAll: true,
      ignoreConfigMaps: ['vault-db'],
      ignoreSecrets: ['vault-db'],
    });
    expect(check(policyOf({}, undefined, csi), spc('vault-db'), globals)).toMatchObject({
      reload: true,
      rule: 'auto-all',
    });
  });
});
