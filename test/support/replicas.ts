// Runs gitops-reloader as the chart runs it: the chart rendered with `helm template` and applied with
// `kubectl apply` (its ServiceAccount, RBAC, Role), and N real service processes started with the
// Deployment's own args, each as that ServiceAccount, each talking to the API server through its own
// ApiProxy (which records every request and can partition the replica). The leader audit below reads
// those records: it is what the API server saw, not what the service says about itself.
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, inject } from 'vitest';
import { deploymentOf, helmTemplate, type K8sObject, parseObjects, run } from '../manifests/tools.ts';
import { ApiProxy, type ProxiedRequest } from './api-proxy.ts';
import type { Kube } from './kube.ts';
import { killAll, type RunningService, startService } from './service.ts';
import { TEST_TIMINGS } from './timings.ts';
import { pending, waitFor } from './wait-for.ts';

/** Lease timings short enough for tests (the chart's extraArgs, as a user would set them). */
export const FAST_LEASE: string[] = [...TEST_TIMINGS.lease];

export interface Release {
  name: string;
  fullname: string;
  namespace: string;
  objects: K8sObject[];
  /** The Deployment's container args, with the HTTP address on loopback. */
  args: string[];
  /** Applies the rendered chart again (as a re-sync would). */
  apply(): Promise<void>;
  uninstall(): Promise<void>;
}

function kubectl(args: string[], input?: string) {
  return run('kubectl', ['--kubeconfig', inject('kubeconfig'), ...args], { input });
}

/**
 * `helm template | kubectl apply` of the chart into `namespace`, watching only `watch` namespaces
 * (the control plane is shared with other suites). The Deployment is not applied: its pods are the
 * processes startReplica runs.
 */
export async function installRelease(
  namespace: string,
  o: {
    watch: string[];
    set?: string[];
    extraArgs?: string[];
    /** Enables the webhook; the token the chart would mount from its Secret is written to a local file. */
    webhookToken?: string;
    /**
     * Flux: the namespaces of its Kustomizations, and the Flux event endpoint's token (the chart mounts
     * it from the Secret `tokenSecret`, which the Provider references too; here a local file).
     */
    flux?: { namespaces: string[]; webhookToken?: string; tokenSecret?: string };
  },
): Promise<Release> {
  const name = `gr-${randomBytes(3).toString('hex')}`;
  const localFile = async (what: string, token: string) => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), `gr-${what}-`)), 'token');
    await writeFile(file, token, { mode: 0o600 });
    return file;
  };
  const tokenFile = o.webhookToken !== undefined ? await localFile('webhook', o.webhookToken) : undefined;
  const fluxTokenFile =
    o.flux?.webhookToken !== undefined ? await localFile('flux-webhook', o.flux.webhookToken) : undefined;
  // The values a user would write: which namespaces to watch, extra flags, the webhook.
  const valuesFile = path.join(await mkdtemp(path.join(tmpdir(), 'gr-values-')), 'values.yaml');
  await writeFile(
    valuesFile,
    JSON.stringify({
      // Progressive reloads on, as by default; a short settle keeps multi-workload tests quick.
      reload: { namespaces: o.watch, progressive: { settle: '2s' } },
      // No Argo CD here: its namespace (where the chart would grant reading Applications) does not exist.
      argocd: { enabled: false },
      extraArgs: o.extraArgs ?? [],
      ...(tokenFile ? { webhook: { enabled: true, tokenSecret: { name: `${name}-webhook` } } } : {}),
      ...(o.flux
        ? {
            flux: {
              namespaces: o.flux.namespaces,
              ...(fluxTokenFile
                ? { webhook: { enabled: true, tokenSecret: { name: o.flux.tokenSecret ?? `${name}-flux` } } }
                : {}),
            },
          }
        : {}),
    }),
  );
  const set = o.set ?? [];
  const render = async () => helmTemplate(name, namespace, { values: [valuesFile], set });
  const text = await render();
  const objects = parseObjects(text);
  const applied = () =>
    objects
      .filter((x) => x.kind !== 'Deployment')
      .map((x) => JSON.stringify(x))
      .join('\n---\n');
  const apply = async () => {
    // Rendered afresh each time, as Argo CD does on every sync.
    const again = parseObjects(await render()).filter((x) => x.kind !== 'Deployment');
    await kubectl(['apply', '-f', '-'], again.map((x) => JSON.stringify(x)).join('\n---\n'));
  };
  await kubectl(['apply', '-f', '-'], applied());
  const container = deploymentOf(objects).spec.template.spec.containers[0];
  // Files the pod would mount are local files here; the HTTP port is a free loopback one.
  const args = ((container?.args as string[] | undefined) ?? [])
    .map((a) =>
      a.startsWith('--http-address=')
        ? '--http-address=127.0.0.1:0'
        : a.startsWith('--webhook-token-file=') && tokenFile
          ? `--webhook-token-file=${tokenFile}`
          : a.startsWith('--flux-webhook-token-file=') && fluxTokenFile
            ? `--flux-webhook-token-file=${fluxTokenFile}`
            : a,
    )
    // Every replica runs on this host: each its own status port (a pod has its own loopback).
    .concat('--status-address=127.0.0.1:0');
  const fullname = deploymentOf(objects).metadata.name;
  return {
    name,
    fullname,
    namespace,
    objects,
    args,
    apply,
    uninstall: async () => {
      await kubectl(['delete', '--ignore-not-found', '--wait=false', '-f', '-'], applied()).catch(
        () => undefined,
      );
    },
  };
}

