// Builds the binaries of the local test environment from the Go modules pinned in test/cluster/go:
// the control plane, Helm, Argo CD and Argo Rollouts. Each module has its own cache key, so a pin
// that moves rebuilds only that module's binaries.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ClusterPaths } from './paths.ts';

export interface GoTarget {
  /** Directory under test/cluster/go holding the go.mod that pins the version. */
  module: string;
  pkg: string;
  binary: string;
}

export const targets: readonly GoTarget[] = [
  { module: 'etcd', pkg: 'go.etcd.io/etcd/server/v3', binary: 'etcd' },
  { module: 'kubernetes', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', binary: 'kube-apiserver' },
  {
    module: 'kubernetes',
    pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager',
    binary: 'kube-controller-manager',
  },
  { module: 'kubernetes', pkg: 'k8s.io/kubernetes/cmd/kube-scheduler', binary: 'kube-scheduler' },
  { module: 'kubernetes', pkg: 'k8s.io/kubernetes/cmd/kubectl', binary: 'kubectl' },
  { module: 'kwok', pkg: 'sigs.k8s.io/kwok/cmd/kwok', binary: 'kwok' },
  // Renders manifests/chart for the manifest tests, and Helm sources for Argo CD's repo-server.
  { module: 'helm', pkg: 'helm.sh/helm/v3/cmd/helm', binary: 'helm' },
  // One multi-call binary: ARGOCD_BINARY_NAME picks the application-controller, repo-server,
  // notifications controller, API server or cmp-server.
  { module: 'argocd', pkg: 'github.com/argoproj/argo-cd/v3/cmd', binary: 'argocd' },
  {
    module: 'rollouts',
    pkg: 'github.com/argoproj/argo-rollouts/cmd/rollouts-controller',
    binary: 'rollouts-controller',
  },
  // Argo CD's cache: miniredis behind our small main package (go/redis/main.go), so no Redis has to
  // be installed by hand.
  { module: 'redis', pkg: '.', binary: 'miniredis' },
  // The four Flux controllers the Flux suites run against (test/cluster/flux.ts); each main package is
  // its module's root.
  { module: 'flux', pkg: 'github.com/fluxcd/source-controller', binary: 'source-controller' },
  { module: 'flux', pkg: 'github.com/fluxcd/kustomize-controller', binary: 'kustomize-controller' },
  { module: 'flux', pkg: 'github.com/fluxcd/helm-controller', binary: 'helm-controller' },
  { module: 'flux', pkg: 'github.com/fluxcd/notification-controller', binary: 'notification-controller' },
  // The Lua VM Argo CD embeds, for the unit-level checks of our resource action (test/argocd/lua.ts).
  { module: 'lua', pkg: '.', binary: 'gopher-lua' },
];

/** Modules whose main package is ours (main.go in test/cluster/go/<module>): its source is in the key. */
const ownSource: ReadonlySet<string> = new Set(['redis', 'lua']);

/**
 * Disk a cold build of each module takes (Go build cache, module cache and binaries), in GiB, measured
 * on a cold build from an empty Go cache (README, "The local environment"), rounded up.
 */
export const diskGiB: Readonly<Record<string, number>> = {
  // 13.2 GiB in all (8.0 build cache, 4.4 module cache, 0.75 binaries), shared out by packages compiled.
  etcd: 1,
  kubernetes: 4.5,
  kwok: 1,
  helm: 1,
  argocd: 4.5,
  rollouts: 2.5,
  redis: 0.3,
  lua: 0.2,
  flux: 3,
};

/**
 * Go toolchain per module, when the machine's is too old. Argo CD v3.6 needs Go 1.27; the module
 * proxy serves the toolchain, so GOTOOLCHAIN downloads it once into the module cache.
 */
export const toolchains: Readonly<Record<string, string>> = { argocd: 'go1.27.3' };

/**
 * Modules built without cgo, as their projects release them (static binaries). The others keep Go's
 * default, so their entries in the Go build cache stay valid: CGO_ENABLED is part of every package's
 * cache key, and changing it for Kubernetes would recompile all of it.
 */
export const withoutCgo: ReadonlySet<string> = new Set(['argocd', 'rollouts', 'redis', 'lua', 'flux']);

/** Files copied out of a module's source next to the binaries: CRDs and helper scripts. */
interface Asset {
  module: string;
  modulePath: string;
  /** Paths inside the module; a directory means every *.yaml file in it. */
  from: string[];
  to: string;
  mode?: number;
}

export const assets: readonly Asset[] = [
  {
    module: 'argocd',
    modulePath: 'github.com/argoproj/argo-cd/v3',
    from: ['manifests/crds'],
    to: 'crds/argocd',
  },
  {
    // The repo-server runs it for every git source, even with GPG verification off.
    module: 'argocd',
    modulePath: 'github.com/argoproj/argo-cd/v3',
    from: ['hack/git-verify-wrapper.sh'],
    to: 'argocd-tools',
    mode: 0o755,
  },
  {
    module: 'rollouts',
    modulePath: 'github.com/argoproj/argo-rollouts',
    from: ['manifests/crds'],
    to: 'crds/rollouts',
  },
  ...(
    ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'] as const
  ).map(
    (c): Asset => ({
      module: 'flux',
      modulePath: `github.com/fluxcd/${c}`,
      from: ['config/crd/bases'],
      to: 'crds/flux',
    }),
  ),
];

/** Reads the Kubernetes release pinned in go/kubernetes/go.mod, e.g. "v1.36.3". */
export async function kubernetesVersion(paths: ClusterPaths): Promise<string> {
  const gomod = await readFile(path.join(paths.goModules, 'kubernetes', 'go.mod'), 'utf8');
  const match = /^require k8s\.io\/kubernetes (v\S+)$/m.exec(gomod);
  if (!match?.[1]) throw new Error('test/cluster/go/kubernetes/go.mod does not pin k8s.io/kubernetes');
  return match[1];
}

/** The version a module's go.mod requires of `modulePath`, e.g. "v3.6.1". */
export async function pinnedVersion(
  paths: ClusterPaths,
  module: string,
  modulePath: string,
): Promise<string> {
  const gomod = await readFile(path.join(paths.goModules, module, 'go.mod'), 'utf8');
  const escaped = modulePath.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const match = new RegExp(`^(?:require\\s+)?\\s*${escaped} (v\\S+)`, 'm').exec(gomod);
  if (!match?.[1]) throw new Error(`test/cluster/go/${module}/go.mod does not pin ${modulePath}`);
  return match[1];
}

function ldflags(module: string, k8sVersion: string): string {
  if (module !== 'kubernetes') return '-s -w';
  // Without these the binaries report v0.0.0-master, and version-skew checks in clients misbehave.
  const [, major, minor] = /^v(\d+)\.(\d+)/.exec(k8sVersion) ?? [];
  const pkgs = ['k8s.io/component-base/version', 'k8s.io/client-go/pkg/version'];
  const vars = pkgs.flatMap((p) => [
    `-X ${p}.gitVersion=${k8sVersion}`,
    `-X ${p}.gitMajor=${major}`,
    `-X ${p}.gitMinor=${minor}`,
    `-X ${p}.gitTreeState=clean`,
  ]);
  return ['-s -w', ...vars].join(' ');
}

function goEnv(module: string): NodeJS.ProcessEnv {
  const toolchain = toolchains[module];
  return {
    ...process.env,
    ...(withoutCgo.has(module) ? { CGO_ENABLED: '0' } : {}),
    ...(toolchain ? { GOTOOLCHAIN: toolchain } : {}),
  };
}

interface RunOptions {
  cwd: string;
  log: NodeJS.WritableStream;
  env?: NodeJS.ProcessEnv;
  /** Called for each line on stderr (go build -v names each package as it compiles it). */
  onLine?: (line: string) => void;
}

async function run(cmd: string, args: string[], o: RunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: o.cwd,
      env: o.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let partial = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      o.log.write(d);
    });
    child.stderr.on('data', (d: Buffer) => {
      o.log.write(d);
      if (!o.onLine) return;
      partial += d.toString();
      const lines = partial.split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) o.onLine(l);
    });
    child.on('error', (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`)));
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} (in ${o.cwd}) exited with ${code}; see the build log`));
    });
  });
}

