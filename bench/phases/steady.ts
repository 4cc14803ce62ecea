// Memory after idle churn: the service runs with nothing to reload while unreferenced ConfigMaps and
// Secrets keep changing (as in a busy cluster); RSS is sampled every few seconds, and the steady
// figure summarises the samples of the last quarter of the period. The service's CPU time over the
// period is read from /proc/<pid>/stat at its start and end.
import type { Context } from '../context.ts';
import { changeConfig, sleep } from '../context.ts';
import { type ConfigName, configName } from '../fixture.ts';
import { layout } from '../scale.ts';
import type { ServiceProcess } from '../service.ts';
import { round } from '../stats.ts';

export interface SteadyResult {
  after_s: number;
  churn_updates: number;
  samples_mib: Array<[number, number]>;
  steady_samples_mib: number[];
  peak_mib: number;
  /** CPU seconds (user + system) the service used over the period. */
  cpu_s: number;
}

export async function steady(ctx: Context, svc: ServiceProcess): Promise<SteadyResult> {
  const { scale: s, names: n } = ctx;
  const { configsPerNs, deploymentsPerNs } = layout(s);
  const firstFree = 3 * deploymentsPerNs;
  const free: ConfigName[] = [];
  for (let slot = firstFree; slot < configsPerNs; slot++) {
    for (const namespace of n.workNamespaces) {
      free.push({ kind: 'ConfigMap', namespace, name: configName('ConfigMap', slot) });
      free.push({ kind: 'Secret', namespace, name: configName('Secret', slot) });
    }
  }
  // Half the unreferenced configs churn; the probes of the precision phase use the other half.
  const churnSet = free.slice(0, Math.max(1, Math.floor(free.length / 2)));
  const cpu0 = svc.cpuSeconds();
  const t0 = Date.now();
  const end = t0 + s.steadyAfterS * 1000;
  const samples: Array<[number, number]> = [[0, svc.rssMiB()]];
  let updates = 0;
  let nextSample = t0 + 5000;
  const gap = 1000 / s.churnPerS;
  while (Date.now() < end) {
    const tick = t0 + updates * gap;
    if (tick > Date.now()) await sleep(tick - Date.now());
    await changeConfig(ctx, churnSet[updates % churnSet.length] as ConfigName, `k${updates % 4}`);
    updates++;
    if (Date.now() >= nextSample) {
      samples.push([round((Date.now() - t0) / 1000, 1), svc.rssMiB()]);
      nextSample += 5000;
    }
  }
  samples.push([round((Date.now() - t0) / 1000, 1), svc.rssMiB()]);
  const cpu = svc.cpuSeconds() - cpu0;
  const lastQuarter = samples.filter(([t]) => t >= s.steadyAfterS * 0.75).map(([, v]) => v);
  const steadySamples = lastQuarter.length >= 3 ? lastQuarter : samples.slice(-3).map(([, v]) => v);
  ctx.say(
    `steady: ${updates} churn updates in ${s.steadyAfterS}s; RSS now ${samples.at(-1)?.[1].toFixed(1)} MiB; ${cpu.toFixed(2)} CPU seconds`,
  );
  return {
    after_s: s.steadyAfterS,
    churn_updates: updates,
    samples_mib: samples.map(([t, v]) => [t, round(v, 1)]),
    steady_samples_mib: steadySamples,
    peak_mib: Math.max(...samples.map(([, v]) => v)),
    cpu_s: round(cpu, 2),
  };
}
