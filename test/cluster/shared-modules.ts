// The modules kwok and Helm share with the Kubernetes build must resolve to the same versions, with
// no replacement of their own: Go keys a compiled package by its module's selected version, so one
// differing dependency (x/net, grpc, otel, …) compiles again every k8s.io package above it (README,
// "The local control plane"). `skew` says which module to raise where; the build-list reader runs
// `go list -m -json all` in a module directory.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

/** The Go modules whose k8s.io packages are compiled once, by the Kubernetes build. */
export const SHARING = ['kubernetes', 'kwok', 'helm'] as const;

export interface Selected {
  /** The version the build list selects (before any replacement). */
  version: string;
  /** The replacement's version, when the module is replaced. */
  replacedBy?: string;
}

/** One Go module's build list: module path → what it selects. */
export type BuildList = ReadonlyMap<string, Selected>;

export interface Skew {
  module: string;
  /** Go module directory → what it selects. */
  seen: Record<string, string>;
  /** Where it must be required, and at which version, for every build to select the same. */
  raise: Array<{ in: string; to: string }>;
}

/** Parses the concatenated JSON objects `go list -m -json all` prints. */
export function parseBuildList(out: string): BuildList {
  const list = new Map<string, Selected>();
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < out.length; i++) {
    const c = out[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === '{') {
      if (depth === 0) start = i;
      depth++;
    } else if (c === '}') {
      depth--;
      if (depth === 0) {
        const m = JSON.parse(out.slice(start, i + 1)) as {
          Path: string;
          Version?: string;
          Main?: boolean;
          Replace?: { Version?: string };
        };
        if (!m.Main && m.Version) {
          list.set(m.Path, {
            version: m.Version,
            ...(m.Replace?.Version ? { replacedBy: m.Replace.Version } : {}),
          });
        }
      }
    }
  }
  return list;
}

/** Orders Go module versions (semver with pre-release; pseudo-versions sort by their timestamp). */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string) => {
    const m = /^v(\d+)\.(\d+)\.(\d+)(?:-([^+]*))?/.exec(v);
    if (!m) throw new Error(`not a Go module version: ${v}`);
    return { nums: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] };
  };
  const x = parse(a);
  const y = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (x.nums[i] as number) - (y.nums[i] as number);
    if (d !== 0) return d;
  }
  if (x.pre === undefined || y.pre === undefined) {
    return x.pre === y.pre ? 0 : x.pre === undefined ? 1 : -1;
  }
  return x.pre < y.pre ? -1 : x.pre > y.pre ? 1 : 0;
}

/**
 * The modules that two or more builds select at different versions, or that one of them replaces with
 * another version than it selects (a replaced module is keyed by the version it replaces, so it never
 * shares with a build that selects the replacement). A module a build list names but that build
 * compiles no package of differs harmlessly: `provides`, when given, names per build the modules that
 * give it a package, and only those count.
 */
export function skew(
  lists: Record<string, BuildList>,
  provides?: Record<string, ReadonlySet<string>>,
): Skew[] {
  const names = Object.keys(lists);
  const all = new Set(names.flatMap((n) => [...(lists[n] as BuildList).keys()]));
  const out: Skew[] = [];
  for (const module of [...all].sort()) {
    const seen: Record<string, string> = {};
    let foreignReplacement = false;
    for (const n of names) {
      const s = lists[n]?.get(module);
      if (!s || (provides && !provides[n]?.has(module))) continue;
      seen[n] = s.version;
      if (s.replacedBy && s.replacedBy !== s.version) foreignReplacement = true;
    }
    const versions = Object.values(seen);
    if (versions.length < 2) continue;
    const top = versions.reduce((m, v) => (compareVersions(v, m) > 0 ? v : m));
    const raise = Object.entries(seen)
      .filter(([, v]) => v !== top)
      .map(([n]) => ({ in: n, to: top }));
    if (raise.length > 0 || foreignReplacement) out.push({ module, seen, raise });
  }
  return out;
}

const run = promisify(execFile);

/** Runs `go list` in one of test/cluster/go's modules. */
export async function readBuildList(goModules: string, module: string): Promise<BuildList> {
  const { stdout } = await run('go', ['list', '-m', '-json', 'all'], {
    cwd: path.join(goModules, module),
    maxBuffer: 64 * 1024 * 1024,
  });
  return parseBuildList(stdout);
}

/** The modules that provide a package to the given builds (their `go list -deps`). */
export async function providingModules(
  goModules: string,
  module: string,
  pkgs: string[],
): Promise<Set<string>> {
  const { stdout } = await run(
    'go',
    ['list', '-deps', '-f', '{{if .Module}}{{.Module.Path}}{{end}}', ...pkgs],
    {
      cwd: path.join(goModules, module),
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  return new Set(stdout.split('\n').filter(Boolean));
}
