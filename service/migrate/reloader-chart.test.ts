// `migrate` on Reloader's real chart (2.2.16): for each value set of test/compat/reloader-chart/, the
// hand-written render of the chart (what `helm template` prints, checked against the real chart by
// `npm run compat -- --migrate-chart PATH`) and the values file itself must translate to the same
// values, and those values must be what the set means in Reloader: nothing dropped silently, and the
// result accepted by `gitops-reloader serve`.
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { relevant } from '../../test/compat/migrate-chart.ts';
import { loadConfig } from '../config/config.ts';
import { migrate, NOT_CARRIED_EXIT } from './migrate-command.ts';
import { renderChart } from './reloader-chart.ts';
import { reloaderSelectorReading } from './translate.ts';

const dir = new URL('../../test/compat/reloader-chart/', import.meta.url).pathname;
const SETS = readdirSync(dir)
  .filter((f) => f.endsWith('.values.yaml'))
  .map((f) => f.replace(/\.values\.yaml$/, ''))
  .sort();

async function run(...argv: string[]) {
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
  );
  const at = out.indexOf('# NOT CARRIED OVER');
  const notCarried = at < 0 ? [] : out.slice(at).split('\n').slice(1).filter(Boolean);
  return { code, out, err, values: (parse(out) ?? {}) as Record<string, unknown>, notCarried };
}
const both = (set: string) =>
  Promise.all([
    run(`--values=${dir}${set}.values.yaml`, '--namespace=tools'),
    run(`--manifests=${dir}${set}.rendered.yaml`),
  ]);

type Obj = Record<string, unknown>;
const objects = (set: string) =>
  parseAllDocuments(readFileSync(`${dir}${set}.rendered.yaml`, 'utf8'))
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
/**
 * The serve flags our chart (manifests/chart/gitops-reloader/templates/deployment.yaml) passes for
 * the values migrate writes; test/manifests/render.test.ts checks the same with the real chart.
 */
function serveArgs(v: Obj): string[] {
  const r = (v.reload ?? {}) as Obj;
  const args = [
    '--release-namespace=gr',
    `--default-strategy=${r.defaultStrategy}`,
    `--log-level=${v.logLevel ?? 'info'}`,
    `--leader-elect=${(v.leaderElection as Obj).enabled}`,
  ];
  if (v.reloaderCompat) args.push('--reloader-compat=true');
  if (v.logFormat === 'text') args.push('--log-format=text');
  if (r.autoReloadAll) args.push('--auto-reload-all=true');
  for (const [key, flag] of [
    ['namespaces', 'namespaces'],
    ['ignoreNamespaces', 'ignore-namespaces'],
    ['ignoreResources', 'ignore-resources'],
    ['ignoreWorkloadKinds', 'ignore-workload-kinds'],
  ] as const)
    if (Array.isArray(r[key]) && (r[key] as unknown[]).length > 0)
      args.push(`--${flag}=${(r[key] as string[]).join(',')}`);
  if (r.namespaceSelector) args.push(`--namespace-selector=${r.namespaceSelector}`);
  if (r.resourceLabelSelector) args.push(`--resource-label-selector=${r.resourceLabelSelector}`);
  if (r.reloadOnDelete) args.push('--reload-on-delete=true');
  const hook = (v.reloadWebhook ?? {}) as Obj;
  if (hook.url) args.push(`--webhook-url=${hook.url}`);
  if ((v.metrics as Obj | undefined)?.countByNamespace) args.push('--metrics-count-by-namespace=true');
  return [...args, ...((v.extraArgs as string[] | undefined) ?? [])];
}

