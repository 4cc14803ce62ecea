// What the files of defects the engine simulation found share (sim-found*.test.ts): a held webhook
// receiver, the slow two-pod Deployment web, an eviction block, and the log and write-time helpers.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { Kube } from '../support/kube.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

const servers: Server[] = [];

/** After each test: the services it started are killed and its webhook receivers closed. */
export async function cleanUp(): Promise<void> {
  await killAll();
  for (const s of servers.splice(0)) s.closeAllConnections();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
}

/**
 * A --webhook-url receiver on loopback that answers nothing by itself: the test answers each POST
 * when it chooses (a reload held running as long as the test needs, then failed or delivered).
 */
export async function heldReceiver(): Promise<{ url: string; open: ServerResponse[]; got: () => number }> {
  const open: ServerResponse[] = [];
  let got = 0;
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      got++;
      open.push(res);
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/reloads`, open, got: () => got };
}

/** The first log line at or after index `from` that matches. */
export const logAfter = (
  svc: RunningService,
  what: string,
  from: number,
  match: (l: { msg: string; [k: string]: unknown }) => boolean,
  timeout?: number,
) => svc.waitForLog(what, (l) => svc.logs.indexOf(l) >= from && match(l), timeout);

/**
 * Two pods of web replaced one at a time (maxUnavailable 1, no surge), each new one Ready 4 s after it
 * starts: a reload runs long enough to act on it midway. `note` is a pod-template annotation (changing
 * it rolls the Deployment).
 */
export const slowWeb = (configs: string[], note = '1') =>
  deployment('web', {
    replicas: 2,
    maxUnavailable: 1,
    maxSurge: 0,
    annotations: { 'reloader.stakater.com/auto': 'true' },
    podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '4s', 'example.com/note': note },
    container: { envFrom: configs.map((name) => ({ configMapRef: { name } })) },
  });

/** PodDisruptionBudget `web` allowing no disruption of web's pods: a reload's evictions are refused. */
export const blockEvictions = (kube: Kube, namespace: string) =>
  kube.policy.createNamespacedPodDisruptionBudget({
    namespace,
    body: {
      metadata: { name: 'web' },
      spec: { maxUnavailable: 0, selector: { matchLabels: { app: 'web' } } },
    },
  });

/** The service with --webhook-url=hook (and `extra`), once ready. */
export async function webhookService(namespace: string, hook: { url: string }, extra: string[]) {
  const svc = startService(
    serviceArgs(namespace, await hashKeyFile(), [
      '--debounce=0s',
      `--webhook-url=${hook.url}`,
      '--webhook-timeout=120s',
      ...extra,
    ]),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return svc;
}

/** Waits until one POST is open at the receiver (a reload running, its answer up to the test). */
export const posted = (hook: { open: ServerResponse[]; got: () => number }, what: string) =>
  waitFor(() => (hook.open.length === 1 ? true : pending(hook.got())), { describe: what, timeout: 30_000 });

/** When the API server stamped an object's latest write (whole seconds, its clock). */
export const writtenAt = (o: V1ConfigMap) =>
  Math.max(...(o.metadata?.managedFields ?? []).map((f) => new Date(f.time ?? 0).getTime()));

export const setApp = (kube: Kube, namespace: string, k: string) =>
  kube.core.replaceNamespacedConfigMap({ name: 'app', namespace, body: configMap('app', { k }) });
