// What is running: the package version, the git commit it was built from, and the Node.js version.
// `gitops-reloader version`, the gitops_reloader_build_info gauge and the image's labels all report
// these, so a pod, a scrape and `docker inspect` can be matched to one commit.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

export interface BuildInfo {
  version: string;
  commit: string;
  node: string;
}

/** A 40-hex commit, or 'unknown'; nothing else reaches a label. */
function commitOrUnknown(s: string | undefined): string {
  const t = (s ?? '').trim();
  return /^[0-9a-f]{7,64}$/.test(t) ? t : 'unknown';
}

function readJson(url: URL): Record<string, unknown> | undefined {
  try {
    return existsSync(url) ? (JSON.parse(readFileSync(url, 'utf8')) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

let cached: BuildInfo | undefined;

/**
 * From service/build-info.ts (a source checkout) or dist/service/build-info.js (the image): the
 * first package.json found upward wins. The commit comes from dist/build-info.json, written by the
 * image build from its GIT_COMMIT build argument; in a source checkout, from `git rev-parse HEAD`.
 */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  let version = 'unknown';
  let commit: string | undefined;
  for (const rel of ['../', '../../']) {
    const pkg = readJson(new URL(`${rel}package.json`, import.meta.url));
    if (!pkg) continue;
    if (typeof pkg.version === 'string') version = pkg.version;
    const stamped = readJson(new URL(`${rel}dist/build-info.json`, import.meta.url));
    if (typeof stamped?.commit === 'string') commit = stamped.commit;
    else {
      try {
        commit = execFileSync('git', ['rev-parse', 'HEAD'], {
          cwd: new URL(rel, import.meta.url),
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
          timeout: 5000,
        });
      } catch {
        // Not a git checkout, or no git: the commit is unknown.
      }
    }
    break;
  }
  cached = { version, commit: commitOrUnknown(commit), node: process.versions.node };
  return cached;
}
