// Stakater Reloader's metric families: names, types and label names as Reloader v1.4 declares them
// (internal/pkg/metrics/prometheus.go), and label values kept to fixed sets.
import { describe, expect, it } from 'vitest';
import { Metrics } from './metrics.ts';
import { RELOADER_FAMILIES } from './reloader-metrics.ts';

/** name → label sets of its samples (bucket/sum/count folded into the family, `le` dropped). */
function samples(text: string): Map<string, Array<Record<string, string>>> {
  const out = new Map<string, Array<Record<string, string>>>();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+?)(_bucket|_sum|_count)?(?:\{(.*)\})? [0-9.e+-]+$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[3] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g))
      if (k !== 'le') labels[k as string] = v as string;
    const name = m[1] as string;
    out.set(name, [...(out.get(name) ?? []), labels]);
  }
  return out;
}

function types(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1] as string, m[2] as string]));
}

function exercise(m: Metrics) {
  const r = m.reloader;
  m.reloadStarted('restart', 'Deployment', 'shop').finish('success', 1);
  m.reloadStarted('restart', 'StatefulSet', 'shop').finish('failure');
  r.actionLatency('Deployment', 3.2);
  r.skipped('no_data_change');
  r.error('update_workload');
  r.retry();
  r.queueDepthFrom(() => 2);
  r.queueAdded();
  r.queueLatency(0.01);
  r.eventReceived('update', 'configmaps');
  r.reconciled('update', 'configmaps', 'success', 0.002);
  r.workloadsScanned('Deployment');
  r.workloadMatched('Deployment');
  r.apiRequest('GET', '127.0.0.1:6443', '200', 0.004);
}

describe('Reloader metric families', () => {
  it('exports every Reloader v1.4 family with its type and label names', async () => {
    const m = new Metrics({ defaultMetrics: false });
    exercise(m);
    const text = await m.text();
    const t = types(text);
    const s = samples(text);
    for (const [name, [type, labels]] of Object.entries(RELOADER_FAMILIES)) {
      expect(t.get(name), name).toBe(type);
      const seen = s.get(name) ?? [];
      expect(seen.length, `${name} has samples`).toBeGreaterThan(0);
      for (const l of seen) expect(Object.keys(l).sort(), name).toEqual([...labels].sort());
    }
  });

  it('counts what was exercised with the values a Reloader dashboard queries', async () => {
    const m = new Metrics({ defaultMetrics: false });
    exercise(m);
    const text = await m.text();
    expect(text).toContain('reloader_reload_executed_total{success="true"} 1');
    expect(text).toContain('reloader_reload_executed_total{success="false"} 1');
    expect(text).toContain('reloader_action_total{workload_kind="Deployment",result="success"} 1');
    expect(text).toContain('reloader_action_total{workload_kind="StatefulSet",result="error"} 1');
    expect(text).toContain('reloader_workqueue_depth 2');
    expect(text).toContain(
      'reloader_events_processed_total{event_type="update",resource_type="configmaps",result="success"} 1',
    );
    expect(text).toContain('rest_client_requests_total{code="200",method="GET",host="127.0.0.1:6443"} 1');
  });

  it('exports the by-namespace counter only when enabled, as Reloader does', async () => {
    const off = new Metrics({ defaultMetrics: false });
    off.reloadStarted('restart', 'Deployment', 'shop').finish('success');
    expect(await off.text()).not.toContain('reloader_reload_executed_total_by_namespace');
    const on = new Metrics({ defaultMetrics: false, countByNamespace: true });
    on.reloadStarted('restart', 'Deployment', 'shop').finish('success');
    expect(await on.text()).toContain(
      'reloader_reload_executed_total_by_namespace{success="true",namespace="shop"} 1',
    );
  });

  it('keeps label values to fixed sets: anything else is "other" or "<error>"', async () => {
    const m = new Metrics({ defaultMetrics: false });
    const r = m.reloader;
    r.skipped('secret-value-xyz' as never);
    r.error('my-namespace' as never);
    r.eventReceived('update', 'widgets');
    r.workloadsScanned('Pod');
    r.apiRequest('BREW', 'h:1', 'teapot', 0.1);
    const text = await m.text();
    expect(text).toContain('reloader_skipped_total{reason="other"} 1');
    expect(text).toContain('reloader_errors_total{type="other"} 1');
    expect(text).toContain('reloader_events_received_total{event_type="update",resource_type="other"} 1');
    expect(text).toContain('reloader_workloads_scanned_total{kind="other"} 1');
    expect(text).toContain('rest_client_requests_total{code="<error>",method="other",host="h:1"} 1');
    expect(text).not.toMatch(/secret-value-xyz|my-namespace|widgets|teapot|BREW/);
  });

  it('starts both success series of reloader_reload_executed_total at 0', async () => {
    const text = await new Metrics({ defaultMetrics: false }).text();
    expect(text).toContain('reloader_reload_executed_total{success="true"} 0');
    expect(text).toContain('reloader_reload_executed_total{success="false"} 0');
  });
});