/**
 * A module's cache key: the Go toolchain, the module's go.mod/go.sum, and its build recipe (targets,
 * ldflags, assets). A change to any of them rebuilds that module's binaries only.
 */
export async function moduleKey(paths: ClusterPaths, module: string, goVersion: string): Promise<string> {
  const hash = createHash('sha256');
  hash.update(toolchains[module] ?? goVersion);
  hash.update(withoutCgo.has(module) ? 'cgo=0' : `cgo=${process.env.CGO_ENABLED ?? 'default'}`);
  hash.update(JSON.stringify(targets.filter((t) => t.module === module)));
  hash.update(JSON.stringify(assets.filter((a) => a.module === module)));
  if (module === 'kubernetes') hash.update(ldflags('kubernetes', await kubernetesVersion(paths)));
  for (const file of ['go.mod', 'go.sum', ...(ownSource.has(module) ? ['main.go'] : [])]) {
    hash.update(`${module}/${file}\n`);
    hash.update(await readFile(path.join(paths.goModules, module, file)));
  }
  return hash.digest('hex').slice(0, 16);
}

/** One key for the whole set (reported to people; each module is cached by its own key). */
export async function buildKey(paths: ClusterPaths, goVersion: string): Promise<string> {
  const hash = createHash('sha256');
  for (const module of modules()) hash.update(`${module}=${await moduleKey(paths, module, goVersion)}\n`);
  return hash.digest('hex').slice(0, 16);
}

