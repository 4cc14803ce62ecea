// What every phase shares: the cluster, the fixture's names, the pod and reload records, the running
// service, and the few writes the bench makes (a config change, an Argo CD sync).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ApiProxy } from './api-proxy.ts';
import type { Kube } from './cluster.ts';
import { type Allocation, BENCH_LABEL, type ConfigName, type Names } from './fixture.ts';
import type { PodObserver, PodRecord } from './pods.ts';
import type { ReloadLog } from './reloads.ts';
import type { Scale } from './scale.ts';
import { freePort, ServiceProcess } from './service.ts';

export interface Context {
  kube: Kube;
  scale: Scale;
  names: Names;
  alloc: Allocation;
  pods: PodObserver;
  reloads: ReloadLog;
  proxy: ApiProxy;
  /** Where service logs and scratch files go. */
  workDir: string;
  hashKeyFile: string;
  /** The service build serves /readyz (it has --http-address). */
  readyz: boolean;
  say(msg: string): void;
  /** Services started so far, for cleanup. */
  services: ServiceProcess[];
}

/** Service defaults that the bench relies on (and reports). */
export const SERVICE_DEFAULTS = {
  debounceMs: 3000,
  minReloadIntervalMs: 10_000,
  maxConcurrentReloads: 20,
  apiWriteQps: 20,
  apiWriteBurst: 30,
};

export interface StartOptions {
  label: string;
  /** Through the counting proxy (true) or straight to the API server. */
  proxied: boolean;
  flags?: string[];
}

export async function startService(ctx: Context, o: StartOptions): Promise<ServiceProcess> {
  let kubeconfig = ctx.kube.kubeconfigPath;
  if (o.proxied) {
    kubeconfig = path.join(ctx.workDir, 'proxy.kubeconfig');
    writeFileSync(kubeconfig, ctx.proxy.kubeconfig, { mode: 0o600 });
  }
  const args = [
    `--kubeconfig=${kubeconfig}`,
    // Watch cluster-wide like a real install, act only in the run's namespaces.
    `--namespace-selector=${BENCH_LABEL}=${ctx.names.run}`,
    `--release-namespace=${ctx.names.system}`,
    `--hash-key-file=${ctx.hashKeyFile}`,
    `--argocd-namespaces=${ctx.names.argocd}`,
    ...(o.flags ?? []),
  ];
  const port = ctx.readyz ? await freePort() : undefined;
  const n = ctx.services.length;
  const svc = new ServiceProcess(args, path.join(ctx.workDir, `service-${n}-${o.label}.log`), port);
  ctx.services.push(svc);
  ctx.reloads.follow(svc, `${n}-${o.label}`);
  return svc;
}

/** A value that certainly differs from the current one. */
function freshValue(kind: ConfigName['kind']): string {
  const v = `changed-${Date.now()}-${randomBytes(96).toString('base64')}`;
  return kind === 'Secret' ? Buffer.from(v).toString('base64') : v;
}

/** Changes one key of a config; resolves with when the API server accepted it (epoch ms). */
export async function changeConfig(ctx: Context, c: ConfigName, key = 'k0'): Promise<number> {
  const body = [{ op: 'add', path: `/data/${key}`, value: freshValue(c.kind) }];
  if (c.kind === 'ConfigMap')
    await ctx.kube.core.patchNamespacedConfigMap({ name: c.name, namespace: c.namespace, body });
  else await ctx.kube.core.patchNamespacedSecret({ name: c.name, namespace: c.namespace, body });
  return Date.now();
}

/** Resolves with the first pod action after `since` on a workload: a pod deleted (evicted) or a surge pod created. */
export async function firstAction(
  ctx: Context,
  namespace: string,
  app: string,
  since: number,
  timeoutMs: number,
): Promise<{ at: number; kind: 'eviction' | 'surge' }> {
  const hit = (p: PodRecord): { at: number; kind: 'eviction' | 'surge' } | undefined => {
    if (p.namespace !== namespace || p.app !== app) return undefined;
    if (p.createdAsSurge && p.firstSeenAt >= since) return { at: p.firstSeenAt, kind: 'surge' };
    if (!p.surge && p.deletingAt !== undefined && p.deletingAt >= since)
      return { at: p.deletingAt, kind: 'eviction' };
    return undefined;
  };
  const found = ctx.pods
    .ofApp(namespace, app)
    .map(hit)
    .filter((x) => x !== undefined)
    .sort((a, b) => a.at - b.at)[0];
  if (found) return found;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(
        new Error(
          `no eviction or surge pod for ${namespace}/${app} within ${timeoutMs / 1000}s of the change`,
        ),
      );
    }, timeoutMs);
    const off = ctx.pods.on((p) => {
      const h = hit(p);
      if (!h) return;
      clearTimeout(timer);
      off();
      resolve(h);
    });
  });
}

/** Resolves once fewer than `limit` reloads run, so a new change is not queued behind others. */
export async function belowInFlight(ctx: Context, limit: number, timeoutMs = 300_000): Promise<void> {
  if (ctx.reloads.inFlight() < limit) return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`reloads in flight stayed at ${ctx.reloads.inFlight()} for ${timeoutMs / 1000}s`));
    }, timeoutMs);
    const off = ctx.reloads.on(() => {
      if (ctx.reloads.inFlight() >= limit) return;
      clearTimeout(timer);
      off();
      resolve();
    });
  });
}

/**
 * Waits until no reload has started or ended for `quietMs` and none runs: anything a change could
 * still cause has shown itself.
 */
export async function quiet(ctx: Context, quietMs: number, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = Date.now();
  const off = ctx.reloads.on(() => {
    last = Date.now();
  });
  try {
    for (;;) {
      if (ctx.reloads.inFlight() === 0 && Date.now() - last >= quietMs) return;
      if (Date.now() > deadline) {
        throw new Error(
          `reloads did not settle within ${timeoutMs / 1000}s (${ctx.reloads.inFlight()} in flight)`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    off();
  }
}

/** Polls an in-memory condition (no API calls) until it holds. */
export async function until<T>(what: string, timeoutMs: number, check: () => T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
