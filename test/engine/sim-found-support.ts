// What the files of defects the engine simulation found share (sim-found*.test.ts): a held webhook
// receiver, the slow two-pod Deployment web, an eviction block, and the log and write-time helpers.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { Kube } from '../support/kube.ts';
import { livePods, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { setApp } from '../support/web-app.ts';
import { deployment } from '../support/workloads.ts';

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

/**
 * The service (--reload-deadline=8s) over the Deployment web already created; app changes (A1), and
 * once A1 evicted one old pod the second is blocked by a budget that allows no disruption: A1 will
 * stall until its deadline. Returns web's pods before, the service, and a match of web's lines.
 */
export async function startA1ThenBlock(kube: Kube, namespace: string) {
  const before = await waitReadyPods(kube, namespace, 'web', 2);
  const svc = startService(
    serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--reload-deadline=8s']),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
  await setApp(kube, namespace, '2');
  await svc.waitForLog('A1 started', (l) => web(l) && l.msg === 'reload started');
  await waitFor(
    async () => {
      const live = await livePods(kube, namespace, 'web');
      return before.some((p) => !live.some((q) => q.uid === p.uid)) ? true : pending(live);
    },
    { describe: 'the first old pod evicted', timeout: 30_000 },
  );
  await blockEvictions(kube, namespace);
  return { before, svc, web };
}
