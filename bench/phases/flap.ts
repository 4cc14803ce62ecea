// Flapping: one config changes `flapPerS` times a second for `flapSeconds`; count the reloads it
// causes, and check each started at least --min-reload-interval after the previous one ended.
import type { Context } from '../context.ts';
import { changeConfig, quiet, SERVICE_DEFAULTS, sleep } from '../context.ts';
import { FLAP, FLAP_CONFIG } from '../fixture.ts';
import { round } from '../stats.ts';

export interface FlapResult {
  seconds: number;
  changes: number;
  reloads: number;
  /** Seconds from each reload's end to the next one's start. */
  gaps_s: number[];
  min_reload_interval_s: number;
  respects_min_reload_interval: boolean;
  /** The last reload's cutoff is after the last change: the final config is what runs. */
  last_change_covered: boolean;
}

export async function flap(ctx: Context): Promise<FlapResult> {
  const { scale: s, names: n } = ctx;
  const cfg = { kind: 'ConfigMap' as const, namespace: n.extra, name: FLAP_CONFIG };
  ctx.reloads.expect(n.extra, FLAP);
  const t0 = Date.now();
  const count = s.flapSeconds * s.flapPerS;
  let lastAccepted = t0;
  for (let k = 0; k < count; k++) {
    const at = t0 + (k * 1000) / s.flapPerS;
    if (at > Date.now()) await sleep(at - Date.now());
    lastAccepted = await changeConfig(ctx, cfg);
  }
  ctx.say(
    `flap: ${count} changes in ${((Date.now() - t0) / 1000).toFixed(1)}s; waiting for the reloads to settle`,
  );
  await quiet(ctx, SERVICE_DEFAULTS.minReloadIntervalMs + SERVICE_DEFAULTS.debounceMs + 5000, 10 * 60_000);
  const windows = ctx.reloads.of(n.extra, FLAP).filter((w) => w.startedAt >= t0);
  const gaps: number[] = [];
  for (let i = 1; i < windows.length; i++) {
    const prev = windows[i - 1];
    const end = prev?.completedAt ?? prev?.failedAt;
    if (end !== undefined) gaps.push(round(((windows[i]?.startedAt ?? 0) - end) / 1000, 2));
  }
  const last = windows.at(-1);
  return {
    seconds: s.flapSeconds,
    changes: count,
    reloads: windows.length,
    gaps_s: gaps,
    min_reload_interval_s: SERVICE_DEFAULTS.minReloadIntervalMs / 1000,
    // Log lines are read a few ms after they are written: allow 100 ms.
    respects_min_reload_interval: gaps.every((g) => g >= SERVICE_DEFAULTS.minReloadIntervalMs / 1000 - 0.1),
    last_change_covered: last !== undefined && last.cutoffMs >= lastAccepted,
  };
}
