// What the local environment needs from the machine, checked in seconds before anything is built:
// `npm run demo`, `npm test` (test/global-setup.ts, test/unit-setup.ts), `npm run cluster -- build|up`
// and .ci/run (`npm run cluster -- check`) all call requirePrerequisites first, so a missing Go is
// reported with everything else missing in one list, not after a long build. Everything else
// (Node 24, npm packages, the control plane, Argo CD, Redis, the Lua VM) is built or fetched by the
// commands themselves.
import { execFile } from 'node:child_process';
import { constants, existsSync } from 'node:fs';
import { access, readFile, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { type BuildPlan, planBuild } from './build.ts';
import type { ClusterPaths } from './paths.ts';

const exec = promisify(execFile);

/** One missing prerequisite: what is wrong and how to get it. */
export interface Missing {
  what: string;
  fix: string;
}

export class PrerequisitesError extends Error {
  override name = 'PrerequisitesError';
  readonly missing: readonly Missing[];
  constructor(missing: readonly Missing[]) {
    super(formatMissing(missing));
    this.missing = missing;
  }
}

export function formatMissing(missing: readonly Missing[]): string {
  return [
    `${missing.length} prerequisite${missing.length === 1 ? ' is' : 's are'} missing (nothing was built or started):`,
    ...missing.map((m) => `  - ${m.what}\n      ${m.fix}`),
  ].join('\n');
}

/** Finds an executable on PATH, as the shell would. */
export async function onPath(
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, name);
    try {
      await access(file, constants.X_OK);
      if ((await stat(file)).isFile()) return file;
    } catch {}
  }
  return undefined;
}

/** "1.26.8" from "go version go1.26.8 linux/amd64"; compares numerically. */
export function goVersionAtLeast(have: string, want: string): boolean {
  const parts = (v: string) =>
    (/(\d+)\.(\d+)(?:\.(\d+))?/.exec(v) ?? []).slice(1, 4).map((x) => Number(x ?? 0));
  const [a, b] = [parts(have), parts(want)];
  for (let i = 0; i < 3; i++) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  }
  return true;
}

/**
 * The lowest Go that builds every module with the machine's toolchain: the highest `go` directive
 * of the modules that do not name their own toolchain (build.ts `toolchains`, fetched by Go itself).
 */
export async function minimumGo(paths: ClusterPaths, modules: readonly string[]): Promise<string> {
  let min = '1.21';
  for (const m of modules) {
    const gomod = await readFile(path.join(paths.goModules, m, 'go.mod'), 'utf8');
    const v = /^go (\d+\.\d+(?:\.\d+)?)$/m.exec(gomod)?.[1];
    if (v && !goVersionAtLeast(min, v)) min = v;
  }
  return min;
}

/** The nearest existing ancestor of `p` (a cache directory may not exist yet). */
function existing(p: string): string {
  let dir = path.resolve(p);
  while (!existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
}

async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(existing(dir));
  return s.bavail * s.bsize;
}

const GiB = 1024 ** 3;

export interface CheckOptions {
  /** Only the Go modules these entry points may build (default: all). */
  modules?: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** For tests: the free space instead of statfs. */
  freeBytes?: (dir: string) => Promise<number>;
}

/**
 * Everything missing, in one list. Runs `go version` and `go env` only (no download, no build:
 * GOTOOLCHAIN=local), so it answers within a few seconds.
 */
