// Starts the real Flux controllers next to the local control plane and its git server, out of
// cluster as `make run` in each Flux repository does: source-controller (git artifacts, served from
// its storage on loopback), kustomize-controller, helm-controller and notification-controller (the
// event receiver every other controller posts to). Their CRDs come from the module cache (build.ts
// copies them to .cluster/bin/crds/flux); every process is registered in the cluster state, so
// `npm run cluster -- down` stops it, and logs go to .cluster/logs/<name>.log.
import { existsSync } from 'node:fs';
import { mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { kubectl, type StartContext } from './argocd.ts';
import { launch, until } from './launch.ts';

export const FLUX_NAMESPACE = 'flux-system';

/** Where tests and the demo find the running Flux; saved in the cluster state file. */
export interface FluxEndpoints {
  namespace: string;
  /** notification-controller's event receiver, the address the other controllers post events to. */
  events: string;
  /** source-controller's artifact server. */
  storage: string;
}

/** The controllers, in start order: the event receiver first, so no controller's first events are lost. */
export const FLUX_CONTROLLERS = [
  'notification-controller',
  'source-controller',
  'kustomize-controller',
  'helm-controller',
] as const;

async function installCrds(ctx: StartContext): Promise<void> {
  const dir = path.join(ctx.paths.bin, 'crds', 'flux');
  if (!existsSync(dir)) throw new Error(`${dir} is missing: run npm run cluster -- build`);
  await kubectl(ctx.paths, ctx.kubeconfig, [
    'apply',
    '--server-side',
    '--force-conflicts',
    '--field-manager=gitops-reloader-test-cluster',
    '-f',
    dir,
  ]);
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml'));
  // source.toolkit.fluxcd.io_gitrepositories.yaml → gitrepositories.source.toolkit.fluxcd.io
  const names = files.map((f) => {
    const [group, plural] = f.replace(/\.yaml$/, '').split('_');
    return `${plural}.${group}`;
  });
  await until('the Flux CRDs to be Established', 60_000, async () => {
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

export async function startFlux(ctx: StartContext): Promise<FluxEndpoints> {
  const { paths, kubeconfig, register, say } = ctx;
  const t0 = performance.now();
  const bin = (name: string) => path.join(paths.bin, name);
  const log = (name: string) => path.join(paths.logs, `${name}.log`);
  const dir = path.join(paths.state, 'flux');
  const storage = path.join(dir, 'storage');
  const home = path.join(dir, 'home');
  const tmp = path.join(dir, 'tmp');
  for (const d of [storage, home, tmp]) await mkdir(d, { recursive: true });

  await installCrds(ctx);
  await kubectl(
    paths,
    kubeconfig,
    ['apply', '--server-side', '--field-manager=gitops-reloader-test-cluster', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: FLUX_NAMESPACE } }),
  );

  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    TMPDIR: tmp,
    KUBECONFIG: kubeconfig,
    RUNTIME_NAMESPACE: FLUX_NAMESPACE,
  };
  const common = (m: number | undefined, h: number | undefined) => [
    `--metrics-addr=127.0.0.1:${m}`,
    `--health-addr=127.0.0.1:${h}`,
    '--watch-all-namespaces=true',
    '--log-level=info',
    '--log-encoding=json',
  ];
  const healthz = (h: number | undefined) => ({ url: `http://127.0.0.1:${h}/healthz` });

  const nc = await launch(
    {
      name: 'notification-controller',
      binary: bin('notification-controller'),
      env,
      logFile: log('notification-controller'),
      ports: 4,
      args: ([m, h, e, r]) => [
        ...common(m, h),
        `--events-addr=127.0.0.1:${e}`,
        `--receiverAddr=127.0.0.1:${r}`,
      ],
      health: ([, h]) => healthz(h),
      timeoutMs: 120_000,
    },
    register,
    say,
  );
  const events = `http://127.0.0.1:${nc.ports[2]}`;
  const source = await launch(
    {
      name: 'source-controller',
      binary: bin('source-controller'),
      env,
      logFile: log('source-controller'),
      ports: 3,
      args: ([m, h, s]) => [
        ...common(m, h),
        `--events-addr=${events}`,
        `--storage-path=${storage}`,
        `--storage-addr=127.0.0.1:${s}`,
        `--storage-adv-addr=127.0.0.1:${s}`,
      ],
      health: ([, h]) => healthz(h),
      timeoutMs: 120_000,
    },
    register,
    say,
  );
  await Promise.all(
    (['kustomize-controller', 'helm-controller'] as const).map((name) =>
      launch(
        {
          name,
          binary: bin(name),
          env,
          logFile: log(name),
          ports: 2,
          // A Kustomization waiting on its dependsOn retries this often; the default is 30 s.
          args: ([m, h]) => [...common(m, h), `--events-addr=${events}`, '--requeue-dependency=2s'],
          health: ([, h]) => healthz(h),
          timeoutMs: 120_000,
        },
        register,
        say,
      ),
    ),
  );
  say(`Flux controllers up in ${((performance.now() - t0) / 1000).toFixed(1)}s`);
  return { namespace: FLUX_NAMESPACE, events, storage: `http://127.0.0.1:${source.ports[2]}` };
}
