// `gitops-reloader migrate` on values files paraphrased from Reloader's chart documentation, and on
// a Deployment object as the API returns it.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { migrate, NOT_CARRIED_EXIT } from './migrate-command.ts';
import { fromDeployment } from './reloader-install.ts';
import { render, translate } from './translate.ts';

const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url).pathname;
const ourValues = parse(
  readFileSync(new URL('../../manifests/chart/gitops-reloader/values.yaml', import.meta.url), 'utf8'),
) as Record<string, unknown>;

async function run(...argv: string[]) {
  return runWith(argv);
}

/** migrate --values=- with `values` as its standard input. */
function runStdin(values: string) {
  return runWith(['--values=-'], () => values);
}

async function runWith(argv: string[], stdin?: () => string) {
  let out = '';
  let err = '';
  const code = await migrate(
    argv,
    {},
    (s) => {
      out += s;
    },
    (s) => {
      err += s;
    },
    ...(stdin ? [stdin] : []),
  );
  return { code, out, err, values: parse(out) as Record<string, unknown> };
}

/** Every leaf path of `v`, dotted (arrays and free-form maps are leaves). */
function paths(v: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(v).flatMap(([k, x]) =>
    x &&
    typeof x === 'object' &&
    !Array.isArray(x) &&
    !['resources', 'podAnnotations', 'nodeSelector', 'affinity'].includes(k)
      ? paths(x as Record<string, unknown>, `${prefix}${k}.`)
      : [`${prefix}${k}`],
  );
}

function has(root: Record<string, unknown>, path: string): boolean {
  let cur: unknown = root;
  for (const p of path.split('.')) {
    if (!cur || typeof cur !== 'object' || !(p in (cur as object))) return false;
    cur = (cur as Record<string, unknown>)[p];
  }
  return true;
}