export interface Replica {
  identity: string;
  svc: RunningService;
  proxy: ApiProxy;
  /** The replica's HTTP base URL (metrics, probes, webhook). */
  url: string;
}

/** A kubeconfig for the release's ServiceAccount that reaches the API server through `proxy`. */
async function kubeconfigThrough(kube: Kube, release: Release, proxy: ApiProxy): Promise<string> {
  const token = await kube.core.createNamespacedServiceAccountToken({
    name: release.fullname,
    namespace: release.namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-replica-'));
  const file = path.join(dir, 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      { name: 'proxy', cluster: { server: proxy.url, 'certificate-authority-data': await proxy.caData() } },
    ],
    users: [{ name: release.fullname, user: { token: token.status?.token } }],
    contexts: [{ name: 'replica', context: { cluster: 'proxy', user: release.fullname } }],
    'current-context': 'replica',
  };
  await writeFile(file, JSON.stringify(config), { mode: 0o600 });
  return file;
}

/** Starts one replica of the release (a new process; a restarted pod is a new one too). */
export async function startReplica(
  kube: Kube,
  release: Release,
  identity: string,
  extra: string[] = [],
  /** Set up the proxy before the process starts (e.g. make its watches lag). */
  prepare?: (proxy: ApiProxy) => void,
): Promise<Replica> {
  const proxy = await ApiProxy.start(kube.kc);
  prepare?.(proxy);
  const kubeconfig = await kubeconfigThrough(kube, release, proxy);
  const svc = startService(
    [
      ...release.args,
      `--kubeconfig=${kubeconfig}`,
      `--leader-identity=${identity}`,
      '--log-level=debug',
      ...extra,
    ],
    { POD_NAMESPACE: release.namespace, POD_NAME: identity },
  );
  const listening = await svc.waitForLog(`${identity} listens`, (l) => l.msg === 'http listening', 60_000);
  return { identity, svc, proxy, url: String(listening.url) };
}

/**
 * Starts the release's leader and then its standby: the first replica acts ('ready') before the second
 * starts, and the second has synced its caches on return. Both are pushed to `started` for clean-up.
 */
export async function leaderAndStandby(
  kube: Kube,
  release: Release,
  started: Replica[],
  names: [string, string] = ['replica-a', 'replica-b'],
): Promise<[Replica, Replica]> {
  const leader = await startReplica(kube, release, names[0]);
  started.push(leader);
  await leader.svc.waitForLog(`${names[0]} acts`, (l) => l.msg === 'ready', 60_000);
  const standby = await startReplica(kube, release, names[1]);
  started.push(standby);
  await standby.svc.waitForLog(`${names[1]} synced`, (l) => l.msg === 'caches synced', 60_000);
  return [leader, standby];
}

/** A metric's value from a replica's /metrics (the sum over its series matching `labels`). */
export async function metric(r: Replica, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${r.url}/metrics`)).text();
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const l = m[2] ?? '';
    if (!Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) continue;
    sum += Number(m[3]);
    found = true;
  }
  if (!found) throw new Error(`no metric ${name}${JSON.stringify(labels)} on ${r.identity}`);
  return sum;
}

/** Waits until exactly one of the replicas acts as leader (its metric says so), and returns it. */
export async function waitForLeader(replicas: Replica[], timeout = 30_000): Promise<Replica> {
  return waitFor(
    async () => {
      const live = replicas.filter((r) => r.svc.proc.exitCode === null && r.svc.proc.signalCode === null);
      const acting: Replica[] = [];
      for (const r of live) {
        if (r.proxy.isCut) continue;
        if ((await metric(r, 'gitops_reloader_leader').catch(() => 0)) === 1) acting.push(r);
      }
      return acting.length === 1 ? (acting[0] as Replica) : pending(acting.map((r) => r.identity));
    },
    { describe: 'one acting leader', timeout },
  );
}

/** A write the leader audit found: made by a replica while another one held the Lease. */
export interface NonLeaderWrite {
  replica: string;
  request: ProxiedRequest;
  holder: string;
}

const LEASES = '/apis/coordination.k8s.io/v1/namespaces/';

/**
 * Every write to the cluster that a replica made while it did not hold the Lease, from what the
 * proxies saw. Lease ownership changes when a Lease write naming a holder succeeds (from the moment
 * it was sent, the conservative end). Writes that any replica may make are not counted: the Lease
 * itself, Events, notification inbox records, and the hash-key Secret created at first start.
 */
export function nonLeaderWrites(replicas: Replica[]): NonLeaderWrite[] {
  const changes: Array<{ at: number; holder: string }> = [];
  for (const r of replicas) {
    for (const q of r.proxy.requests) {
      if (!q.path.startsWith(LEASES) || !q.path.includes('/leases')) continue;
      if ((q.method !== 'PUT' && q.method !== 'POST') || (q.status !== 200 && q.status !== 201)) continue;
      const holder = (q.body as { spec?: { holderIdentity?: string } } | undefined)?.spec?.holderIdentity;
      if (holder === undefined) continue;
      changes.push({ at: q.sentAt, holder });
    }
  }
  changes.sort((a, b) => a.at - b.at);
  const holderAt = (t: number) => {
    let h = '';
    for (const c of changes) {
      if (c.at > t) break;
      h = c.holder;
    }
    return h;
  };
  const out: NonLeaderWrite[] = [];
  for (const r of replicas) {
    for (const q of r.proxy.requests) {
      if (q.method === 'GET') continue;
      if (q.path.includes('/leases') || q.path.includes('/events')) continue;
      if (q.method === 'POST') {
        const name = (q.body as { metadata?: { name?: string } } | undefined)?.metadata?.name ?? '';
        if (/-notify-[0-9a-f]+$/.test(name) || /-hash-key$/.test(name)) continue;
      }
      // The replica must hold the Lease when it sends the write, and still when it is answered.
      const end = q.answeredAt ?? q.endedAt ?? Number.POSITIVE_INFINITY;
      const holderThen = holderAt(q.sentAt);
      const takenMeanwhile = changes.find((c) => c.at > q.sentAt && c.at < end && c.holder !== r.identity);
      if (holderThen !== r.identity) out.push({ replica: r.identity, request: q, holder: holderThen });
      else if (takenMeanwhile) out.push({ replica: r.identity, request: q, holder: takenMeanwhile.holder });
    }
  }
  return out;
}

/**
 * The releases and replicas a test file starts, registered for clean-up after each test: every
 * service process killed, each replica's proxy closed, each release uninstalled.
 */
export function stoppedAfterEach(): { releases: Release[]; replicas: Replica[] } {
  const releases: Release[] = [];
  const replicas: Replica[] = [];
  afterEach(async () => {
    await killAll();
    for (const r of replicas.splice(0)) await r.proxy.close();
    for (const r of releases.splice(0)) await r.uninstall();
  });
  return { releases, replicas };
}
