// Precision: Argo CD syncs that each change 3 configs of one workload (held while the sync runs,
// released as one batch), the same 3-config change without Argo CD (inside the debounce window), and
// probes that must reload nothing (a key the workload does not use; a config nobody uses). Then the
// bench waits until no reload has started for longer than a repeat reload could take to show up.
import { finishSync, startSync } from '../argocd.ts';
import type { Context } from '../context.ts';
import { changeConfig, quiet, SERVICE_DEFAULTS } from '../context.ts';
import { appName, configName, workload } from '../fixture.ts';
import { layout } from '../scale.ts';

export interface PrecisionResult {
  syncs: number;
  sync_reloads: number;
  sync_reloads_per_workload: Record<string, number>;
  bursts: number;
  burst_reloads: number;
  probes: number;
  probe_reloads: number;
  quiet_s: number;
}

export async function precision(ctx: Context): Promise<PrecisionResult> {
  const { kube, scale: s, names: n, alloc } = ctx;
  const since = Date.now();
  for (const i of alloc.syncs) {
    const w = workload(n, s, i);
    const configs = [w.envFrom, w.keyRef, w.volume];
    ctx.reloads.expect(w.namespace, w.name);
    const sync = await startSync(kube, n.argocd, appName(w));
    for (const c of configs) await changeConfig(ctx, c);
    await finishSync(kube, sync, configs);
  }
  ctx.say(`precision: ${alloc.syncs.length} Argo CD syncs written`);
  for (const i of alloc.bursts) {
    const w = workload(n, s, i);
    ctx.reloads.expect(w.namespace, w.name);
    for (const c of [w.envFrom, w.keyRef, w.volume]) await changeConfig(ctx, c);
  }
  ctx.say(`precision: ${alloc.bursts.length} 3-config bursts written`);
  const { configsPerNs } = layout(s);
  for (const [j, i] of alloc.probes.entries()) {
    const w = workload(n, s, i);
    // k1 of the valueFrom config: the workload only reads k0.
    await changeConfig(ctx, w.keyRef, 'k1');
    // A config nobody uses (from the top of the namespace's unreferenced slots).
    await changeConfig(ctx, {
      kind: j % 2 === 0 ? 'ConfigMap' : 'Secret',
      namespace: w.namespace,
      name: configName(j % 2 === 0 ? 'ConfigMap' : 'Secret', configsPerNs - 1 - Math.floor(j / s.namespaces)),
    });
  }
  ctx.say(`precision: ${alloc.probes.length * 2} changes that must reload nothing`);
  // A second reload of the same batch would come after --min-reload-interval (plus a debounce).
  const quietMs = SERVICE_DEFAULTS.minReloadIntervalMs + SERVICE_DEFAULTS.debounceMs + 5000;
  await quiet(ctx, quietMs, 30 * 60_000);
  const count = (indices: number[]) => {
    const per: Record<string, number> = {};
    for (const i of indices) {
      const w = workload(n, s, i);
      per[`${w.namespace}/${w.name}`] = ctx.reloads
        .of(w.namespace, w.name)
        .filter((r) => r.startedAt >= since).length;
    }
    return per;
  };
  const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
  const syncs = count(alloc.syncs);
  const bursts = count(alloc.bursts);
  const probes = count(alloc.probes);
  return {
    syncs: alloc.syncs.length,
    sync_reloads: sum(syncs),
    sync_reloads_per_workload: Object.fromEntries(Object.entries(syncs).filter(([, v]) => v !== 1)),
    bursts: alloc.bursts.length,
    burst_reloads: sum(bursts),
    probes: alloc.probes.length,
    probe_reloads: sum(probes),
    quiet_s: quietMs / 1000,
  };
}