export function modules(): string[] {
  return [...new Set(targets.map((t) => t.module))];
}

export interface BuildResult {
  built: boolean;
  seconds: number;
  key: string;
  /** Seconds per module that had to be built. */
  perModule: Record<string, number>;
}

const keyFile = (paths: ClusterPaths, module: string) => path.join(paths.bin, `.build-key-${module}`);

/**
 * The `go build` invocations of one module: the commands whose binary is named as their package's
 * last element go in one invocation (the four of Kubernetes), so Go links one while it compiles
 * another on the second core instead of linking them one after another; the others one each.
 */
export function buildGroups(mine: readonly GoTarget[]): GoTarget[][] {
  const together = mine.filter((t) => path.posix.basename(t.pkg) === t.binary);
  const alone = mine.filter((t) => !together.includes(t));
  return [...(together.length > 0 ? [together] : []), ...alone.map((t) => [t])];
}

/** Whether a module's binaries are missing or were built from other pins (or another Go). */
async function isStale(paths: ClusterPaths, module: string, goVersion: string): Promise<boolean> {
  const key = await moduleKey(paths, module, goVersion);
  const file = keyFile(paths, module);
  const current = existsSync(file) ? (await readFile(file, 'utf8')).trim() : '';
  const mine = targets.filter((t) => t.module === module);
  return current !== key || !mine.every((t) => existsSync(path.join(paths.bin, t.binary)));
}

export interface BuildPlan {
  modules: string[];
  /** The modules ensureBinaries would build now. */
  stale: string[];
  toolchains: Readonly<Record<string, string>>;
  diskGiB: Readonly<Record<string, number>>;
}

/** What ensureBinaries(paths, say, only) would build with Go `goVersion`, without building it. */
export async function planBuild(
  paths: ClusterPaths,
  goVersion: string,
  only?: readonly string[],
): Promise<BuildPlan> {
  const selected = modules().filter((m) => !only || only.includes(m));
  const stale: string[] = [];
  for (const m of selected) if (await isStale(paths, m, goVersion)) stale.push(m);
  return { modules: selected, stale, toolchains, diskGiB };
}

