// Start-up: the first start (fresh install: every workload gets a baseline in the ledger), then
// `startupRuns` pairs of restarts over that ledger: one straight to the API server (timings and
// memory, untouched by the proxy) and one through the counting proxy (requests). Each is timed from
// spawn to /readyz = 200 (RSS read at that moment) and to acting (leader, every workload judged:
// the 'ready' log line). Requests are counted up to acting, i.e. the whole start-up. The last
// (proxied) process keeps running: it is the default-flags service of the phases that follow.
import { type Counts, diff, total } from '../api-proxy.ts';
import type { Context } from '../context.ts';
import { startService } from '../context.ts';
import type { ServiceProcess } from '../service.ts';

export interface StartupRun {
  first_install: boolean;
  proxied: boolean;
  ready_s: number;
  ready_signal: 'readyz' | 'log';
  caches_synced_s?: number;
  /** Until the service acts: leader, ledger loaded, every workload judged. */
  acting_s: number;
  rss_ready_mib: number;
  rss_acting_mib: number;
  /** CPU seconds (user + system) the process used from spawn until /readyz = 200. */
  cpu_ready_s: number;
  /** The same, until acting. */
  cpu_acting_s: number;
  /** Proxied runs: requests from spawn until acting (each watch request counts once). */
  api_requests?: number;
  /** Proxied runs: requests from spawn until /readyz answered 200. */
  api_requests_at_readyz?: number;
  api_requests_by_verb?: Counts;
}

const TIMEOUT_MS = 15 * 60_000;

async function once(ctx: Context, label: string, proxied: boolean, firstInstall: boolean) {
  const before = proxied ? await ctx.proxy.counts() : {};
  const svc = await startService(ctx, { label, proxied });
  const ready = await svc.waitReady(TIMEOUT_MS);
  const rss = svc.rssMiB();
  const cpuReady = svc.cpuSeconds();
  const atReady = proxied ? await ctx.proxy.counts() : {};
  const acting = await svc.waitActing(TIMEOUT_MS);
  const rssActing = svc.rssMiB();
  const cpuActing = svc.cpuSeconds();
  const after = proxied ? await ctx.proxy.counts() : {};
  const synced = svc.logs.find((l) => l.msg === 'caches synced');
  const syncedAt = synced && typeof synced.time === 'string' ? Date.parse(synced.time) : undefined;
  const requests = diff(after, before);
  const run: StartupRun = {
    first_install: firstInstall,
    proxied,
    ready_s: (ready.at - svc.startedAt) / 1000,
    ready_signal: ready.signal,
    ...(syncedAt ? { caches_synced_s: (syncedAt - svc.startedAt) / 1000 } : {}),
    acting_s: (acting - svc.startedAt) / 1000,
    rss_ready_mib: rss,
    rss_acting_mib: rssActing,
    cpu_ready_s: cpuReady,
    cpu_acting_s: cpuActing,
    ...(proxied
      ? {
          api_requests: total(requests),
          api_requests_at_readyz: total(diff(atReady, before)),
          api_requests_by_verb: requests,
        }
      : {}),
  };
  ctx.say(
    `start-up ${label}: ready in ${run.ready_s.toFixed(2)}s, acting in ${run.acting_s.toFixed(2)}s, RSS ${rss.toFixed(1)} MiB, ${cpuReady.toFixed(2)} CPU s to ready${proxied ? `, ${run.api_requests} API requests` : ''}`,
  );
  return { run, svc };
}

async function stop(svc: ServiceProcess): Promise<void> {
  const code = await svc.stop();
  if (code !== 0) throw new Error(`the service exited with ${code} on SIGTERM`);
}

export async function startup(ctx: Context): Promise<{ runs: StartupRun[]; service: ServiceProcess }> {
  const runs: StartupRun[] = [];
  const first = await once(ctx, 'first-install', true, true);
  runs.push(first.run);
  let last = first.svc;
  for (let r = 1; r <= ctx.scale.startupRuns; r++) {
    await stop(last);
    const direct = await once(ctx, `restart-${r}-direct`, false, false);
    runs.push(direct.run);
    await stop(direct.svc);
    const proxied = await once(ctx, `restart-${r}-proxied`, true, false);
    runs.push(proxied.run);
    last = proxied.svc;
  }
  return { runs, service: last };
}