describe("migrate on Reloader's chart 2.2.16", () => {
  it('has the value sets the issue asks for, and more', () => {
    expect(SETS).toEqual(
      expect.arrayContaining([
        'default',
        'ha',
        'namespaced',
        'selector',
        'custom-webhook',
        'webhook-alone',
        'scoped',
        'extras',
      ]),
    );
  });

  it.each(SETS)('%s: our reading of the chart renders what the chart renders', (set) => {
    const values = parse(readFileSync(`${dir}${set}.values.yaml`, 'utf8'));
    const theirs = relevant(objects(set));
    // The fixtures keep the objects migrate reads (Secrets, RoleBindings … left out).
    expect(relevant(renderChart(values, 'tools').objects, theirs.kinds)).toEqual(theirs);
  });

  it.each(SETS)(
    '%s: the values file and its render translate alike, and serve accepts the result',
    async (set) => {
      const [fromValues, fromRender] = await both(set);
      expect(fromValues.values).toEqual(fromRender.values);
      expect(fromValues.code).toBe(fromRender.code);
      expect(fromRender.notCarried.every((l) => fromValues.notCarried.includes(l))).toBe(true);
      expect(() => loadConfig(serveArgs(fromRender.values), {})).not.toThrow();
    },
  );

  it('reads a kubectl List of the same objects as the render', async () => {
    let out = '';
    await migrate(
      ['--manifests=-'],
      {},
      (t) => {
        out += t;
      },
      () => undefined,
      () => JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects('scoped') }),
    );
    expect(parse(out)).toEqual((await both('scoped'))[1].values);
  });

  it('default: Reloader as installed by default, nothing left over', async () => {
    const [v] = await both('default');
    expect(v.code).toBe(0);
    expect(v.values).toMatchObject({
      replicas: 1,
      logLevel: 'info',
      logFormat: 'text',
      reloaderCompat: true,
    });
    expect((v.values.reload as Obj).namespaces).toBeUndefined();
  });

  it('ha: two replicas with leader election; the chart-made anti-affinity is noted, not carried', async () => {
    const [v, m] = await both('ha');
    for (const r of [v, m]) {
      expect(r.code).toBe(0);
      expect(r.values).toMatchObject({ replicas: 2, leaderElection: { enabled: true } });
      expect(r.values.affinity).toBeUndefined();
      expect(r.out).toMatch(/deployment\.affinity: the chart's default for HA/);
    }
  });

  it('namespaced and scoped: the release namespace is watched, as the chart makes Reloader do', async () => {
    expect((await both('namespaced'))[1].values).toMatchObject({ reload: { namespaces: ['tools'] } });
    const [v, m] = await both('scoped');
    for (const r of [v, m])
      expect(r.values).toMatchObject({ reload: { namespaces: ['team-a', 'team-b', 'tools'] } });
    // Without the release namespace the values alone cannot say what Reloader watched.
    const blind = await run(`--values=${dir}scoped.values.yaml`);
    expect(blind.code).toBe(NOT_CARRIED_EXIT);
    expect(blind.out).toMatch(
      /reloader\.namespaces: the chart adds the release namespace .* run migrate with --namespace/,
    );
  });

  it("selector: the literal quotes of the chart are removed, Reloader's key:value form read", async () => {
    const [v, m] = await both('selector');
    for (const r of [v, m]) {
      expect(r.code).toBe(0);
      expect(r.values).toMatchObject({
        reload: {
          namespaceSelector: 'team=platform,reload',
          resourceLabelSelector: 'reloader=enabled',
          ignoreNamespaces: ['kube-system', 'monitoring'],
        },
      });
    }
  });

  it('selector: a quoted list Reloader read otherwise than term by term is reported, with both readings', async () => {
    let out = '';
    const code = await migrate(
      ['--values=-'],
      {},
      (s) => {
        out += s;
      },
      () => undefined,
      () => 'reloader:\n  namespaceSelector: "team:platform,env:prod"\n',
    );
    expect(code).toBe(NOT_CARRIED_EXIT);
    expect(out).toMatch(/namespaceSelector: team=platform,env=prod/);
    expect(out).toMatch(
      /Reloader v1\.4\.21 read this as "team=platform,env" .* term by term as "team=platform,env=prod"/,
    );
    expect(reloaderSelectorReading(['team:platform', 'env:*'])).toBe('team=platform,env');
  });

  it('custom-webhook: the custom keys are carried, and the webhook replaces reloads as in Reloader', async () => {
    const [v, m] = await both('custom-webhook');
    for (const r of [v, m]) {
      expect(r.code).toBe(0);
      expect(r.values).toMatchObject({ reloadWebhook: { url: 'https://hooks.example.invalid/reloader' } });
      expect(r.values.extraArgs).toEqual([
        '--auto-annotation=example.io/auto',
        '--configmap-annotation=example.io/configmap',
        '--secret-annotation=example.io/secret',
        '--ignore-annotation=example.io/ignore',
      ]);
    }
  });

  it('webhook-alone: the chart did not pass the webhook, so the install keeps reloading', async () => {
    const [v, m] = await both('webhook-alone');
    for (const r of [v, m]) {
      expect(r.code).toBe(0);
      expect(r.values.reloadWebhook).toBeUndefined();
    }
    expect(v.out).toMatch(
      /reloader\.webhookUrl: Reloader's chart passes --webhook-url only together with custom_annotations/,
    );
  });

  it('extras: every value carried or reported, never a Secret-sourced value printed', async () => {
    const [v, m] = await both('extras');
    for (const r of [v, m]) {
      expect(r.code).toBe(NOT_CARRIED_EXIT);
      expect(r.values).toMatchObject({
        reload: { ignoreResources: ['secrets'], ignoreWorkloadKinds: ['CronJob'], reloadOnDelete: true },
        replicas: 1,
        leaderElection: { enabled: true },
        logFormat: 'json',
        metrics: { countByNamespace: true },
        resources: { requests: { cpu: '10m', memory: '128Mi' }, limits: { memory: '512Mi' } },
        nodeSelector: { 'kubernetes.io/os': 'linux' },
        tolerations: [{ key: 'infra', operator: 'Exists', effect: 'NoSchedule' }],
        priorityClassName: 'system-cluster-critical',
        service: { port: 9090, annotations: { 'prometheus.io/scrape': 'true' } },
        extraArgs: ['--reload-on-create=true'],
        // Chat alerts carried: the webhook URL as a reference to the chart's Secret, never its value.
        alerts: {
          enabled: true,
          onFailure: false,
          sink: 'slack',
          webhookUrlSecret: { name: 'reloader-reloader', key: 'ALERT_WEBHOOK_URL' },
        },
      });
      const reported = r.notCarried.join('\n');
      for (const what of [
        'deployment.runtimeClassName: gvisor',
        'service.ipFamilyPolicy: SingleStack',
        // From another Secret (env.existing): our chart reads it as a value only.
        'env ALERT_ADDITIONAL_INFO: from a Secret or field',
      ])
        expect(reported).toContain(what);
      expect(reported).not.toContain('ALERT_ON_RELOAD');
      expect(r.out).toMatch(/goes with Reloader's release: create it yourself first/);
      expect(r.out).not.toContain('hooks.slack.invalid');
      expect(r.out).toMatch(
        /readOnlyRootFileSystem: gitops-reloader always runs on a read-only root filesystem/,
      );
    }
  });

  it('reports deployment.* and service.* values with no equivalent, and values the chart does not have', async () => {
    let out = '';
    const code = await migrate(
      ['--values=-'],
      {},
      (s) => {
        out += s;
      },
      () => undefined,
      () =>
        [
          'reloader:',
          '  deployment:',
          '    dnsConfig: { nameservers: [1.2.3.4] }',
          '    annotations: { a: b }',
          '    volumes: [{ name: x, emptyDir: {} }]',
          '    livenessProbe: { timeoutSeconds: 30 }',
          '    containerSecurityContext: { runAsUser: 0 }',
          '    frob: 1',
          '  service: { labels: { x: y } }',
          '  custom_annotations: { nonsense: x }',
          '  rbac: { labels: { r: s } }',
        ].join('\n'),
    );
    expect(code).toBe(NOT_CARRIED_EXIT);
    for (const what of [
      'deployment.dnsConfig: {"nameservers":["1.2.3.4"]}',
      'deployment.annotations: {"a":"b"}',
      'deployment.volumes: [{"name":"x","emptyDir":{}}]',
      'deployment.livenessProbe:',
      'deployment.containerSecurityContext: {"runAsUser":0}',
      "reloader.deployment.frob: not a value of Reloader's chart 2.2.16",
      'service.labels: {"x":"y"}',
      "reloader.custom_annotations.nonsense: not a value of Reloader's chart 2.2.16",
      'rbac.labels: {"r":"s"}',
    ])
      expect(out.slice(out.indexOf('NOT CARRIED OVER'))).toContain(what);
  });
});
