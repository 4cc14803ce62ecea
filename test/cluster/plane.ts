// One Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with free ports, plus three kwok-managed nodes. The main environment
// (control-plane.ts) and every spoke (spoke.ts) are one of these, each with its own directory.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { renderKubeconfig } from './kubeconfig.ts';
import { launch, until } from './launch.ts';
import type { ClusterPaths } from './paths.ts';
import { generatePki, type Identity, type Pki, readPem } from './pki.ts';
import { exitOf, type Started } from './processes.ts';

export const NODE_COUNT = 3;
export const nodeNames = Array.from({ length: NODE_COUNT }, (_, i) => `kwok-node-${i}`);

const clients: readonly Identity[] = [
  { name: 'admin', commonName: 'gitops-reloader-admin', organization: 'system:masters' },
  { name: 'controller-manager', commonName: 'system:kube-controller-manager' },
  { name: 'scheduler', commonName: 'system:kube-scheduler' },
  // kwok plays every kubelet (node status, pod status, leases, deletion), so it gets full rights.
  { name: 'kwok', commonName: 'kwok', organization: 'system:masters' },
];

export interface PlaneOptions {
  paths: ClusterPaths;
  /** Certificates, etcd data and component kubeconfigs go here. */
  dir: string;
  /** Where the admin kubeconfig is written. */
  kubeconfig: string;
  /** Prefixed to process and log names: '' for the main plane, 'spoke-b-' for spoke b. */
  prefix: string;
  /** Told of every process started, so a state file can stop it even if start-up fails half-way. */
  register: (p: Started) => Promise<void>;
  /** Told the API server's URL as soon as it is healthy. */
  onServer?: (server: string) => Promise<void>;
  say: (msg: string) => void;
}

export interface Plane {
  server: string;
  pki: Pki;
  processes: Started[];
}

/** Starts a plane and waits until it is usable: every node Ready and the default ServiceAccount made. */
export async function startPlane(o: PlaneOptions): Promise<Plane> {
  const { paths, dir, prefix, say } = o;
  const pkiDir = path.join(dir, 'pki');
  await mkdir(pkiDir, { recursive: true });
  await mkdir(paths.logs, { recursive: true });
  const pki = await generatePki(pkiDir, clients);
  const bin = (name: string) => path.join(paths.bin, name);
  const log = (name: string) => path.join(paths.logs, `${prefix}${name}.log`);
  const processes: Started[] = [];
  const register = async (p: Started) => {
    processes.push(p);
    await o.register(p);
  };

  const etcd = await launch(
    {
      name: `${prefix}etcd`,
      binary: bin('etcd'),
      logFile: log('etcd'),
      ports: 2,
      args: ([client, peer]) => [
        '--name=default',
        `--data-dir=${path.join(dir, 'etcd')}`,
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
      name: `${prefix}kube-apiserver`,
      binary: bin('kube-apiserver'),
      logFile: log('kube-apiserver'),
      ports: 1,
      args: ([port]) => [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${port}`,
        `--cert-dir=${path.join(dir, 'apiserver')}`,
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
  const server = `https://127.0.0.1:${api.ports[0]}`;
  await o.onServer?.(server);

  for (const c of clients) {
    const { cert, key } = pki.client(c.name);
    const file = c.name === 'admin' ? o.kubeconfig : path.join(dir, `${c.name}.kubeconfig`);
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
  const kc = (name: string) => path.join(dir, `${name}.kubeconfig`);

  // Settled, not Promise.all: if one fails, the others (and their retries) have started and
  // registered their processes before the caller stops what was registered.
  const started = await Promise.allSettled([
    launch(
      {
        name: `${prefix}kube-controller-manager`,
        binary: bin('kube-controller-manager'),
        logFile: log('kube-controller-manager'),
        ports: 1,
        args: ([port]) => [
          `--kubeconfig=${kc('controller-manager')}`,
          `--authentication-kubeconfig=${kc('controller-manager')}`,
          `--authorization-kubeconfig=${kc('controller-manager')}`,
          '--bind-address=127.0.0.1',
          `--secure-port=${port}`,
          `--cert-dir=${path.join(dir, 'controller-manager')}`,
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
        name: `${prefix}kube-scheduler`,
        binary: bin('kube-scheduler'),
        logFile: log('kube-scheduler'),
        ports: 1,
        args: ([port]) => [
          `--kubeconfig=${kc('scheduler')}`,
          `--authentication-kubeconfig=${kc('scheduler')}`,
          `--authorization-kubeconfig=${kc('scheduler')}`,
          '--bind-address=127.0.0.1',
          `--secure-port=${port}`,
          `--cert-dir=${path.join(dir, 'scheduler')}`,
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
        name: `${prefix}kwok`,
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
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;

  await createNodes(o.kubeconfig);
  await waitUsable(o.kubeconfig, processes, paths);
  return { server, pki, processes };
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
