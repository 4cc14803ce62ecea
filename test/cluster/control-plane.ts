// Starts and stops the local control plane: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok, all on loopback with free ports, plus three kwok-managed nodes.
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { renderKubeconfig } from './kubeconfig.ts';
import type { ClusterPaths } from './paths.ts';
import { generatePki, type Identity, type Pki, readPem } from './pki.ts';
import { isOurs, type Started, startDetached, stop } from './processes.ts';

export const NODE_COUNT = 3;
export const nodeNames = Array.from({ length: NODE_COUNT }, (_, i) => `kwok-node-${i}`);

export interface ClusterState {
  startedAt: string;
  server: string;
  processes: Started[];
}

const clients: readonly Identity[] = [
  { name: 'admin', commonName: 'gitops-reloader-admin', organization: 'system:masters' },
  { name: 'controller-manager', commonName: 'system:kube-controller-manager' },
  { name: 'scheduler', commonName: 'system:kube-scheduler' },
  // kwok plays every kubelet (node status, pod status, leases, deletion), so it gets full rights.
  { name: 'kwok', commonName: 'kwok', organization: 'system:masters' },
];

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

interface Probe {
  url: string;
  ca?: string;
  cert?: string;
  key?: string;
}

/** GET over HTTPS (or HTTP); resolves with the status code and body, never throws. */
function probe(p: Probe): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const url = new URL(p.url);
    const mod = url.protocol === 'https:' ? https : http;
    const opts = {
      method: 'GET',
      timeout: 2000,
      ...(p.ca ? { ca: p.ca, cert: p.cert, key: p.key } : { rejectUnauthorized: false }),
    };
    const done = (status: number, body: string) => resolve({ status, body });
    const req = mod.request(url, opts, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => {
        body += d.toString();
      });
      res.on('end', () => done(res.statusCode ?? 0, body));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => done(0, err.message));
    req.end();
  });
}

