// Builds the control-plane binaries from the Go modules pinned in test/cluster/go, once per set of versions.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ClusterPaths } from './paths.ts';

interface GoTarget {
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
  // Renders manifests/chart for the manifest tests; not part of the control plane.
  { module: 'helm', pkg: 'helm.sh/helm/v3/cmd/helm', binary: 'helm' },
];

const KEY_FILE = '.build-key';

/** Reads the Kubernetes release pinned in go/kubernetes/go.mod, e.g. "v1.36.3". */
export async function kubernetesVersion(paths: ClusterPaths): Promise<string> {
  const gomod = await readFile(path.join(paths.goModules, 'kubernetes', 'go.mod'), 'utf8');
  const match = /^require k8s\.io\/kubernetes (v\S+)$/m.exec(gomod);
  if (!match?.[1]) throw new Error('test/cluster/go/kubernetes/go.mod does not pin k8s.io/kubernetes');
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

async function run(cmd: string, args: string[], cwd: string, log: NodeJS.WritableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      log.write(d);
    });
    child.stderr.on('data', (d: Buffer) => log.write(d));
    child.on('error', (err) => reject(new Error(`cannot run ${cmd}: ${err.message}`)));
    child.on('close', (code) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited with ${code}`));
    });
  });
}

/**
 * The cache key: the Go toolchain plus every go.mod/go.sum and this file's build recipe.
 * A change to any pinned version changes the key and triggers a rebuild.
 */
export async function buildKey(paths: ClusterPaths, goVersion: string): Promise<string> {
  const hash = createHash('sha256');
  hash.update(goVersion);
  hash.update(JSON.stringify(targets));
  hash.update(ldflags('kubernetes', await kubernetesVersion(paths)));
  for (const module of [...new Set(targets.map((t) => t.module))].sort()) {
    for (const file of ['go.mod', 'go.sum']) {
      hash.update(`${module}/${file}\n`);
      hash.update(await readFile(path.join(paths.goModules, module, file)));
    }
  }
  return hash.digest('hex').slice(0, 16);
}

export interface BuildResult {
  built: boolean;
  seconds: number;
  key: string;
}

/** Makes sure every binary in `targets` is in paths.bin for the current key; builds only what is missing. */
export async function ensureBinaries(paths: ClusterPaths, say: (msg: string) => void): Promise<BuildResult> {
  const started = performance.now();
  await mkdir(paths.bin, { recursive: true });
  const log = createWriteStream(path.join(paths.bin, 'build.log'), { flags: 'a' });
  try {
    const goVersion = (await run('go', ['version'], paths.goModules, log)).trim();
    const key = await buildKey(paths, goVersion);
    const keyFile = path.join(paths.bin, KEY_FILE);
    const current = existsSync(keyFile) ? (await readFile(keyFile, 'utf8')).trim() : '';
    const complete = targets.every((t) => existsSync(path.join(paths.bin, t.binary)));
    if (current === key && complete) return { built: false, seconds: 0, key };

    say(
      `building control-plane binaries (key ${key}, ${goVersion}); log: ${path.join(paths.bin, 'build.log')}`,
    );
    await rm(keyFile, { force: true });
    const k8sVersion = await kubernetesVersion(paths);
    for (const t of targets) {
      const t0 = performance.now();
      const out = path.join(paths.bin, t.binary);
      const flags = `-ldflags=${ldflags(t.module, k8sVersion)}`;
      await run(
        'go',
        ['build', '-trimpath', flags, '-o', out, t.pkg],
        path.join(paths.goModules, t.module),
        log,
      );
      say(`built ${t.binary} in ${((performance.now() - t0) / 1000).toFixed(0)}s`);
    }
    await writeFile(keyFile, `${key}\n`);
    return { built: true, seconds: (performance.now() - started) / 1000, key };
  } finally {
    log.end();
  }
}
