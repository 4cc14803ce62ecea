// Starts the real Argo CD next to the local control plane, the way Argo CD's own local-dev Procfile
// runs it out of cluster (ARGOCD_FAKE_IN_CLUSTER): Redis, repo-server, application-controller,
// notifications controller, API server and our CMP under argocd-cmp-server; plus the Argo Rollouts
// controller and a git server on loopback. Every process is registered in the cluster state, so
// `npm run cluster -- down` stops it, and logs go to .cluster/logs/<name>.log.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { launch, until } from './launch.ts';
import type { ClusterPaths } from './paths.ts';
import type { Started } from './processes.ts';

const exec = promisify(execFile);

export const ARGOCD_NAMESPACE = 'argocd';
export const ROLLOUTS_NAMESPACE = 'argo-rollouts';
/** The name of our config-management plugin (argocd-plugin/cmp/plugin.yaml). */
export const CMP_NAME = 'gitops-reloader-checksum';

/** Where tests and the demo find the running Argo CD; saved in the cluster state file. */
export interface ArgoCdEndpoints {
  namespace: string;
  /** Base URL of the git server, e.g. http://127.0.0.1:4242 (repositories at /<name>.git). */
  git: string;
  /** Directory holding the git server's bare repositories. */
  gitRoot: string;
  /** argocd-server's HTTP API (auth disabled, loopback only). */
  apiServer: string;
  repoServer: string;
  redis: string;
  /** The HMAC key file the CMP sidecar's `gitops-reloader checksum` uses. */
  cmpKeyFile: string;
  /** Short-path directory for unix sockets (CMP, askpass); removed by `down`. */
  socketDir: string;
  rolloutsNamespace: string;
}

export interface StartContext {
  paths: ClusterPaths;
  kubeconfig: string;
  register: (p: Started) => Promise<void>;
  say: (msg: string) => void;
}

export async function kubectl(
  paths: ClusterPaths,
  kubeconfig: string,
  args: string[],
  input?: string,
): Promise<string> {
  const child = exec(path.join(paths.bin, 'kubectl'), [`--kubeconfig=${kubeconfig}`, ...args], {
    maxBuffer: 32 * 1024 * 1024,
  });
  if (input !== undefined) {
    child.child.stdin?.end(input);
  }
  try {
    return (await child).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
  }
}

const partOf = { 'app.kubernetes.io/part-of': 'argocd' };

/** The objects Argo CD needs before it starts (argocd-server would create the default project). */
export function baseObjects(serverSecretKey: string): object[] {
  const cm = (name: string, data: Record<string, string> = {}) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: ARGOCD_NAMESPACE, labels: partOf },
    data,
  });
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ARGOCD_NAMESPACE } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ROLLOUTS_NAMESPACE } },
    cm('argocd-cm', { 'admin.enabled': 'false', 'exec.enabled': 'false' }),
    cm('argocd-rbac-cm', { 'policy.default': 'role:admin' }),
    cm('argocd-cmd-params-cm'),
    cm('argocd-ssh-known-hosts-cm'),
    cm('argocd-tls-certs-cm'),
    cm('argocd-gpg-keys-cm'),
    cm('argocd-notifications-cm'),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'argocd-secret', namespace: ARGOCD_NAMESPACE, labels: partOf },
      type: 'Opaque',
      stringData: { 'server.secretkey': serverSecretKey },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'argocd-notifications-secret', namespace: ARGOCD_NAMESPACE, labels: partOf },
      type: 'Opaque',
    },
    {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'AppProject',
      metadata: { name: 'default', namespace: ARGOCD_NAMESPACE },
      spec: {
        sourceRepos: ['*'],
        destinations: [{ server: '*', namespace: '*' }],
        clusterResourceWhitelist: [{ group: '*', kind: '*' }],
      },
    },
  ];
}

async function installCrds(ctx: StartContext): Promise<void> {
  const dirs = ['argocd', 'rollouts'].map((d) => path.join(ctx.paths.bin, 'crds', d));
  for (const d of dirs) {
    if (!existsSync(d)) throw new Error(`${d} is missing: run npm run cluster -- build`);
  }
  // The Application CRD is about 2 MB: too large for client-side apply's last-applied annotation.
  await kubectl(ctx.paths, ctx.kubeconfig, [
    'apply',
    '--server-side',
    '--force-conflicts',
    '--field-manager=gitops-reloader-test-cluster',
    ...dirs.flatMap((d) => ['-f', d]),
  ]);
  const names = ['applications.argoproj.io', 'appprojects.argoproj.io', 'rollouts.argoproj.io'];
  await until('the Argo CD and Argo Rollouts CRDs to be Established', 60_000, async () => {
    const out = await kubectl(ctx.paths, ctx.kubeconfig, [
      'get',
      'crd',
      ...names,
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Established")].status}{"\\n"}{end}',
    ]).catch((err: Error) => err.message);
    const established = out.split('\n').filter((l) => l.endsWith('=True')).length;
    return established === names.length ? true : out.trim();
  });
}

