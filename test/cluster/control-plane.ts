// Starts and stops the local control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, all on loopback with free ports, plus three kwok-managed nodes.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { type ArgoCdEndpoints, removeSockets, startArgoCd } from './argocd.ts';
import { type FluxEndpoints, startFlux } from './flux.ts';
import { renderKubeconfig } from './kubeconfig.ts';
import { launch, probe, until } from './launch.ts';
import type { ClusterPaths } from './paths.ts';
import { generatePki, type Identity, type Pki, readPem } from './pki.ts';
import { exitOf, isOurs, type Started, stop } from './processes.ts';

export const NODE_COUNT = 3;
export const nodeNames = Array.from({ length: NODE_COUNT }, (_, i) => `kwok-node-${i}`);

export interface ClusterState {
  startedAt: string;
  server: string;
  processes: Started[];
  /** Set once Argo CD, Argo Rollouts and the git server are up (see argocd.ts). */
  argocd?: ArgoCdEndpoints;
  /** Set once the Flux controllers are up (see flux.ts); they read from the Argo CD part's git server. */
  flux?: FluxEndpoints;
}

const clients: readonly Identity[] = [
  { name: 'admin', commonName: 'gitops-reloader-admin', organization: 'system:masters' },
  { name: 'controller-manager', commonName: 'system:kube-controller-manager' },
  { name: 'scheduler', commonName: 'system:kube-scheduler' },
  // kwok plays every kubelet (node status, pod status, leases, deletion), so it gets full rights.
  { name: 'kwok', commonName: 'kwok', organization: 'system:masters' },
];

export async function readState(paths: ClusterPaths): Promise<ClusterState | undefined> {
  if (!existsSync(paths.stateFile)) return undefined;
  return JSON.parse(await readFile(paths.stateFile, 'utf8')) as ClusterState;
}

export interface StatusReport {
  running: boolean;
  problems: string[];
  state?: ClusterState;
}

export async function status(paths: ClusterPaths): Promise<StatusReport> {
  const state = await readState(paths);
  if (!state) return { running: false, problems: ['no cluster state (.cluster/state.json)'] };
  const problems = state.processes
    .filter((p) => !isOurs(p))
    .map((p) => `${p.name} (pid ${p.pid}) is not running`);
  if (problems.length === 0) {
    const pki = path.join(paths.state, 'pki');
    const r = await probe({
      url: `${state.server}/readyz`,
      ca: await readPem(path.join(pki, 'ca.crt')),
      cert: await readPem(path.join(pki, 'admin.crt')),
      key: await readPem(path.join(pki, 'admin.key')),
    });
    if (r.status !== 200) problems.push(`kube-apiserver /readyz: HTTP ${r.status} ${r.body.slice(0, 200)}`);
  }
  return { running: problems.length === 0, problems, state };
}

export async function down(paths: ClusterPaths): Promise<string[]> {
  const state = await readState(paths);
  const report: string[] = [];
  if (state) {
    // Reverse start order: clients first, etcd last.
    for (const p of [...state.processes].reverse()) {
      report.push(`${p.name} (pid ${p.pid}): ${await stop(p)}`);
    }
  }
  await removeSockets(state?.argocd);
  await rm(paths.state, { recursive: true, force: true });
  await rm(paths.kubeconfig, { force: true });
  await rm(paths.stateFile, { force: true });
  return report;
}

export interface UpResult {
  seconds: number;
  state: ClusterState;
  /** Parts started next to an environment that was already running without them. */
  added?: Part[];
}

/** The optional parts of the environment, in start order (Flux reads from Argo CD's git server). */
export type Part = 'argocd' | 'flux';

/** What a running environment lacks of what `options` asks for; more than asked is left running. */
export function missingParts(state: Pick<ClusterState, 'argocd' | 'flux'>, options: UpOptions = {}): Part[] {
  const missing: Part[] = [];
  if (options.argocd !== false && !state.argocd) missing.push('argocd');
  if (options.argocd !== false && options.flux !== false && !state.flux) missing.push('flux');
  return missing;
}

/**
 * Starts the missing parts next to a running control plane (one started with --no-argocd, e.g. by
 * `npm run bench`, or by a checkout without Flux). If that fails, what it started is stopped again
 * and the control plane is left as it was.
 */
