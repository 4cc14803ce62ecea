// Stakater Reloader's metric families on /metrics of the real service after a reload, a skip and an
// error on the real control plane. The error is real too: a ValidatingAdmissionPolicy refuses the
// annotate strategy's write to one Deployment.
import { afterEach, describe, expect } from 'vitest';
import { RELOADER_FAMILIES } from '../../service/reloader-metrics.ts';
import { refuse } from '../support/admission.ts';
import { it, type Kube } from '../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

/** Refuses every update of the Deployment `name` in `namespace`; returns a clean-up. */
function freeze(kube: Kube, namespace: string, name: string): Promise<() => Promise<void>> {
  return refuse(kube, namespace, {
    name: 'freeze',
    rules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['deployments'] }],
    allowWhen: `object.metadata.name != '${name}'`,
    message: `${name} is frozen`,
    probe: () =>
      kube.apps.patchNamespacedDeployment({
        name,
        namespace,
        body: { metadata: { labels: { probe: String(Date.now()) } } },
      }),
  });
}

/** Parses the exposition text: sample lines → value, keyed by `name{labels}` as printed. */
function parse(text: string): { types: Map<string, string>; values: Map<string, number> } {
  const types = new Map(
    [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] as string, m[2] as string]),
  );
  const values = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\S+?(?:\{.*\})?) (\S+)$/.exec(line);
    if (m && !line.startsWith('#')) values.set(m[1] as string, Number(m[2]));
  }
  return { types, values };
}

const sum = (values: Map<string, number>, match: RegExp) =>
  [...values].filter(([k]) => match.test(k)).reduce((a, [, v]) => a + v, 0);

describe("Reloader's metrics", () => {
  it('are all on /metrics after a reload, a skip and an error, with the values they count', async ({
    kube,
    namespace,
  }) => {
    for (const name of ['app', 'frozen']) {
      await kube.core.createNamespacedConfigMap({ namespace, body: configMap(name, { k: '1' }) });
    }
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        annotations: { 'reloader.stakater.com/auto': 'true' },
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('broken', {
        annotations: { 'reloader.stakater.com/auto': 'true', 'gitops-reloader.io/strategy': 'annotate' },
        container: { envFrom: [{ configMapRef: { name: 'frozen' } }] },
      }),
    });
    await waitReadyPods(kube, namespace, 'web', 1);
    await waitReadyPods(kube, namespace, 'broken', 1);
    const thaw = await freeze(kube, namespace, 'broken');
    try {
      const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      const url = `${String(svc.logs.find((l) => l.msg === 'http listening')?.url)}/metrics`;

      // A reload.
      await kube.core.replaceNamespacedConfigMap({
        name: 'app',
        namespace,
        body: configMap('app', { k: '2' }),
      });
      await waitForEvent(kube, namespace, 'Reloaded', 'web');
      // Skips: a label-only edit (no data change), and a config no workload uses.
      const relabelled = configMap('app', { k: '2' });
      relabelled.metadata = { ...relabelled.metadata, labels: { touched: 'yes' } };
      await kube.core.replaceNamespacedConfigMap({ name: 'app', namespace, body: relabelled });
      await kube.core.createNamespacedConfigMap({ namespace, body: configMap('lonely', { k: '1' }) });
      // An error: the annotate strategy's write is refused.
      await kube.core.replaceNamespacedConfigMap({
        name: 'frozen',
        namespace,
        body: configMap('frozen', { k: '2' }),
      });
      const failed = await waitForEvent(kube, namespace, 'ReloadFailed', 'broken');
      expect(failed.message).toMatch(/frozen/);

      const { types, values } = await waitFor(
        async () => {
          const got = parse(await (await fetch(url)).text());
          const skipped = sum(got.values, /^reloader_skipped_total\{reason="(no_data_change|no_match)"\}/);
          return skipped >= 2 ? got : pending({ skipped });
        },
        { describe: 'both skips counted', timeout: 20_000 },
      );
      for (const [name, [type]] of Object.entries(RELOADER_FAMILIES)) {
        expect(types.get(name), name).toBe(type);
      }
      const v = (k: string) => values.get(k) ?? 0;
      expect(v('reloader_reload_executed_total{success="true"}')).toBe(1);
      expect(v('reloader_reload_executed_total{success="false"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_action_total{workload_kind="Deployment",result="success"}')).toBe(1);
      expect(v('reloader_action_total{workload_kind="Deployment",result="error"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_action_latency_seconds_count{workload_kind="Deployment"}')).toBeGreaterThanOrEqual(
        2,
      );
      expect(v('reloader_skipped_total{reason="no_data_change"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_skipped_total{reason="no_match"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_errors_total{type="update_workload"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_retries_total')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_reconcile_total{result="success"}')).toBeGreaterThanOrEqual(3);
      expect(v('reloader_reconcile_total{result="skipped"}')).toBeGreaterThanOrEqual(1);
      expect(v('reloader_reconcile_duration_seconds_count{result="success"}')).toBe(
        v('reloader_reconcile_total{result="success"}'),
      );
      expect(
        v('reloader_events_received_total{event_type="update",resource_type="configmaps"}'),
      ).toBeGreaterThanOrEqual(3);
      expect(
        v('reloader_events_received_total{event_type="add",resource_type="configmaps"}'),
      ).toBeGreaterThanOrEqual(3);
      expect(
        v('reloader_events_processed_total{event_type="update",resource_type="configmaps",result="success"}'),
      ).toBeGreaterThanOrEqual(2);
      expect(v('reloader_workloads_scanned_total{kind="Deployment"}')).toBeGreaterThanOrEqual(2);
      expect(v('reloader_workloads_matched_total{kind="Deployment"}')).toBeGreaterThanOrEqual(2);
      expect(v('reloader_workqueue_adds_total')).toBeGreaterThanOrEqual(2);
      expect(v('reloader_workqueue_latency_seconds_count')).toBeGreaterThanOrEqual(2);
      expect(values.has('reloader_workqueue_depth')).toBe(true);
      // The API requests: the refused PATCH is a 4xx, the Events are created with POST.
      expect(
        sum(values, /^rest_client_requests_total\{code="4\d\d",method="PATCH",host="127\.0\.0\.1:\d+"\}/),
      ).toBeGreaterThanOrEqual(1);
      expect(sum(values, /^rest_client_requests_total\{code="201",method="POST",/)).toBeGreaterThanOrEqual(1);
      expect(sum(values, /^rest_client_request_duration_seconds_count\{verb="GET",/)).toBeGreaterThan(0);
      // Bounded labels: no namespace or object name in any Reloader family (by-namespace is off).
      const names = [namespace, 'web', 'broken', 'frozen', 'lonely', 'app'];
      for (const key of values.keys()) {
        if (!/^(reloader_|rest_client_)/.test(key)) continue;
        for (const n of names) expect(key, key).not.toContain(`"${n}"`);
      }
      // Our own families stay next to Reloader's.
      expect(v('gitops_reloader_reloads_total{strategy="restart",kind="Deployment",result="success"}')).toBe(
        1,
      );
    } finally {
      await thaw();
    }
  });
});
