import { describe, expect, it } from 'vitest';
import { loadConfig, validSelector } from './config.ts';

describe('loadConfig', () => {
  it('has sensible defaults', () => {
    const c = loadConfig([], {});
    expect(c).toMatchObject({
      debounceMs: 3000,
      maxDebounceWaitMs: 30_000,
      maxConcurrentReloads: 20,
      apiWriteQps: 20,
      apiWriteBurst: 30,
      defaultStrategy: 'restart',
      ignoreConfigMaps: ['kube-root-ca.crt'],
      dryRun: false,
      releaseName: 'gitops-reloader',
    });
  });

  it('reads flags in both --flag=value and --flag value forms, and bare booleans', () => {
    const c = loadConfig(
      ['--debounce=500ms', '--namespaces', 'a,b', '--dry-run', '--max-concurrent-reloads', '2'],
      {},
    );
    expect(c.debounceMs).toBe(500);
    expect(c.namespaces).toEqual(['a', 'b']);
    expect(c.dryRun).toBe(true);
    expect(c.maxConcurrentReloads).toBe(2);
  });

  it('reads every flag from GITOPS_RELOADER_* env, and a flag wins over env', () => {
    const env = { GITOPS_RELOADER_DEBOUNCE: '5s', GITOPS_RELOADER_DRY_RUN: 'true', POD_NAMESPACE: 'ops' };
    expect(loadConfig([], env)).toMatchObject({ debounceMs: 5000, dryRun: true, releaseNamespace: 'ops' });
    expect(loadConfig(['--debounce=1s', '--release-namespace=mine'], env)).toMatchObject({
      debounceMs: 1000,
      releaseNamespace: 'mine',
    });
    const limits = { GITOPS_RELOADER_API_WRITE_QPS: '50', GITOPS_RELOADER_API_WRITE_BURST: '80' };
    expect(loadConfig([], limits)).toMatchObject({ apiWriteQps: 50, apiWriteBurst: 80 });
  });

  it.each([
    [['--debounce=soon'], /"soon" for --debounce/],
    [['--max-concurrent-reloads=0'], /--max-concurrent-reloads.*at least 1/],
    [['--api-write-qps=0'], /--api-write-qps.*at least 1/],
    [['--api-write-burst=2.5'], /--api-write-burst.*whole number/],
    [['--default-strategy=yolo'], /--default-strategy.*restart, annotate, git/],
    [['--dry-run=maybe'], /--dry-run.*true or false/],
    [['--namespace-selector=a b c'], /--namespace-selector.*not a label selector/],
    [['--namespaces=Bad_NS'], /--namespaces.*not a namespace name/],
    [['--hub-exec-commands=/usr/bin/ok,login'], /--hub-exec-commands.*not an absolute path/],
    [['--hub-standby-clusters=1001'], /--hub-standby-clusters.*at most 1000/],
    [['--hub-standby-clusters=-1'], /--hub-standby-clusters/],
    [['--hub-write-qps=0'], /--hub-write-qps/],
    [['--debounce=10s', '--max-debounce-wait=5s'], /--max-debounce-wait/],
    [['--no-such-flag'], /unknown flag --no-such-flag/],
  ])('rejects %j with a message naming the flag', (argv, message) => {
    expect(() => loadConfig(argv, {})).toThrow(message);
  });

  it('names the env var when the bad value came from the environment', () => {
    expect(() => loadConfig([], { GITOPS_RELOADER_DEBOUNCE: 'x' })).toThrow(/env GITOPS_RELOADER_DEBOUNCE/);
  });
});

describe('validSelector', () => {
  it.each([
    'app=web',
    'app==web',
    'tier!=db',
    'env in (prod, staging)',
    'env notin (dev)',
    'reload',
    '!legacy',
    'a=b,c in (d,e)',
  ])('accepts %j', (s) => expect(validSelector(s)).toBe(true));
  it.each(['a b', 'in (x)', '=x', 'a=(b)'])('rejects %j', (s) => expect(validSelector(s)).toBe(false));
});