async function addParts(
  paths: ClusterPaths,
  state: ClusterState,
  missing: readonly Part[],
  say: (msg: string) => void,
): Promise<UpResult> {
  const t0 = performance.now();
  say(`the running control plane lacks ${missing.join(' and ')}: starting it next to it`);
  const processes = [...state.processes];
  const added: Started[] = [];
  let next: ClusterState = state;
  const write = (s: ClusterState) => writeFile(paths.stateFile, `${JSON.stringify(s, null, 2)}\n`);
  const ctx = {
    paths,
    kubeconfig: paths.kubeconfig,
    register: async (p: Started) => {
      processes.push(p);
      added.push(p);
      await write({ ...next, processes });
    },
    say,
  };
  try {
    if (missing.includes('argocd')) next = { ...next, processes, argocd: await startArgoCd(ctx) };
    if (missing.includes('flux')) next = { ...next, processes, flux: await startFlux(ctx) };
    await write(next);
    return { seconds: (performance.now() - t0) / 1000, state: next, added: [...missing] };
  } catch (err) {
    for (const p of added.reverse()) await stop(p);
    await write(state);
    throw err;
  }
}

export interface UpOptions {
  /** Also start Argo CD, Argo Rollouts and the git server (default true). */
  argocd?: boolean;
  /** Also start the Flux controllers (default true; never without the Argo CD part's git server). */
  flux?: boolean;
}

