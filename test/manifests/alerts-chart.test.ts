// The chart's alerts values (docs/alerts.md), rendered by `helm template` as users install it: the
// webhook URL reaches the service only as ALERT_WEBHOOK_URL from a Secret (the user's, or the chart's
// own made from alerts.webhookUrl), never in the pod spec; the other settings become flags the service
// defines, and a switched-on alert without a URL fails the render.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../service/config/config.ts';
import { chartDir, deploymentOf, helmTemplate, parseObjects, run } from './tools.ts';

const URL = 'https://hooks.slack.com/services/T0/B0/chart-s3cr3t';
const render = async (set: string[]) => parseObjects(await helmTemplate('gr', 'ops', { set }));

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}
const container = (objects: ReturnType<typeof parseObjects>) =>
  deploymentOf(objects).spec.template.spec.containers[0] as unknown as { args: string[]; env: EnvVar[] };

describe('the Helm chart: alerts', () => {
  it('renders nothing of alerts by default', async () => {
    const objects = await render([]);
    const c = container(objects);
    expect(c.args.filter((a) => a.startsWith('--alert'))).toEqual([]);
    expect(c.env.filter((e) => e.name.startsWith('ALERT_'))).toEqual([]);
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
  });

  it('reads the URL from an existing Secret, and the rest as flags the service accepts', async () => {
    const objects = await render([
      'alerts.enabled=true',
      'alerts.sink=teams',
      'alerts.webhookUrlSecret.name=chat',
      'alerts.webhookUrlSecret.key=teams-url',
      'alerts.proxy=http://proxy.corp:3128',
      'alerts.additionalInfo=prod-eu',
      'alerts.onFailure=false',
      'alerts.timeout=5s',
    ]);
    const c = container(objects);
    expect(c.args.filter((a) => a.startsWith('--alert'))).toEqual([
      '--alert-on-reload=true',
      '--alert-sink=teams',
      '--alert-on-failure=false',
      '--alert-timeout=5s',
    ]);
    expect(c.env.filter((e) => e.name.startsWith('ALERT_'))).toEqual([
      { name: 'ALERT_WEBHOOK_URL', valueFrom: { secretKeyRef: { name: 'chat', key: 'teams-url' } } },
      { name: 'ALERT_WEBHOOK_PROXY', value: 'http://proxy.corp:3128' },
      { name: 'ALERT_ADDITIONAL_INFO', value: 'prod-eu' },
    ]);
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    // What the service makes of it, the Secret's value standing in for the secretKeyRef.
    const env = Object.fromEntries(c.env.map((e) => [e.name, e.value ?? URL]));
    const cfg = loadConfig(c.args.slice(1), env);
    expect(cfg.alerts).toMatchObject({
      sink: 'teams',
      onFailure: false,
      timeoutMs: 5_000,
      additionalInfo: 'prod-eu',
      webhook: { origin: 'https://hooks.slack.com' },
      proxy: { origin: 'http://proxy.corp:3128' },
    });
  });

  it('puts a URL given as a value in a Secret of its own, not in the pod spec', async () => {
    const objects = await render(['alerts.enabled=true', `alerts.webhookUrl=${URL}`]);
    const secret = objects.find((o) => o.kind === 'Secret');
    expect(secret?.metadata.name).toBe('gr-gitops-reloader-alerts');
    expect((secret as unknown as { stringData: Record<string, string> }).stringData).toEqual({ url: URL });
    const c = container(objects);
    expect(c.env.find((e) => e.name === 'ALERT_WEBHOOK_URL')).toEqual({
      name: 'ALERT_WEBHOOK_URL',
      valueFrom: { secretKeyRef: { name: 'gr-gitops-reloader-alerts', key: 'url' } },
    });
    expect(JSON.stringify(deploymentOf(objects))).not.toContain('chart-s3cr3t');
  });

  it('fails the render when alerts are on without a URL, or the sink is unknown', async () => {
    for (const [set, why] of [
      [['alerts.enabled=true'], /alerts.enabled needs alerts.webhookUrlSecret.name/],
      [['alerts.enabled=true', 'alerts.sink=discord', `alerts.webhookUrl=${URL}`], /sink/],
    ] as const) {
      const args = ['template', 'gr', chartDir, '--namespace', 'ops', ...set.flatMap((s) => ['--set', s])];
      await expect(run('helm', args)).rejects.toThrow(why);
    }
  });
});
