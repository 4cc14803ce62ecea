// Stakater Reloader's flags under their own names: each maps to ours, or stops start-up with a
// message that names the equivalent.
import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.ts';
import { pflagList, RELOADER_ANNOTATION_FLAGS, reloaderFlags, reloaderSelector } from './reloader-flags.ts';

const base = ['--release-namespace=gr'];
const load = (...argv: string[]) => loadConfig([...base, ...argv], {});

describe('Reloader flags', () => {
  it('maps the filtering flags to ours', () => {
    const c = load(
      '--namespaces-to-ignore=kube-system,tools',
      '--ignore-namespaces=legacy',
      '--resources-to-ignore=configMaps',
      '--ignored-workload-types=jobs,cronjobs',
    );
    expect(c.ignoreNamespaces).toEqual(['legacy', 'kube-system', 'tools']);
    expect(c.ignoreResources).toEqual(['configmaps']);
    expect(c.ignoreWorkloadKinds.sort()).toEqual(['CronJob', 'Job']);
    expect(c.reloaderNotes.join('\n')).toMatch(/--namespaces-to-ignore → --ignore-namespaces/);
  });

  it('reads --is-Argo-Rollouts=false as "never reload Rollouts", and true as our default', () => {
    expect(load('--is-Argo-Rollouts=false').ignoreWorkloadKinds).toEqual(['Rollout']);
    expect(load('--is-Argo-Rollouts=true').ignoreWorkloadKinds).toEqual([]);
  });

  it('maps --enable-ha and the leader-election timings to the lease flags', () => {
    const c = load(
      '--enable-ha=false',
      '--leader-election-lease-duration=30s',
      '--leader-election-renew-deadline=20s',
      '--leader-election-retry-period=4s',
    );
    expect(c).toMatchObject({
      leaderElect: false,
      leaseDurationMs: 30_000,
      leaseRenewDeadlineMs: 20_000,
      leaseRetryPeriodMs: 4_000,
    });
    expect(load('--enable-ha').leaderElect).toBe(true);
  });

  it('refuses a Reloader flag that contradicts our own flag given alongside it', () => {
    expect(() => load('--enable-ha=false', '--leader-elect=true')).toThrow(
      /--enable-ha=false contradicts --leader-elect=true; give only --leader-elect/,
    );
  });

  it("reads Reloader's key:value selector lists, with * for any value", () => {
    const c = load('--namespace-selector=team:web,reloader:*', '--resource-label-selector=reload=*');
    expect(c.namespaceSelector).toBe('team=web,reloader');
    expect(c.resourceLabelSelector).toBe('reload');
    expect(reloaderSelector('env in (a,b),app=x')).toBe('env in (a,b),app=x');
  });

  it("reads a selector flag as Reloader's pflag slice: repeatable, and quoted as its chart renders it", () => {
    // Reloader's chart 2.2.16 renders `--namespace-selector="<value>"`, quotes included.
    expect(load('--namespace-selector="team:platform,reload:*"').namespaceSelector).toBe(
      'team=platform,reload',
    );
    expect(load('--namespace-selector=team=a', '--namespace-selector=env in (x, y)').namespaceSelector).toBe(
      'team=a,env in (x,y)',
    );
    expect(load('--resource-label-selector="reloader:enabled"').resourceLabelSelector).toBe(
      'reloader=enabled',
    );
    expect(() => load('--namespace-selector="team=a')).toThrow(/--namespace-selector: unclosed quote/);
    expect(() => load('--namespace-selector=te"am=a')).toThrow(/--namespace-selector: a quote inside/);
    expect(pflagList('"a=b,c",d,"say ""x"""')).toEqual(['a=b,c', 'd', 'say "x"']);
    expect(pflagList('')).toEqual([]);
    expect(() => pflagList('"a"b')).toThrow(/text after a closing quote/);
  });

  it("--reloader-compat keeps Reloader's port :9090 unless --http-address is given", () => {
    expect(load().httpAddress).toBe(':8080');
    expect(load().reloaderCompat).toBe(false);
    const c = load('--reloader-compat');
    expect(c).toMatchObject({ reloaderCompat: true, httpAddress: ':9090' });
    expect(load('--reloader-compat', '--http-address=:7000').httpAddress).toBe(':7000');
  });

  it("reads Reloader's log levels and log formats", () => {
    expect(load('--log-level=trace').logLevel).toBe('debug');
    expect(load('--log-level=warning').logLevel).toBe('warn');
    expect(load('--log-level=panic').logLevel).toBe('error');
    expect(load().logFormat).toBe('json');
    expect(load('--log-format=json').logFormat).toBe('json');
    for (const v of ['', 'text', 'logfmt']) expect(load(`--log-format=${v}`).logFormat).toBe('text');
    expect(() => load('--log-format=yaml')).toThrow(/--log-format=yaml is refused: expected json, or text/);
  });

  it('accepts the behaviours we always have, and refuses turning them off, naming what we do instead', () => {
    expect(load('--reload-on-create=true', '--sync-after-restart').reloaderNotes).toHaveLength(2);
    // --reload-on-create=false is the default meaning (Reloader's default too): accepted, with a note.
    const off = load('--reload-on-create=false');
    expect(off.reloadOnCreate).toBe(false);
    expect(off.reloaderNotes.join('\n')).toMatch(
      /--reload-on-create=false \(the default\): .* recorded, not reloaded/,
    );
    expect(load('--reload-on-create=true').reloadOnCreate).toBe(true);
    expect(() => load('--reload-on-create=maybe')).toThrow(
      /--reload-on-create=maybe is refused: expected true or false/,
    );
    // --reload-on-delete is our own flag with Reloader's meaning: both values, default false.
    expect(load().reloadOnDelete).toBe(false);
    expect(load('--reload-on-delete=false').reloadOnDelete).toBe(false);
    expect(load('--reload-on-delete=true').reloadOnDelete).toBe(true);
    expect(load('--reload-on-delete').reloadOnDelete).toBe(true);
    expect(() => load('--reload-on-delete=maybe')).toThrow(/--reload-on-delete/);
    expect(() => load('--sync-after-restart=false')).toThrow(/ledger/);
  });

  it('accepts every --reload-strategy value Reloader has: annotations selects annotate, the others restart', () => {
    for (const v of ['env-vars', 'default']) {
      const c = load(`--reload-strategy=${v}`);
      expect(c.defaultStrategy).toBe('restart');
      expect(c.reloaderNotes[0]).toMatch(/never writes the pod template/);
    }
    const annotations = load('--reload-strategy=annotations');
    expect(annotations.defaultStrategy).toBe('annotate');
    expect(annotations.reloaderNotes[0]).toBe('--reload-strategy=annotations → --default-strategy=annotate');
    expect(() => load('--reload-strategy=annotations', '--default-strategy=restart')).toThrow(
      /--reload-strategy=annotations contradicts --default-strategy=restart; give only --default-strategy/,
    );
    expect(() => load('--reload-strategy=rollout')).toThrow(/expected env-vars, annotations or default/);
  });

  it.each(Object.entries(RELOADER_ANNOTATION_FLAGS))(
    'accepts --%s at its default, and a custom key read instead of it',
    (flag, key) => {
      expect(load(`--${flag}=${key}`).annotationAliases).toBeUndefined();
      const c = load(`--${flag}=example.com/${flag}`);
      if (flag === 'pause-deployment-time-annotation') expect(c.annotationAliases).toBeUndefined();
      else expect(c.annotationAliases).toEqual({ [key]: `example.com/${flag}` });
      expect(c.reloaderNotes.join('\n')).toContain(`read as ${key}`);
    },
  );

  it('refuses a custom annotation key that is not one, is ours, or is taken', () => {
    expect(() => load('--auto-annotation=not a key')).toThrow(
      /--auto-annotation=not a key is refused: not an annotation key/,
    );
    expect(() => load('--auto-annotation=gitops-reloader.io/auto')).toThrow(/our own/);
    expect(() => load('--auto-annotation=reloader.stakater.com/search')).toThrow(
      /default key of another flag/,
    );
    expect(() => load('--auto-annotation=example.com/x', '--auto-search-annotation=example.com/x')).toThrow(
      /names the same key/,
    );
  });

  it('refuses --enable-pprof=true and bad values, naming the flag', () => {
    expect(() => load('--enable-pprof')).toThrow(/--enable-pprof=true is refused: .*process_\*/);
    expect(() => load('--enable-pprof=false', '--pprof-addr=:6060')).not.toThrow();
    expect(() => load('--resources-to-ignore=pods')).toThrow(/expected configmaps or secrets, not "pods"/);
    expect(() => load('--resources-to-ignore=configmaps,secrets')).toThrow(/cannot both be ignored/);
    expect(() => load('--ignored-workload-types=deployments')).toThrow(/expected jobs, cronjobs or both/);
  });

  it('reads Reloader flags from GITOPS_RELOADER_* env too, and METRICS_COUNT_BY_NAMESPACE=enabled', () => {
    const c = loadConfig(base, {
      GITOPS_RELOADER_NAMESPACES_TO_IGNORE: 'a',
      METRICS_COUNT_BY_NAMESPACE: 'enabled',
    });
    expect(c.ignoreNamespaces).toEqual(['a']);
    expect(c.metricsCountByNamespace).toBe(true);
  });

  it('documents every Reloader flag in help', () => {
    for (const f of reloaderFlags) expect(f.help).toMatch(/^Stakater Reloader's flag/);
  });
});

describe('--webhook-url', () => {
  it('is off by default, with a 10 s timeout and 3 retries when on', () => {
    expect(load().webhookUrl).toBeUndefined();
    expect(load('--webhook-url=http://127.0.0.1:9/hook')).toMatchObject({
      webhookUrl: 'http://127.0.0.1:9/hook',
      webhookTimeoutMs: 10_000,
      webhookRetries: 3,
    });
  });

  it.each([
    [['--webhook-url=ftp://x/y'], /--webhook-url: expected an http:\/\/ or https:\/\/ URL/],
    [['--webhook-secret-file=/k'], /--webhook-secret-file needs --webhook-url/],
    [['--webhook-url=http://x', '--webhook-timeout=10ms'], /--webhook-timeout.*at least 100ms/],
    [['--webhook-url=http://x', '--webhook-retries=-1'], /--webhook-retries.*at least 0/],
    [['--ignore-workload-kinds=Pod'], /--ignore-workload-kinds: expected Deployment/],
  ])('rejects %j', (argv, message) => {
    expect(() => load(...argv)).toThrow(message);
  });
});
