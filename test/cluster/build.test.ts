import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  buildGroups,
  buildKey,
  kubernetesVersion,
  moduleKey,
  pinnedVersion,
  targets,
  toolchains,
} from './build.ts';
import { clusterPaths } from './paths.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A copy of test/cluster/go in a temp root, so a test can edit the pins. */
async function copyOfModules() {
  const root = await mkdtemp(path.join(tmpdir(), 'gr-build-'));
  dirs.push(root);
  const paths = clusterPaths(root);
  await cp(clusterPaths().goModules, paths.goModules, { recursive: true });
  return paths;
}

describe('the control-plane build cache key', () => {
  it('pins Kubernetes 1.36, Argo CD 3.6, Argo Rollouts 1.9 and Flux 2.9, and builds every component the tests and people need', async () => {
    const paths = clusterPaths();
    expect(await kubernetesVersion(paths)).toMatch(/^v1\.36\.\d+$/);
    expect(await pinnedVersion(paths, 'argocd', 'github.com/argoproj/argo-cd/v3')).toMatch(/^v3\.6\.\d+$/);
    expect(await pinnedVersion(paths, 'rollouts', 'github.com/argoproj/argo-rollouts')).toMatch(
      /^v1\.9\.\d+$/,
    );
    expect(toolchains.argocd).toMatch(/^go1\.27\.\d+$/);
    // One Flux release's controllers: their versions move together.
    expect(
      await Promise.all(
        ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'].map((c) =>
          pinnedVersion(paths, 'flux', `github.com/fluxcd/${c}`),
        ),
      ),
    ).toEqual(['v1.9.0', 'v1.9.0', 'v1.6.0', 'v1.9.0']);
    expect(targets.map((t) => t.binary).sort()).toEqual(
      [
        'argocd',
        'etcd',
        'helm',
        'kube-apiserver',
        'kube-controller-manager',
        'kube-scheduler',
        'kubectl',
        'kwok',
        'rollouts-controller',
        'miniredis',
        'gopher-lua',
        'source-controller',
        'kustomize-controller',
        'helm-controller',
        'notification-controller',
      ].sort(),
    );
  });

  it('keys each module on its own, so moving one pin rebuilds only that module', async () => {
    const paths = await copyOfModules();
    const before = await moduleKey(paths, 'kubernetes', 'go1.26.8');
    const argoBefore = await moduleKey(paths, 'argocd', 'go1.26.8');
    const gomod = path.join(paths.goModules, 'kwok', 'go.mod');
    await writeFile(gomod, (await readFile(gomod, 'utf8')).replace('kwok v0.8.0', 'kwok v0.8.1'));
    expect(await moduleKey(paths, 'kubernetes', 'go1.26.8')).toBe(before);
    // Argo CD builds with its own toolchain: the machine's Go version does not move its key.
    expect(await moduleKey(paths, 'argocd', 'go1.26.9')).toBe(argoBefore);
  });

  it("builds Kubernetes' four commands in one go build, and Flux's four in another, every other binary on its own", () => {
    const groups = (module: string) =>
      buildGroups(targets.filter((t) => t.module === module)).map((g) => g.map((t) => t.binary));
    expect(groups('kubernetes')).toEqual([
      ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl'],
    ]);
    expect(groups('argocd')).toEqual([['argocd']]);
    expect(groups('redis')).toEqual([['miniredis']]);
    expect(groups('flux')).toEqual([
      ['source-controller', 'kustomize-controller', 'helm-controller', 'notification-controller'],
    ]);
  });

  it('keys our own main packages (Redis, the Lua runner) on their source too', async () => {
    const paths = await copyOfModules();
    const before = await moduleKey(paths, 'redis', 'go1.26.8');
    const main = path.join(paths.goModules, 'redis', 'main.go');
    await writeFile(main, `${await readFile(main, 'utf8')}\n// changed\n`);
    expect(await moduleKey(paths, 'redis', 'go1.26.8')).not.toBe(before);
  });

  it('pins miniredis and gopher-lua at the versions Argo CD pins', async () => {
    const paths = clusterPaths();
    for (const [module, dep] of [
      ['redis', 'github.com/alicebob/miniredis/v2'],
      ['redis', 'github.com/yuin/gopher-lua'],
      ['lua', 'github.com/yuin/gopher-lua'],
    ] as const) {
      expect(await pinnedVersion(paths, module, dep)).toBe(await pinnedVersion(paths, 'argocd', dep));
    }
  });

  it('is stable for the same versions and Go toolchain', async () => {
    const paths = await copyOfModules();
    expect(await buildKey(paths, 'go1.26.8')).toBe(await buildKey(paths, 'go1.26.8'));
  });

  it('changes when a pinned version or the Go toolchain changes', async () => {
    const paths = await copyOfModules();
    const before = await buildKey(paths, 'go1.26.8');
    expect(await buildKey(paths, 'go1.27.3')).not.toBe(before);
    const gomod = path.join(paths.goModules, 'kwok', 'go.mod');
    await writeFile(gomod, (await readFile(gomod, 'utf8')).replace('kwok v0.8.0', 'kwok v0.8.1'));
    expect(await buildKey(paths, 'go1.26.8')).not.toBe(before);
  });
});