export async function up(
  paths: ClusterPaths,
  say: (msg: string) => void,
  options: UpOptions = {},
): Promise<UpResult> {
  const t0 = performance.now();
  const current = await status(paths);
  if (current.running && current.state) {
    const missing = missingParts(current.state, options);
    if (missing.length === 0) return { seconds: 0, state: current.state };
    return addParts(paths, current.state, missing, say);
  }
  if (current.state) await down(paths); // half-dead leftovers from an earlier run

  const pkiDir = path.join(paths.state, 'pki');
  await mkdir(pkiDir, { recursive: true });
  await mkdir(paths.logs, { recursive: true });
  const pki = await generatePki(pkiDir, clients);
  const bin = (name: string) => path.join(paths.bin, name);
  const log = (name: string) => path.join(paths.logs, `${name}.log`);

  const processes: Started[] = [];
  let argocd: ArgoCdEndpoints | undefined;
  let flux: FluxEndpoints | undefined;
  const saveState = async (server: string) => {
    const state: ClusterState = {
      startedAt: new Date().toISOString(),
      server,
      processes,
      ...(argocd ? { argocd } : {}),
      ...(flux ? { flux } : {}),
    };
    await writeFile(paths.stateFile, `${JSON.stringify(state, null, 2)}\n`);
    return state;
  };
  let server = '';
  const register = async (p: Started) => {
    processes.push(p);
    await saveState(server);
  };

  try {
    const etcd = await launch(
      {
        name: 'etcd',
        binary: bin('etcd'),
        logFile: log('etcd'),
        ports: 2,
        args: ([client, peer]) => [
          '--name=default',
          `--data-dir=${path.join(paths.state, 'etcd')}`,
          `--listen-client-urls=http://127.0.0.1:${client}`,
          `--advertise-client-urls=http://127.0.0.1:${client}`,
          `--listen-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
          `--initial-cluster=default=http://127.0.0.1:${peer}`,
          // A test cluster can lose its data on a machine crash; speed matters more.
          '--unsafe-no-fsync',
          '--log-level=warn',
        ],
        health: ([client]) => ({ url: `http://127.0.0.1:${client}/health` }),
        timeoutMs: 30_000,
      },
      register,
      say,
    );
    const etcdUrl = `http://127.0.0.1:${etcd.ports[0]}`;

    const admin = pki.client('admin');
    const adminProbe = {
      ca: await readPem(pki.caCert),
      cert: await readPem(admin.cert),
      key: await readPem(admin.key),
    };
    const api = await launch(
      {
        name: 'kube-apiserver',
        binary: bin('kube-apiserver'),
        logFile: log('kube-apiserver'),
        ports: 1,
        args: ([port]) => [
          `--etcd-servers=${etcdUrl}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--secure-port=${port}`,
          `--cert-dir=${path.join(paths.state, 'apiserver')}`,
          `--tls-cert-file=${pki.serverCert}`,
          `--tls-private-key-file=${pki.serverKey}`,
          `--client-ca-file=${pki.caCert}`,
          `--service-account-key-file=${pki.serviceAccountPub}`,
          `--service-account-signing-key-file=${pki.serviceAccountKey}`,
          '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
          '--service-cluster-ip-range=10.96.0.0/16',
          '--authorization-mode=Node,RBAC',
          // No real endpoints exist for the kubernetes Service on loopback.
          '--endpoint-reconciler-type=none',
          '--allow-privileged=true',
          '--profiling=false',
          '--v=1',
        ],
        health: ([port]) => ({ url: `https://127.0.0.1:${port}/readyz`, ...adminProbe }),
        timeoutMs: 60_000,
      },
      register,
      say,
    );
    server = `https://127.0.0.1:${api.ports[0]}`;
    await saveState(server);

    for (const c of clients) {
      const { cert, key } = pki.client(c.name);
      const file = c.name === 'admin' ? paths.kubeconfig : path.join(paths.state, `${c.name}.kubeconfig`);
      await writeFile(
        file,
        renderKubeconfig({
          server,
          caPem: adminProbe.ca,
          certPem: await readPem(cert),
          keyPem: await readPem(key),
          user: c.commonName,
        }),
        { mode: 0o600 },
      );
    }
    const kc = (name: string) => path.join(paths.state, `${name}.kubeconfig`);

    await Promise.all([
      launch(
        {
          name: 'kube-controller-manager',
          binary: bin('kube-controller-manager'),
          logFile: log('kube-controller-manager'),
          ports: 1,
          args: ([port]) => [
            `--kubeconfig=${kc('controller-manager')}`,
            `--authentication-kubeconfig=${kc('controller-manager')}`,
            `--authorization-kubeconfig=${kc('controller-manager')}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${port}`,
            `--cert-dir=${path.join(paths.state, 'controller-manager')}`,
            `--service-account-private-key-file=${pki.serviceAccountKey}`,
            `--root-ca-file=${pki.caCert}`,
            '--use-service-account-credentials=true',
            '--leader-elect=false',
            '--controllers=*',
            '--v=1',
          ],
          health: ([port]) => ({ url: `https://127.0.0.1:${port}/healthz` }),
          timeoutMs: 60_000,
        },
        register,
        say,
      ),
      launch(
        {
          name: 'kube-scheduler',
          binary: bin('kube-scheduler'),
          logFile: log('kube-scheduler'),
          ports: 1,
          args: ([port]) => [
            `--kubeconfig=${kc('scheduler')}`,
            `--authentication-kubeconfig=${kc('scheduler')}`,
            `--authorization-kubeconfig=${kc('scheduler')}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${port}`,
            `--cert-dir=${path.join(paths.state, 'scheduler')}`,
            '--leader-elect=false',
            '--v=1',
          ],
          health: ([port]) => ({ url: `https://127.0.0.1:${port}/readyz` }),
          timeoutMs: 60_000,
        },
        register,
        say,
      ),
      launch(
        {
          name: 'kwok',
          binary: bin('kwok'),
          logFile: log('kwok'),
          ports: 1,
          args: ([port]) => [
            `--kubeconfig=${kc('kwok')}`,
            `--config=${path.join(paths.root, 'test', 'cluster', 'kwok', 'stages.yaml')}`,
            '--manage-all-nodes=false',
            '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
            '--node-ip=127.0.0.1',
            '--cidr=10.244.0.1/16',
            '--node-lease-duration-seconds=40',
            `--server-address=127.0.0.1:${port}`,
          ],
          health: ([port]) => ({ url: `http://127.0.0.1:${port}/healthz` }),
          timeoutMs: 60_000,
        },
        register,
        say,
      ),
    ]);
    const state = await saveState(server);

    await createNodes(paths.kubeconfig);
    await waitUsable(paths.kubeconfig, processes, paths);
    say(`control plane up at ${server} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    if (options.argocd === false) return { seconds: (performance.now() - t0) / 1000, state };
    argocd = await startArgoCd({ paths, kubeconfig: paths.kubeconfig, register, say });
    if (options.flux !== false)
      flux = await startFlux({ paths, kubeconfig: paths.kubeconfig, register, say });
    return { seconds: (performance.now() - t0) / 1000, state: await saveState(server) };
  } catch (err) {
    await down(paths);
    throw err;
  }
}

function clientFor(kubeconfigFile: string): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigFile);
  return kc.makeApiClient(CoreV1Api);
}

async function createNodes(kubeconfigFile: string): Promise<void> {
  const core = clientFor(kubeconfigFile);
  for (const name of nodeNames) {
    const node: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name,
        annotations: { 'kwok.x-k8s.io/node': 'fake', 'node.alpha.kubernetes.io/ttl': '0' },
        labels: {
          'kubernetes.io/hostname': name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'node-role.kubernetes.io/worker': '',
          type: 'kwok',
        },
      },
      spec: {},
    };
    await core.createNode({ body: node });
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Usable means: every node Ready, and the default ServiceAccount exists (controllers are working). */
async function waitUsable(kubeconfigFile: string, processes: Started[], paths: ClusterPaths): Promise<void> {
  const core = clientFor(kubeconfigFile);
  await until('3 Ready nodes and the default ServiceAccount', 90_000, async () => {
    const dead = processes.find((p) => exitOf(p) !== undefined);
    if (dead) throw new Error(`${dead.name} exited; see ${path.join(paths.logs, `${dead.name}.log`)}`);
    try {
      const nodes = await core.listNode();
      const ready = nodes.items.filter((n) =>
        n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      if (ready.length < NODE_COUNT) return `${ready.length}/${NODE_COUNT} nodes Ready`;
      await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
      return true;
    } catch (err) {
      return errorText(err);
    }
  });
}

export type { Pki };
