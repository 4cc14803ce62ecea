// The Grafana dashboard shipped with the chart queries only metrics the service exports, with label
// names those metrics have: a renamed metric or label breaks this test, not a user's dashboard.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Metrics } from './metrics.ts';

const file = new URL('../manifests/chart/gitops-reloader/dashboards/gitops-reloader.json', import.meta.url);

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}

/** Every metric family the service exports, with its label names (histograms: _bucket/_sum/_count too). */
async function exported(): Promise<Map<string, Set<string>>> {
  const m = new Metrics({ countByNamespace: true });
  const out = new Map<string, Set<string>>();
  for (const fam of await m.registry.getMetricsAsJSON()) {
    // prom-client keeps each metric's declared label names on the metric object.
    const declared = (m.registry.getSingleMetric(fam.name) as unknown as { labelNames?: string[] })
      .labelNames;
    const labels = new Set<string>(['job', 'instance', ...(declared ?? [])]);
    if (String(fam.type) === 'histogram') labels.add('le');
    for (const suffix of String(fam.type) === 'histogram' ? ['_bucket', '_sum', '_count'] : ['']) {
      out.set(fam.name + suffix, labels);
    }
  }
  return out;
}

describe('the Grafana dashboard', () => {
  const dashboard = JSON.parse(readFileSync(file, 'utf8')) as { uid: string; panels: Panel[] };
  const exprs = dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr })),
  );

  it('has panels with queries', () => {
    expect(dashboard.uid).toBe('gitops-reloader');
    expect(exprs.length).toBeGreaterThan(15);
  });

  it('queries only exported metrics, by labels they have', async () => {
    const metrics = await exported();
    for (const { panel, expr } of exprs) {
      const names = [...expr.matchAll(/\b((?:reloader|gitops_reloader|rest_client)_[a-z_]+)\b/g)].map(
        (m) => m[1] as string,
      );
      expect(names.length, panel).toBeGreaterThan(0);
      for (const name of names) {
        const labels = metrics.get(name);
        expect(labels, `${panel}: ${name} is not exported`).toBeDefined();
        // Labels a `by (...)` clause groups a metric by.
        const owner = [...expr.matchAll(/\bby \(([^)]*)\)\s*\(rate\(([a-z_]+)/g)];
        for (const [, by, metric] of owner) {
          for (const l of (by as string).split(',').map((s) => s.trim())) {
            expect(metrics.get(metric as string)?.has(l), `${panel}: ${metric} has no label ${l}`).toBe(true);
          }
        }
      }
    }
  });

  it("covers every one of Reloader's families", async () => {
    const { RELOADER_FAMILIES } = await import('./reloader-metrics.ts');
    const queried = exprs.map((e) => e.expr).join('\n');
    const missing = Object.keys(RELOADER_FAMILIES).filter(
      (name) => !new RegExp(`\\b${name}(_bucket|_sum|_count)?\\b`).test(queried),
    );
    expect(missing).toEqual([]);
  });
});
