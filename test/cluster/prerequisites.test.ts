import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterPaths, repoRoot } from './paths.ts';
import {
  checkPrerequisites,
  goVersionAtLeast,
  onPath,
  PrerequisitesError,
  requirePrerequisites,
} from './prerequisites.ts';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** A PATH holding only `tools` (links to the real ones) plus fakes written as shell scripts. */
async function fakePath(tools: string[], fakes: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-prereq-'));
  dirs.push(dir);
  for (const t of tools) {
    const real = t === 'node' ? process.execPath : await onPath(t);
    if (!real) throw new Error(`${t} is not on this machine's PATH`);
    await symlink(real, path.join(dir, t));
  }
  for (const [name, script] of Object.entries(fakes)) {
    await writeFile(path.join(dir, name), `#!/bin/sh\n${script}\n`, { mode: 0o755 });
  }
  return dir;
}

describe('prerequisites', () => {
  it('compares Go versions numerically', () => {
    expect(goVersionAtLeast('go1.26.8', '1.26.0')).toBe(true);
    expect(goVersionAtLeast('go1.9.0', '1.26')).toBe(false);
    expect(goVersionAtLeast('go1.27', '1.26.9')).toBe(true);
  });

  it('lists a missing go, git and openssl together, with how to get each', async () => {
    const empty = await fakePath([]);
    const missing = await checkPrerequisites(clusterPaths(), { env: { PATH: empty } });
    expect(missing.map((m) => m.what.split(':')[0])).toEqual(['go', 'git', 'openssl']);
    expect(missing[0]?.fix).toContain('https://go.dev/dl/');
    await expect(requirePrerequisites(clusterPaths(), { env: { PATH: empty } })).rejects.toThrow(
      /^3 prerequisites are missing \(nothing was built or started\):\n {2}- go: not found on PATH/,
    );
  });

  it('reports a Go older than the pinned modules need', async () => {
    const dir = await fakePath(['git', 'openssl'], {
      go: 'printf "go1.20.1\\n/nonexistent/cache\\n/nonexistent/mod\\n"',
    });
    const missing = await checkPrerequisites(clusterPaths(), { env: { PATH: dir } });
    expect(missing).toHaveLength(1);
    expect(missing[0]?.what).toMatch(/^go: go1\.20\.1 is older than go1\.\d+/);
  });

  it('reports too little disk for what must be built, and nothing when it is all built', async () => {
    const dir = await fakePath(['git', 'openssl', 'go']);
    const root = await mkdtemp(path.join(tmpdir(), 'gr-prereq-root-'));
    dirs.push(root);
    // A root with the real Go modules but no binaries: everything must be built.
    const paths = { ...clusterPaths(root), goModules: clusterPaths().goModules };
    const missing = await checkPrerequisites(paths, {
      env: { ...process.env, PATH: dir },
      freeBytes: async () => 2 ** 30,
    });
    expect(missing).toHaveLength(1);
    expect(missing[0]?.what).toMatch(
      /^disk space: building etcd, kubernetes, .* needs about \d+\.\d GiB, but there is 1\.0 GiB free at /,
    );
  });

  it('npm run cluster -- build with no go on PATH says so first and builds nothing', async () => {
    const dir = await fakePath(['node', 'git', 'openssl']);
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, [path.join(repoRoot, 'test', 'cluster', 'cli.ts'), 'build'], {
        env: { PATH: dir, HOME: process.env.HOME },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      child.on('close', (code) => resolve({ code, out }));
    });
    expect(r.code).toBe(1);
    expect(r.out).toContain(
      '1 prerequisite is missing (nothing was built or started):\n  - go: not found on PATH',
    );
    expect(r.out).not.toMatch(/^cluster: (building|built) /m);
  });

  it('is a PrerequisitesError carrying the list', async () => {
    const empty = await fakePath([]);
    const err = await requirePrerequisites(clusterPaths(), { env: { PATH: empty } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrerequisitesError);
    expect((err as PrerequisitesError).missing).toHaveLength(3);
  });
});