async function until(what: string, timeoutMs: number, check: () => Promise<string | true>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'not checked yet';
  while (Date.now() < deadline) {
    const r = await check();
    if (r === true) return;
    last = r;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; last seen: ${last}`);
}

async function waitHealthy(proc: Started, logFile: string, timeoutMs: number, p: Probe): Promise<void> {
  await until(`${proc.name} ${p.url}`, timeoutMs, async () => {
    if (!isOurs(proc)) {
      const tail = existsSync(logFile)
        ? (await readFile(logFile, 'utf8')).split('\n').slice(-15).join('\n')
        : '';
      throw new Error(`${proc.name} exited during start-up; end of ${logFile}:\n${tail}`);
    }
    const r = await probe(p);
    return r.status === 200 ? true : `HTTP ${r.status} ${r.body.slice(0, 200)}`;
  });
}

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
  await rm(paths.state, { recursive: true, force: true });
  await rm(paths.kubeconfig, { force: true });
  await rm(paths.stateFile, { force: true });
  return report;
}

export interface UpResult {
  seconds: number;
  state: ClusterState;
}

export async function up(paths: ClusterPaths, say: (msg: string) => void): Promise<UpResult> {
  const t0 = performance.now();
  const current = await status(paths);
  if (current.running && current.state) return { seconds: 0, state: current.state };
  if (current.state) await down(paths); // half-dead leftovers from an earlier run

  const pkiDir = path.join(paths.state, 'pki');
  await mkdir(pkiDir, { recursive: true });
  await mkdir(paths.logs, { recursive: true });
  const pki = await generatePki(pkiDir, clients);
  const bin = (name: string) => path.join(paths.bin, name);
  const log = (name: string) => path.join(paths.logs, `${name}.log`);
  for (const name of ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kwok']) {
    await writeFile(log(name), '');
  }

  const processes: Started[] = [];
  const saveState = async (server: string) => {
    const state: ClusterState = { startedAt: new Date().toISOString(), server, processes };
    await writeFile(paths.stateFile, `${JSON.stringify(state, null, 2)}\n`);
    return state;
  };

  try {
    // etcd
    const [etcdClient, etcdPeer] = [await freePort(), await freePort()];
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    const etcd = startDetached(
      'etcd',
      bin('etcd'),
      [
        '--name=default',
        `--data-dir=${path.join(paths.state, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        // A test cluster can lose its data on a machine crash; speed matters more.
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      log('etcd'),
    );
    processes.push(etcd);
    await saveState('');
    await waitHealthy(etcd, log('etcd'), 30_000, { url: `${etcdUrl}/health` });

    // kube-apiserver
    const apiPort = await freePort();
    const server = `https://127.0.0.1:${apiPort}`;
    const apiserver = startDetached(
      'kube-apiserver',
      bin('kube-apiserver'),
      [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${apiPort}`,
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
      log('kube-apiserver'),
    );
    processes.push(apiserver);
    await saveState(server);
    const admin = pki.client('admin');
    const adminProbe = {
      ca: await readPem(pki.caCert),
      cert: await readPem(admin.cert),
      key: await readPem(admin.key),
    };
    await waitHealthy(apiserver, log('kube-apiserver'), 60_000, { url: `${server}/readyz`, ...adminProbe });

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

    const kcmPort = await freePort();
    const kcm = startDetached(
      'kube-controller-manager',
      bin('kube-controller-manager'),
      [
        `--kubeconfig=${kc('controller-manager')}`,
        `--authentication-kubeconfig=${kc('controller-manager')}`,
        `--authorization-kubeconfig=${kc('controller-manager')}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${kcmPort}`,
        `--cert-dir=${path.join(paths.state, 'controller-manager')}`,
        `--service-account-private-key-file=${pki.serviceAccountKey}`,
        `--root-ca-file=${pki.caCert}`,
        '--use-service-account-credentials=true',
        '--leader-elect=false',
        '--controllers=*',
        '--v=1',
      ],
      log('kube-controller-manager'),
    );
    processes.push(kcm);

    const schedPort = await freePort();
    const scheduler = startDetached(
      'kube-scheduler',
      bin('kube-scheduler'),
      [
        `--kubeconfig=${kc('scheduler')}`,
        `--authentication-kubeconfig=${kc('scheduler')}`,
        `--authorization-kubeconfig=${kc('scheduler')}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${schedPort}`,
        `--cert-dir=${path.join(paths.state, 'scheduler')}`,
        '--leader-elect=false',
        '--v=1',
      ],
      log('kube-scheduler'),
    );
    processes.push(scheduler);

    const kwokPort = await freePort();
    const kwok = startDetached(
      'kwok',
      bin('kwok'),
      [
        `--kubeconfig=${kc('kwok')}`,
        `--config=${path.join(paths.root, 'test', 'cluster', 'kwok', 'stages.yaml')}`,
        '--manage-all-nodes=false',
        '--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake',
        '--node-ip=127.0.0.1',
        '--cidr=10.244.0.1/16',
        '--node-lease-duration-seconds=40',
        `--server-address=127.0.0.1:${kwokPort}`,
      ],
      log('kwok'),
    );
    processes.push(kwok);
    const state = await saveState(server);

    await Promise.all([
      waitHealthy(kcm, log('kube-controller-manager'), 60_000, {
        url: `https://127.0.0.1:${kcmPort}/healthz`,
      }),
      waitHealthy(scheduler, log('kube-scheduler'), 60_000, { url: `https://127.0.0.1:${schedPort}/readyz` }),
      waitHealthy(kwok, log('kwok'), 60_000, { url: `http://127.0.0.1:${kwokPort}/healthz` }),
    ]);

    await createNodes(paths.kubeconfig);
    await waitUsable(paths.kubeconfig, processes, paths);
    say(`control plane up at ${server} in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
    return { seconds: (performance.now() - t0) / 1000, state };
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
    const dead = processes.find((p) => !isOurs(p));
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