/** Sends PING as a RESP array (miniredis takes no inline commands) and resolves to the first reply line. */
function redisPing(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write('*1\r\n$4\r\nPING\r\n'));
    let reply = '';
    socket.setTimeout(2000, () => socket.destroy(new Error('no reply to PING within 2s')));
    socket.on('data', (d: Buffer) => {
      reply += d.toString();
      if (reply.includes('\r\n')) {
        socket.end();
        resolve(reply.split('\r\n')[0] ?? '');
      }
    });
    socket.on('error', reject);
    // Closed without a reply: settle, or nothing would keep the process waiting (Node would exit).
    socket.on('close', () => reject(new Error(`connection closed; got ${JSON.stringify(reply)}`)));
  });
}

export async function startArgoCd(ctx: StartContext): Promise<ArgoCdEndpoints> {
  const { paths, kubeconfig, register, say } = ctx;
  const t0 = performance.now();
  const bin = (name: string) => path.join(paths.bin, name);
  const log = (name: string) => path.join(paths.logs, `${name}.log`);
  const dir = path.join(paths.state, 'argocd');
  const socketDir = await mkdtemp(path.join(tmpdir(), 'argocd-'));
  const sub = async (name: string) => {
    const d = path.join(dir, name);
    await mkdir(d, { recursive: true });
    return d;
  };
  const home = await sub('home');
  const tls = await sub('tls');
  const ssh = await sub('ssh');
  const gpg = await sub('gnupg');
  const gpgData = await sub('gpg-source');
  const tmp = await sub('tmp');
  const cmpConfig = await sub('cmp');
  const shims = await sub('bin');
  const gitRoot = await sub('git');
  const plugins = path.join(socketDir, 'plugins');
  await mkdir(plugins, { recursive: true });

  await installCrds(ctx);
  await kubectl(
    paths,
    kubeconfig,
    ['apply', '--server-side', '--field-manager=gitops-reloader-test-cluster', '-f', '-'],
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'List',
      items: baseObjects(randomBytes(24).toString('base64')),
    }),
  );

  // Our "reload (drift-free)" action, merged into argocd-cm with the command docs/argocd.md gives.
  // Done before the application-controller starts: a later change to argocd-cm's resource
  // customizations makes it invalidate its whole cluster cache, which would disturb running suites.
  await kubectl(paths, kubeconfig, [
    '--namespace',
    ARGOCD_NAMESPACE,
    'patch',
    'configmap',
    'argocd-cm',
    '--type',
    'merge',
    '--patch-file',
    path.join(paths.root, 'argocd-plugin', 'actions', 'argocd-cm.yaml'),
  ]);

  // The CMP's generate step runs `gitops-reloader checksum` and helm: a shim runs our CLI under this
  // Node.js, and .cluster/bin provides helm and kubectl.
  const cmpKeyFile = path.join(dir, 'cmp-hash.key');
  await writeFile(cmpKeyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
  await writeFile(
    path.join(shims, 'gitops-reloader'),
    `#!/bin/sh\nexec "${process.execPath}" "${path.join(paths.root, 'service', 'cli.ts')}" "$@"\n`,
    { mode: 0o755 },
  );
  await copyFile(
    path.join(paths.root, 'argocd-plugin', 'cmp', 'plugin.yaml'),
    path.join(cmpConfig, 'plugin.yaml'),
  );

  const PATH = [
    shims,
    path.join(paths.bin, 'argocd-tools'),
    paths.bin,
    process.env.PATH ?? '/usr/bin:/bin',
  ].join(':');
  const common: NodeJS.ProcessEnv = {
    PATH,
    HOME: home,
    TMPDIR: tmp,
    KUBECONFIG: kubeconfig,
    ARGOCD_FAKE_IN_CLUSTER: 'true',
    ARGOCD_TLS_DATA_PATH: tls,
    ARGOCD_SSH_DATA_PATH: ssh,
    ARGOCD_GNUPGHOME: gpg,
    ARGOCD_GPG_DATA_PATH: gpgData,
    ARGOCD_GPG_ENABLED: 'false',
    ARGOCD_PLUGINSOCKFILEPATH: plugins,
    ARGOCD_ASK_PASS_SOCK: path.join(socketDir, 'askpass.sock'),
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
  };
  const argocd = (binaryName: string, extra: NodeJS.ProcessEnv = {}) => ({
    binary: bin('argocd'),
    env: { ...common, ARGOCD_BINARY_NAME: binaryName, ...extra },
  });
  const kube = [`--kubeconfig=${kubeconfig}`, `--namespace=${ARGOCD_NAMESPACE}`];
  const metrics = (port: number | undefined) => ({ url: `http://127.0.0.1:${port}/metrics` });

  const git = await launch(
    {
      name: 'git-server',
      binary: process.execPath,
      logFile: log('git-server'),
      ports: 1,
      args: ([port]) => [path.join(paths.root, 'test', 'cluster', 'git-daemon.ts'), gitRoot, String(port)],
      health: ([port]) => ({ url: `http://127.0.0.1:${port}/healthz` }),
      timeoutMs: 30_000,
    },
    register,
    say,
  );
  // Argo CD's cache: miniredis built from test/cluster/go/redis (build.ts), nothing installed by hand.
  const redis = await launch(
    {
      name: 'redis',
      binary: bin('miniredis'),
      logFile: log('redis'),
      ports: 1,
      args: ([port]) => [`--addr=127.0.0.1:${port}`],
      health:
        ([port]) =>
        async () => {
          const reply = await redisPing(Number(port)).catch((e: Error) => e.message);
          return reply === '+PONG' ? true : reply;
        },
      timeoutMs: 30_000,
    },
    register,
    say,
  );
  const redisAddr = `127.0.0.1:${redis.ports[0]}`;
  await launch(
    {
      name: 'argocd-cmp-server',
      ...argocd('argocd-cmp-server', { GITOPS_RELOADER_HASH_KEY_FILE: cmpKeyFile }),
      logFile: log('argocd-cmp-server'),
      args: () => ['--config-dir-path', cmpConfig, '--loglevel', 'info'],
      health: () => async () =>
        existsSync(path.join(plugins, `${CMP_NAME}.sock`)) ? true : `no ${CMP_NAME}.sock in ${plugins} yet`,
      timeoutMs: 60_000,
    },
    register,
    say,
  );
  const repo = await launch(
    {
      name: 'argocd-repo-server',
      ...argocd('argocd-repo-server'),
      logFile: log('argocd-repo-server'),
      ports: 2,
      args: ([port, m]) => [
        '--address=127.0.0.1',
        `--port=${port}`,
        '--metrics-address=127.0.0.1',
        `--metrics-port=${m}`,
        '--disable-tls',
        // v3.6 defaults this to the in-cluster mTLS path, which --disable-tls refuses.
        '--client-ca-path=',
        `--redis=${redisAddr}`,
        '--loglevel=info',
      ],
      health: ([, m]) => ({ url: `http://127.0.0.1:${m}/healthz` }),
      timeoutMs: 120_000,
    },
    register,
    say,
  );
  const repoAddr = `127.0.0.1:${repo.ports[0]}`;
  const [, , server] = await Promise.all([
    launch(
      {
        name: 'argocd-application-controller',
        ...argocd('argocd-application-controller', { ARGOCD_CONTROLLER_SHARD: '0' }),
        logFile: log('argocd-application-controller'),
        ports: 1,
        args: ([m]) => [
          ...kube,
          `--redis=${redisAddr}`,
          `--repo-server=${repoAddr}`,
          '--repo-server-plaintext',
          `--metrics-port=${m}`,
          '--loglevel=info',
        ],
        health: ([m]) => metrics(m),
        timeoutMs: 120_000,
      },
      register,
      say,
    ),
    launch(
      {
        name: 'argocd-notifications',
        ...argocd('argocd-notifications'),
        logFile: log('argocd-notifications'),
        ports: 1,
        args: ([m]) => [
          ...kube,
          `--metrics-port=${m}`,
          `--argocd-repo-server=${repoAddr}`,
          '--argocd-repo-server-plaintext',
          '--loglevel=info',
        ],
        health: ([m]) => metrics(m),
        timeoutMs: 120_000,
      },
      register,
      say,
    ),
    launch(
      {
        name: 'argocd-server',
        ...argocd('argocd-server'),
        logFile: log('argocd-server'),
        ports: 2,
        args: ([port, m]) => [
          ...kube,
          '--insecure',
          '--disable-auth',
          '--address=127.0.0.1',
          `--port=${port}`,
          `--metrics-port=${m}`,
          `--redis=${redisAddr}`,
          `--repo-server=${repoAddr}`,
          '--repo-server-plaintext',
          '--loglevel=info',
        ],
        health: ([port]) => ({ url: `http://127.0.0.1:${port}/healthz` }),
        timeoutMs: 120_000,
      },
      register,
      say,
    ),
    launch(
      {
        name: 'rollouts-controller',
        binary: bin('rollouts-controller'),
        env: { PATH, HOME: home, POD_NAMESPACE: ROLLOUTS_NAMESPACE },
        logFile: log('rollouts-controller'),
        ports: 2,
        args: ([m, h]) => [
          `--kubeconfig=${kubeconfig}`,
          `--metricsport=${m}`,
          `--healthzPort=${h}`,
          '--leader-elect=false',
          '--loglevel=info',
        ],
        health: ([, h]) => ({ url: `http://127.0.0.1:${h}/healthz` }),
        timeoutMs: 120_000,
      },
      register,
      say,
    ),
  ]);
  say(`Argo CD and Argo Rollouts up in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return {
    namespace: ARGOCD_NAMESPACE,
    git: `http://127.0.0.1:${git.ports[0]}`,
    gitRoot,
    apiServer: `http://127.0.0.1:${server.ports[0]}`,
    repoServer: repoAddr,
    redis: redisAddr,
    cmpKeyFile,
    socketDir,
    rolloutsNamespace: ROLLOUTS_NAMESPACE,
  };
}

export async function removeSockets(endpoints: ArgoCdEndpoints | undefined): Promise<void> {
  if (endpoints?.socketDir.startsWith(tmpdir()))
    await rm(endpoints.socketDir, { recursive: true, force: true });
}