async function copyAssets(paths: ClusterPaths, module: string, log: NodeJS.WritableStream): Promise<void> {
  for (const a of assets.filter((x) => x.module === module)) {
    const version = await pinnedVersion(paths, module, a.modulePath);
    const dir = (
      await run('go', ['list', '-m', '-f', '{{.Dir}}', `${a.modulePath}@${version}`], {
        cwd: path.join(paths.goModules, module),
        log,
        env: goEnv(module),
      })
    ).trim();
    const to = path.join(paths.bin, a.to);
    await mkdir(to, { recursive: true });
    for (const from of a.from) {
      const src = path.join(dir, from);
      const files = from.endsWith('.sh')
        ? [src]
        : (await readdir(src))
            .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
            .map((f) => path.join(src, f));
      for (const f of files) {
        const dest = path.join(to, path.basename(f));
        await rm(dest, { force: true });
        await copyFile(f, dest);
        // The module cache is read-only (0444): give the copy its own mode.
        await chmod(dest, a.mode ?? 0o644);
      }
    }
  }
}

/**
 * Makes sure every binary in `targets` is in paths.bin for its module's current key; builds only
 * what is missing or stale, printing progress (packages compiled) while a long build runs.
 */
export async function ensureBinaries(
  paths: ClusterPaths,
  say: (msg: string) => void,
  only?: readonly string[],
): Promise<BuildResult> {
  const started = performance.now();
  await mkdir(paths.bin, { recursive: true });
  const log = createWriteStream(path.join(paths.bin, 'build.log'), { flags: 'a' });
  const perModule: Record<string, number> = {};
  try {
    const goVersion = (await run('go', ['env', 'GOVERSION'], { cwd: paths.goModules, log })).trim();
    const k8sVersion = await kubernetesVersion(paths);
    for (const module of modules().filter((m) => !only || only.includes(m))) {
      if (!(await isStale(paths, module, goVersion))) continue;
      const key = await moduleKey(paths, module, goVersion);
      const file = keyFile(paths, module);
      const mine = targets.filter((t) => t.module === module);

      const m0 = performance.now();
      say(
        `building ${mine.map((t) => t.binary).join(', ')} from test/cluster/go/${module} (key ${key}, ${toolchains[module] ?? goVersion}); log: ${path.join(paths.bin, 'build.log')}`,
      );
      await rm(file, { force: true });
      for (const group of buildGroups(mine)) {
        const names = group.map((t) => t.binary).join(', ');
        const t0 = performance.now();
        let compiled = 0;
        const beat = setInterval(() => {
          say(
            `  … ${names}: ${compiled} packages compiled, ${((performance.now() - t0) / 1000).toFixed(0)}s`,
          );
        }, 30_000);
        try {
          await run(
            'go',
            [
              'build',
              '-v',
              '-trimpath',
              `-ldflags=${ldflags(module, k8sVersion)}`,
              '-o',
              // Several commands at once go into the directory, each under its package's last element.
              group.length > 1 ? `${paths.bin}${path.sep}` : path.join(paths.bin, group[0]?.binary as string),
              ...group.map((t) => t.pkg),
            ],
            {
              cwd: path.join(paths.goModules, module),
              log,
              env: goEnv(module),
              onLine: (l) => {
                if (l && !l.startsWith('go: ') && !l.startsWith('#')) compiled++;
              },
            },
          );
        } finally {
          clearInterval(beat);
        }
        say(
          `built ${names} in ${((performance.now() - t0) / 1000).toFixed(0)}s (${compiled} packages compiled)`,
        );
      }
      await copyAssets(paths, module, log);
      await writeFile(file, `${key}\n`);
      perModule[module] = (performance.now() - m0) / 1000;
    }
    const built = Object.keys(perModule).length > 0;
    return {
      built,
      seconds: (performance.now() - started) / 1000,
      key: await buildKey(paths, goVersion),
      perModule,
    };
  } finally {
    log.end();
  }
}
