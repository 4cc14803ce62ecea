// Whether an Argo CD Application may be used to write a workload's checksum to git. The Application is
// named by the workload's own label or tracking annotation, which its team controls, so the name alone
// proves nothing: a team could name another team's Application and have the service push to that
// team's repository with that team's credentials. An Application is used only when it provably
// manages the workload, in the way Argo CD itself would allow:
//
// 1. it sits in one of --argocd-namespaces (Argo CD's own, or one Argo CD serves apps from);
// 2. its status.resources list this exact workload, and its destination is this cluster;
// 3. its AppProject allows the Application's namespace (spec.sourceNamespaces, for apps outside
//    Argo CD's own namespace), the workload's namespace as a destination, and the repository as a
//    source, matched as Argo CD matches them (pkg/apis/application/v1alpha1/app_project_types.go).
//
// Pure: the caller reads the objects. A refusal names the rule and nothing of the other
// Application (its repository, path or project), because it becomes an Event in the workload's
// namespace.

import { canonicalRepoPattern, canonicalServerURL, type RepoIdentity } from '../core/repo-url.ts';

/** The rules; each is a value of the `rule` label of gitops_reloader_git_refused_total. */
export const AUTHORITY_RULES = [
  'app-namespace',
  'app-unreadable',
  'not-managed',
  'destination-cluster',
  'project-unreadable',
  'project-source-namespace',
  'project-destination',
  'project-source-repo',
] as const;
export type AuthorityRule = (typeof AUTHORITY_RULES)[number];

export interface WorkloadId {
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

export type Authority = { ok: true } | { ok: false; rule: AuthorityRule; message: string };

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];

/** Argo CD's names for the cluster it runs in. */
export const IN_CLUSTER_SERVER = 'https://kubernetes.default.svc';
export const IN_CLUSTER_NAME = 'in-cluster';

/** The Application's namespace is one Argo CD serves apps from (--argocd-namespaces). */
export function appNamespaceAllowed(appNamespace: string, argocdNamespaces: readonly string[]): Authority {
  return argocdNamespaces.includes(appNamespace)
    ? { ok: true }
    : {
        ok: false,
        rule: 'app-namespace',
        message: `the Application named by the workload is in namespace ${appNamespace}, which is not one of --argocd-namespaces`,
      };
}

/**
 * The Application's destination server, canonical (service/core/repo-url.ts): '' when it names none,
 * undefined when it is not a URL we read (a dot segment, userinfo, a backslash…), which is no cluster.
 */
function destinationServer(dest: Obj | undefined): string | undefined {
  const raw = str(dest?.server);
  return raw.trim() === '' ? '' : canonicalServerURL(raw);
}

/** The destination is this cluster: its server URL, canonical, or its name when it gives no server. */
function inThisCluster(dest: Obj | undefined): boolean {
  const server = destinationServer(dest);
  return server === IN_CLUSTER_SERVER || (server === '' && str(dest?.name) === IN_CLUSTER_NAME);
}

/** Rule 2: the Application's live status lists this workload, and it deploys to this cluster. */
export function appManages(app: unknown, w: WorkloadId): Authority {
  const a = obj(app);
  const dest = obj(obj(a?.spec)?.destination);
  if (!inThisCluster(dest)) {
    return {
      ok: false,
      rule: 'destination-cluster',
      message: 'the Application does not deploy to this cluster',
    };
  }
  const resources = Array.isArray(obj(a?.status)?.resources) ? (obj(a?.status)?.resources as unknown[]) : [];
  const listed = resources.some((r) => {
    const o = obj(r);
    return (
      o !== undefined &&
      str(o.group) === w.group &&
      str(o.kind) === w.kind &&
      str(o.namespace) === w.namespace &&
      str(o.name) === w.name
    );
  });
  return listed
    ? { ok: true }
    : {
        ok: false,
        rule: 'not-managed',
        message: `the Application's status.resources do not list ${w.kind} ${w.namespace}/${w.name}`,
      };
}

/** Rule 3: the AppProject allows the Application's namespace, the workload's namespace and the repository. */
export function projectAllows(
  project: unknown,
  o: {
    appNamespace: string;
    /** Argo CD's own namespace, where apps need no sourceNamespaces entry. */
    controlNamespace: string;
    app: unknown;
    workloadNamespace: string;
    /** The Application's repository, parsed once (service/core/repo-url.ts). */
    repo: RepoIdentity;
  },
): Authority {
  const spec = obj(obj(project)?.spec) ?? {};
  if (o.appNamespace !== o.controlNamespace) {
    const allowed = strings(spec.sourceNamespaces).some((p) => namespacePatternMatches(p, o.appNamespace));
    if (!allowed) {
      return {
        ok: false,
        rule: 'project-source-namespace',
        message: `the Application's project does not allow Applications in namespace ${o.appNamespace}`,
      };
    }
  }
  const dest = obj(obj(obj(o.app)?.spec)?.destination);
  const destinations = Array.isArray(spec.destinations) ? spec.destinations.map(obj) : [];
  // Argo CD infers the server from the name (and back) before it checks a destination; for this
  // cluster, whose names are fixed, both are known.
  const server = destinationServer(dest) ?? '';
  const name = str(dest?.name);
  const inCluster = inThisCluster(dest);
  if (
    !destinationPermitted(
      destinations.filter((d): d is Obj => d !== undefined),
      inCluster ? IN_CLUSTER_SERVER : server,
      inCluster ? name || IN_CLUSTER_NAME : name,
      o.workloadNamespace,
    )
  ) {
    return {
      ok: false,
      rule: 'project-destination',
      message: `the Application's project does not allow namespace ${o.workloadNamespace} as a destination`,
    };
  }
  if (!sourcePermitted(strings(spec.sourceRepos), o.repo)) {
    return {
      ok: false,
      rule: 'project-source-repo',
      message: "the Application's project does not allow its source repository",
    };
  }
  return { ok: true };
}