describe('migrate --values', () => {
  it.each(['defaults.yaml', 'single-namespace.yaml', 'platform-team.yaml', 'custom-alerts.yaml'])(
    '%s: prints YAML whose every value is one of our chart values',
    async (name) => {
      const { values } = await run(`--values=${fixture(name)}`, '--namespace=tools');
      for (const p of paths(values)) expect(has(ourValues, p), p).toBe(true);
    },
  );

  it('carries the defaults over, saying what changes meaning, and exits 0', async () => {
    const { code, out, values } = await run(`--values=${fixture('defaults.yaml')}`);
    expect(code).toBe(0);
    expect(values).toMatchObject({
      reload: { defaultStrategy: 'restart' },
      argoRollouts: { enabled: false },
      replicas: 1,
      leaderElection: { enabled: true },
    });
    expect(out).toMatch(
      /# CHANGES MEANING: Reloader wrote an env var into the pod template; restart .*never writes the template\n {2}defaultStrategy: restart/,
    );
    expect(out).toMatch(/# CHANGES MEANING: Reloader left Argo Rollouts alone.*\n {2}enabled: false/);
    expect(out).not.toContain('NOT CARRIED OVER');
  });

  it('watches only the release namespace when Reloader did, and needs to be told which', async () => {
    const told = await run(`--values=${fixture('single-namespace.yaml')}`, '--namespace=tools');
    expect(told.code).toBe(0);
    expect(told.values).toMatchObject({ reload: { namespaces: ['tools'] } });
    const untold = await run(`--values=${fixture('single-namespace.yaml')}`);
    expect(untold.code).toBe(NOT_CARRIED_EXIT);
    expect(untold.out).toMatch(/NOT CARRIED OVER[\s\S]*watchGlobally: false .* run migrate with --namespace/);
  });

  it('translates a platform-team install: selectors, ignores, HA, metrics, monitoring', async () => {
    const { code, out, values } = await run(`--values=${fixture('platform-team.yaml')}`);
    expect(code).toBe(0);
    expect(values).toMatchObject({
      reload: {
        namespaceSelector: 'team=platform,reload',
        ignoreNamespaces: ['kube-system', 'monitoring'],
        ignoreResources: ['secrets'],
        ignoreWorkloadKinds: ['CronJob'],
        defaultStrategy: 'restart',
      },
      replicas: 2,
      leaderElection: { enabled: true },
      metrics: { countByNamespace: true },
      serviceMonitor: { enabled: true },
      csiIntegration: { enabled: true },
      logLevel: 'warn',
      resources: { requests: { cpu: '10m', memory: '128Mi' } },
    });
    expect(values.argoRollouts).toBeUndefined();
    expect(out).toMatch(/CHANGES MEANING: Reloader wrote an annotation into the pod template/);
    expect(out).toMatch(/CHANGES MEANING: Reloader's "key:value" list form, written as a label selector/);
    expect(out).toMatch(/CHANGES MEANING: scraped through a ServiceMonitor/);
  });

  it("carries Reloader's chat alert variables into alerts.* (docs/alerts.md)", async () => {
    const values = [
      'reloader:',
      '  deployment:',
      '    env:',
      '      open:',
      '        ALERT_ON_RELOAD: "true"',
      '        ALERT_SINK: webhook',
      '        ALERT_WEBHOOK_PROXY: http://proxy.invalid:3128',
      '        ALERT_ADDITIONAL_INFO: prod-eu',
      '        ALERT_WEBHOOK_URL: https://hooks.example.invalid/plain',
    ].join('\n');
    const { code, out, values: carried } = await runStdin(values);
    expect(code).toBe(0);
    expect(carried.alerts).toEqual({
      enabled: true,
      onFailure: false,
      sink: 'raw',
      proxy: 'http://proxy.invalid:3128',
      additionalInfo: 'prod-eu',
      webhookUrl: 'https://hooks.example.invalid/plain',
    });
    expect(out).not.toMatch(/CHANGES MEANING: .*sink/);
  });

  it('does not turn alerts on when Reloader had them on without a webhook URL (it sent none)', async () => {
    const { code, out, values } = await runStdin(
      'reloader:\n  deployment:\n    env:\n      open:\n        ALERT_ON_RELOAD: "true"\n',
    );
    expect(code).toBe(NOT_CARRIED_EXIT);
    expect(values.alerts).toBeUndefined();
    expect(out).toMatch(/ALERT_ON_RELOAD: alerts on without ALERT_WEBHOOK_URL/);
  });

  it('lists what cannot be carried over, exits 3, and never prints a Secret-sourced value', async () => {
    const { code, out, err, values } = await run(`--values=${fixture('custom-alerts.yaml')}`);
    expect(code).toBe(NOT_CARRIED_EXIT);
    expect(err).toMatch(/could not be carried over/);
    const notCarried = out.slice(out.indexOf('NOT CARRIED OVER'));
    expect(notCarried).not.toMatch(/--auto-annotation/);
    expect(values.extraArgs).toContain('--auto-annotation=example.io/reload-me');
    // Chat alerts are carried (docs/alerts.md), the Secret-sourced URL as a reference only.
    expect(notCarried).not.toMatch(/ALERT_/);
    expect(values.alerts).toMatchObject({ enabled: true, sink: 'slack', onFailure: false });
    expect(values.alerts).toMatchObject({ webhookUrlSecret: { key: 'ALERT_WEBHOOK_URL' } });
    expect(notCarried).toMatch(/isOpenshift/);
    expect(notCarried).toMatch(/--enable-pprof/);
    expect(out).not.toContain('hooks.slack.invalid');
    // What can be carried over still is.
    expect(values).toMatchObject({ reloadWebhook: { url: 'https://hooks.example.invalid/reloader' } });
  });

  it('reports values it does not know instead of dropping them silently', async () => {
    let out = '';
    const code = await migrate(
      ['--values=-'],
      {},
      (s) => {
        out += s;
      },
      () => undefined,
      () => 'reloader:\n  frobnicate: true\n',
    );
    expect(code).toBe(NOT_CARRIED_EXIT);
    expect(out).toMatch(/reloader\.frobnicate: not a value of Reloader's chart 2\.2\.16/);
  });

  it('carries reloadOnCreate: true over as --reload-on-create=true (named configs the template does not use)', async () => {
    let out = '';
    const code = await migrate(
      ['--values=-'],
      {},
      (s) => {
        out += s;
      },
      () => undefined,
      () => 'reloader:\n  reloadOnCreate: true\n  reloadOnDelete: true\n',
    );
    expect(code).toBe(0);
    expect(parse(out)).toMatchObject({
      reload: { reloadOnDelete: true },
      extraArgs: ['--reload-on-create=true'],
    });
  });

  it("keeps Reloader's observable surfaces: text logs unless told json, the ReloadFail reason, port 9090", async () => {
    expect((await run(`--values=${fixture('defaults.yaml')}`)).values).toMatchObject({
      logFormat: 'text',
      reloaderCompat: true,
      http: { port: 9090 },
    });
    let out = '';
    await migrate(
      ['--values=-'],
      {},
      (s) => {
        out += s;
      },
      () => undefined,
      () => 'reloader:\n  logFormat: json\n',
    );
    expect(parse(out)).toMatchObject({ logFormat: 'json' });
  });

  it('refuses to guess: one source, readable YAML', async () => {
    await expect(run()).rejects.toThrow(/exactly one of --values FILE, --manifests FILE or --deployment/);
    await expect(run('--values=/no/such/file')).rejects.toThrow(
      /cannot read --values \/no\/such\/file: ENOENT/,
    );
    await expect(run('--deployment=nope')).rejects.toThrow(/expected NAMESPACE\/NAME/);
  });
});

describe('a Reloader Deployment', () => {
  it('is read from its container args and env', () => {
    const install = fromDeployment({
      metadata: { name: 'reloader', namespace: 'ops' },
      spec: {
        replicas: 2,
        template: {
          spec: {
            containers: [
              {
                name: 'reloader',
                image: 'ghcr.io/stakater/reloader:v1.4.21',
                args: [
                  '--enable-ha=true',
                  '--resources-to-ignore=configMaps',
                  '--auto-annotation',
                  'reloader.stakater.com/auto',
                  '--auto-reload-all',
                ],
                env: [
                  {
                    name: 'KUBERNETES_NAMESPACE',
                    valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
                  },
                  { name: 'METRICS_COUNT_BY_NAMESPACE', value: 'enabled' },
                ],
              },
            ],
          },
        },
      },
    });
    const t = translate(install, { serveFlags: new Set() });
    expect(t.notCarried).toEqual([]);
    const values = parse(render(t, install.source)) as Record<string, unknown>;
    expect(values).toMatchObject({
      reload: { autoReloadAll: true, namespaces: ['ops'], ignoreResources: ['configmaps'] },
      replicas: 2,
      metrics: { countByNamespace: true },
    });
  });
});