export async function checkPrerequisites(paths: ClusterPaths, o: CheckOptions = {}): Promise<Missing[]> {
  const env = o.env ?? process.env;
  const missing: Missing[] = [];
  const goFix = 'install Go from https://go.dev/dl/ (a tarball: no root needed) and put its bin/ on PATH';
  const go = await onPath('go', env);
  let plan: BuildPlan | undefined;
  if (!go) {
    missing.push({
      what: 'go: not found on PATH (it builds the control plane, Argo CD, Redis and the Lua VM)',
      fix: goFix,
    });
  } else {
    try {
      const goEnv = { ...env, GOTOOLCHAIN: 'local' };
      const { stdout } = await exec(go, ['env', 'GOVERSION', 'GOCACHE', 'GOMODCACHE'], {
        env: goEnv,
        timeout: 8000,
      });
      const [version = '', gocache = '', gomodcache = ''] = stdout.split('\n').map((l) => l.trim());
      plan = await planBuild(paths, version, o.modules);
      const need = await minimumGo(
        paths,
        plan.modules.filter((m) => !plan?.toolchains[m]),
      );
      if (!goVersionAtLeast(version, need)) {
        missing.push({
          what: `go: ${version} is older than go${need}, which the pinned Go modules need`,
          fix: goFix,
        });
      }
      if (plan.stale.length > 0) {
        // Measured on a cold build (README, "The local environment"): build cache, module cache and binaries.
        const needBytes = plan.stale.reduce((sum, m) => sum + (plan?.diskGiB[m] ?? 0.5), 0) * GiB;
        const free = o.freeBytes ?? freeBytes;
        const short: string[] = [];
        const seen = new Set<number>();
        for (const dir of [gocache, gomodcache, paths.bin].filter(Boolean)) {
          const dev = (await stat(existing(dir))).dev;
          if (seen.has(dev)) continue;
          seen.add(dev);
          const have = await free(dir);
          if (have < needBytes) short.push(`${(have / GiB).toFixed(1)} GiB free at ${existing(dir)}`);
        }
        if (short.length > 0) {
          missing.push({
            what: `disk space: building ${plan.stale.join(', ')} needs about ${(needBytes / GiB).toFixed(1)} GiB, but there is ${short.join(' and ')}`,
            fix: 'free some space, or point GOCACHE and GOMODCACHE (go env -w) at a larger disk',
          });
        }
      }
    } catch (err) {
      missing.push({ what: `go: ${go} does not run (${(err as Error).message.split('\n')[0]})`, fix: goFix });
    }
  }
  const git = await onPath('git', env);
  if (!git) {
    missing.push({
      what: 'git: not found on PATH (the git server, Argo CD and git mode use it)',
      fix: 'Debian: apt-get install git',
    });
  } else {
    const exe = await exec(git, ['--exec-path'], { env, timeout: 5000 }).then(
      (r) => r.stdout.trim(),
      () => '',
    );
    if (!existsSync(path.join(exe, 'git-http-backend'))) {
      missing.push({
        what: `git-http-backend: not in git's exec path ${JSON.stringify(exe)} (the local git server serves through it)`,
        fix: 'install a full git (Debian: apt-get install git)',
      });
    }
  }
  if (!(await onPath('openssl', env))) {
    missing.push({
      what: 'openssl: not found on PATH (it makes the control plane certificates)',
      fix: 'Debian: apt-get install openssl',
    });
  }
  return missing;
}

/** Throws one PrerequisitesError listing everything missing; returns when nothing is. */
export async function requirePrerequisites(paths: ClusterPaths, o: CheckOptions = {}): Promise<void> {
  const missing = await checkPrerequisites(paths, o);
  if (missing.length > 0) throw new PrerequisitesError(missing);
}

/**
 * For the test runner's global setups: prints the list alone and exits 1, instead of an error with
 * a stack trace that buries it (nothing has been built or started yet, so there is nothing to stop).
 */
export async function requirePrerequisitesOrExit(paths: ClusterPaths, o: CheckOptions = {}): Promise<void> {
  const missing = await checkPrerequisites(paths, o);
  if (missing.length === 0) return;
  console.error(formatMissing(missing));
  process.exit(1);
}

// `node test/cluster/prerequisites.ts`: the check alone, needing no npm package (.ci/run runs it
// before `npm ci`).
if (import.meta.main) {
  const { clusterPaths } = await import('./paths.ts');
  const missing = await checkPrerequisites(clusterPaths());
  if (missing.length > 0) {
    console.error(formatMissing(missing));
    process.exit(1);
  }
  console.log('prerequisites: go, git, openssl and disk space present');
}