const isDeny = (p: string) => p.startsWith('!');

/** Argo CD's globMatch: `!` negates (when allowed), `*` alone matches everything, else a glob. */
function globMatch(pattern: string, value: string, negation: boolean, separator?: string): boolean {
  if (negation && isDeny(pattern)) return !globMatches(pattern.slice(1), value, separator);
  if (pattern === '*') return true;
  return globMatches(pattern, value, separator);
}

/**
 * AppProject.IsSourcePermitted: any allow pattern matches, and no deny pattern does. The repository is
 * its canonical identity, the one git contacts: it has no `.`/`..` segment, so `team-a/*` (and even
 * `team-a/**`) matches only what lies under team-a. Patterns get the same spelling. Unlike Argo CD,
 * which lower-cases the whole URL, the path's case counts: on a server with case-sensitive paths
 * `Team-A` is another repository than `team-a`, so a mismatch refuses (fails closed).
 */
export function sourcePermitted(sourceRepos: readonly string[], repo: RepoIdentity): boolean {
  const src = repo.canonical;
  let any = false;
  for (const raw of sourceRepos) {
    const pattern = isDeny(raw) ? `!${canonicalRepoPattern(raw.slice(1))}` : canonicalRepoPattern(raw);
    const matched = globMatch(pattern, src, true, '/');
    if (matched) any = true;
    else if (isDeny(pattern)) return false;
  }
  return any;
}

/** AppProject.isDestinationMatched for the workload's namespace (server or name, and namespace). */
export function destinationPermitted(
  destinations: readonly Obj[],
  server: string,
  name: string,
  namespace: string,
): boolean {
  let any = false;
  let denied = false;
  for (const d of destinations) {
    const dName = str(d.name);
    const dServer = canonicalServerURL(str(d.server)) ?? str(d.server);
    const dNamespace = str(d.namespace);
    const nameMatched = name !== '' && globMatch(dName, name, true);
    const serverMatched = server !== '' && globMatch(dServer, server, true);
    const nsMatched = globMatch(dNamespace, namespace, true);
    if ((serverMatched || nameMatched) && nsMatched) any = true;
    else if (
      (!nameMatched && isDeny(dName)) ||
      (!serverMatched && isDeny(dServer)) ||
      (!nsMatched && isDeny(dNamespace))
    ) {
      denied = true;
    }
  }
  return any && !denied;
}

/** Argo CD's glob.MatchStringInList with REGEXP: `/re/` is an anchored regular expression, else a glob. */
export function namespacePatternMatches(pattern: string, value: string): boolean {
  if (pattern.length > 2 && pattern.startsWith('/') && pattern.endsWith('/')) {
    try {
      return new RegExp(`^(?:${pattern.slice(1, -1)})$`).test(value);
    } catch {
      return false;
    }
  }
  return globMatch(pattern, value, false);
}

/**
 * A glob in the subset of gobwas/glob that AppProjects use: `*` (any run of characters, not the
 * separator when one is given), `**` (any run, separators included), `?` (one character, not the
 * separator), `{a,b}` alternatives, `[abc]`/`[a-z]`/`[!a]` classes, and `\` escapes. A pattern it
 * cannot read matches nothing: for a permission check, failing closed is the safe way to be wrong.
 */
export function globMatches(pattern: string, value: string, separator?: string): boolean {
  const re = globRegExp(pattern, separator);
  return re?.test(value) === true;
}

function globRegExp(pattern: string, separator?: string): RegExp | undefined {
  const sep = separator ? escapeRe(separator) : '';
  const any = sep ? `[^${sep}]` : '[\\s\\S]';
  let out = '';
  let depth = 0;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '\\') {
      const next = pattern[i + 1];
      if (next === undefined) return undefined;
      out += escapeRe(next);
      i++;
    } else if (c === '*') {
      if (pattern[i + 1] === '*') {
        out += '[\\s\\S]*';
        i++;
      } else out += `${any}*`;
    } else if (c === '?') out += any;
    else if (c === '{') {
      out += '(?:';
      depth++;
    } else if (c === '}' && depth > 0) {
      out += ')';
      depth--;
    } else if (c === ',' && depth > 0) out += '|';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) return undefined;
      let body = pattern.slice(i + 1, end);
      const negate = body.startsWith('!');
      if (negate) body = body.slice(1);
      if (!/^([^\\\]]|\\.)+$/.test(body)) return undefined;
      out += `[${negate ? '^' : ''}${body.replace(/[\]^]/g, '\\$&')}]`;
      i = end;
    } else out += escapeRe(c);
  }
  if (depth !== 0) return undefined;
  try {
    return new RegExp(`^${out}$`);
  } catch {
    return undefined;
  }
}

const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
