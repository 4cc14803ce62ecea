// Credentials for a git write: from a mounted Secret directory (--git-credentials-dir), or from Argo
// CD's own repository Secrets (--git-argocd-credentials), matched the way Argo CD matches them
// (util/db/repository_secrets.go): a `repository` Secret whose url is the same repository, preferring
// one scoped to the Application's project; failing that, or when it holds no credentials, the
// `repo-creds` template with the longest matching url prefix. Argo CD's write credentials
// (`repository-write`, `repo-write-creds`, for its source hydrator) are tried first, the same way.
//
// Every credential is bound to its URL: a template or an --git-credentials-urls entry matches only a
// repository with the same scheme and host whose path continues its own at a `/`. Argo CD matches
// templates by plain string prefix (strings.HasPrefix), so there creds for https://github.com/org also
// match https://github.com/org-evil/x and https://github.com.attacker.net/x; here they do not. Both
// sides are canonical identities (service/core/repo-url.ts), the same ones the writer clones, so a
// URL cannot be bound under one spelling and contacted under another (`team-a/../team-b`).
//
// A key is written to a private temp dir for ssh (which reads keys only from files) and removed after
// the write. Nothing here logs or returns a credential in a message.
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { GitCredentials } from '../../git/writer.ts';
import {
  parseCredentialScope,
  parseRepoPrefix,
  type RepoIdentity,
  repoWithin,
  scopeCovers,
  tryParseRepoURL,
} from '../core/repo-url.ts';
import type { CoreApi } from '../kube/api.ts';

export const SECRET_TYPE_LABEL = 'argocd.argoproj.io/secret-type';
/** Write credentials first (they exist to push), then the read credentials Argo CD clones with. */
export const SECRET_TYPES = [
  { repository: 'repository-write', template: 'repo-write-creds' },
  { repository: 'repository', template: 'repo-creds' },
] as const;
const ALL_TYPES = SECRET_TYPES.flatMap((t) => [t.repository, t.template]);

/** An Argo CD repository Secret, decoded. */
export interface RepoSecret {
  namespace: string;
  name: string;
  type: string;
  data: Readonly<Record<string, string>>;
}

// --- URL matching: Argo CD's rules, over canonical identities (service/core/repo-url.ts) ------------

/** A repository Secret's url names `repo` (Argo CD's SameURL; a url that does not parse names nothing). */
function sameRepo(url: string, repo: RepoIdentity): boolean {
  return tryParseRepoURL(url)?.canonical === repo.canonical;
}

const has = (s: RepoSecret, key: string) => (s.data[key] ?? '') !== '';

/** Argo CD's Repository.HasCredentials, for the fields a Secret can hold. */
function holdsCredentials(s: RepoSecret): boolean {
  return [
    'username',
    'password',
    'bearerToken',
    'sshPrivateKey',
    'tlsClientCertKey',
    'githubAppPrivateKey',
  ].some((k) => has(s, k));
}

/** The repository Secret for `repo`: project-scoped first, then one without a project. */
function repositorySecret(secrets: readonly RepoSecret[], type: string, repo: RepoIdentity, project: string) {
  let fallback: RepoSecret | undefined;
  for (const s of secrets) {
    if (s.type !== type || !sameRepo(s.data.url ?? '', repo)) continue;
    const p = s.data.project ?? '';
    if (p === project) return s;
    if (p === '') fallback = s;
  }
  return fallback;
}

/**
 * True when `repo` lies under the URL prefix `prefix`: the same scheme, user, host and port, and a
 * path that equals the prefix's or continues it after a `/` (repoWithin). A prefix that does not
 * parse binds nothing.
 */
export function boundTo(repo: RepoIdentity, prefix: string): boolean {
  const p = parseRepoPrefix(prefix);
  return p !== undefined && repoWithin(repo, p);
}

/** An --git-credentials-urls list covers the repository (service/core/repo-url.ts, parseCredentialScope). */
export function allowedByList(repo: RepoIdentity, entries: readonly string[]): boolean {
  return entries.some((e) => {
    const scope = parseCredentialScope(e);
    return scope !== undefined && scopeCovers(scope, repo);
  });
}

/** The credential template whose url is the longest prefix of `repo` (first wins a tie, as in Argo CD). */
function templateSecret(secrets: readonly RepoSecret[], type: string, repo: RepoIdentity) {
  let best: RepoSecret | undefined;
  let max = -1;
  for (const s of secrets) {
    if (s.type !== type) continue;
    const prefix = parseRepoPrefix(s.data.url ?? '');
    if (prefix && prefix.segments.length > max && repoWithin(repo, prefix)) {
      max = prefix.segments.length;
      best = s;
    }
  }
  return best;
}

/** The Argo CD Secret whose credentials Argo CD would use for `repo` in `project`, write credentials first. */
export function matchRepoSecret(
  secrets: readonly RepoSecret[],
  repo: RepoIdentity,
  project: string,
): RepoSecret | undefined {
  for (const t of SECRET_TYPES) {
    const exact = repositorySecret(secrets, t.repository, repo, project);
    if (exact && holdsCredentials(exact)) return exact;
    const template = templateSecret(secrets, t.template, repo);
    if (template && holdsCredentials(template)) return template;
  }
  return undefined;
}

// --- turning a match into credentials for the writer ----------------------------------------------

/**
 * Credentials for one write, and what to remove afterwards. `source` names where they came from, for
 * the service's log; `kind` says only what sort they are, for Events in the workload's namespace
 * (which must not learn the names of Argo CD's Secrets).
 */
export interface ResolvedCredentials {
  credentials?: GitCredentials;
  source: string;
  kind: string;
  cleanup(): Promise<void>;
}

const isHttp = (repo: RepoIdentity) => repo.scheme === 'https' || repo.scheme === 'http';

const NONE: ResolvedCredentials = { source: 'none', kind: 'none', cleanup: async () => {} };
const ARGOCD_KIND = 'an Argo CD repository Secret';
const DIR_KIND = '--git-credentials-dir';

/** Writes an SSH key (and known_hosts) to a fresh 0700 dir, for GIT_SSH_COMMAND. */
async function sshFiles(
  tmp: string,
  key: string,
  knownHosts: string | undefined,
  source: string,
  kind: string,
): Promise<ResolvedCredentials> {
  const dir = await mkdtemp(path.join(tmp, 'gitops-reloader-ssh-'));
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    await chmod(dir, 0o700);
    const keyPath = path.join(dir, 'id');
    // ssh refuses a key without a final newline as "invalid format".
    await writeFile(keyPath, key.endsWith('\n') ? key : `${key}\n`, { mode: 0o600 });
    let knownHostsPath: string | undefined;
    if (knownHosts && knownHosts.trim() !== '') {
      knownHostsPath = path.join(dir, 'known_hosts');
      await writeFile(knownHostsPath, knownHosts, { mode: 0o600 });
    }
    return {
      credentials: { sshKeyPath: keyPath, ...(knownHostsPath ? { knownHostsPath } : {}) },
      source,
      kind,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
}

async function first(dir: string, names: readonly string[]): Promise<string | undefined> {
  for (const n of names) {
    const v = await readOptional(path.join(dir, n));
    if (v !== undefined && v.trim() !== '') return v;
  }
  return undefined;
}

/** File names accepted in --git-credentials-dir: ours, kubernetes.io/basic-auth and ssh-auth, and Argo CD's. */
export const DIR_FILES = {
  username: ['username'],
  token: ['token', 'password'],
  sshKey: ['ssh-privatekey', 'sshPrivateKey', 'identity'],
  knownHosts: ['known_hosts', 'knownHosts', 'ssh-knownhosts'],
} as const;

/**
 * Reads --git-credentials-dir at write time (a mounted Secret may have been rotated), for a repository
 * that --git-credentials-urls allows; for any other, nothing is read and none are returned.
 */
export async function credentialsFromDir(
  dir: string,
  repo: RepoIdentity,
  allowed: readonly string[],
  tmp: string = tmpdir(),
): Promise<ResolvedCredentials> {
  const source = DIR_KIND;
  if (!allowedByList(repo, allowed)) return NONE;
  if (isHttp(repo)) {
    const token = await first(dir, DIR_FILES.token);
    if (!token) return NONE;
    const username = (await first(dir, DIR_FILES.username))?.trim();
    return {
      credentials: { ...(username ? { username } : {}), token: token.replace(/[\r\n]+$/, '') },
      source,
      kind: DIR_KIND,
      cleanup: async () => {},
    };
  }
  const key = await first(dir, DIR_FILES.sshKey);
  if (!key) return NONE;
  return sshFiles(tmp, key, await first(dir, DIR_FILES.knownHosts), source, DIR_KIND);
}

/**
 * Credentials from a matched Argo CD Secret. `undefined` when it holds none the writer can use (a
 * GitHub App, a TLS client certificate or a bearer token), so the caller can fall back.
 */
export async function credentialsFromSecret(
  s: RepoSecret,
  repo: RepoIdentity,
  knownHosts: string | undefined,
  tmp: string = tmpdir(),
): Promise<ResolvedCredentials | undefined> {
  const source = `Argo CD Secret ${s.namespace}/${s.name} (${s.type})`;
  if (isHttp(repo)) {
    if (!has(s, 'password')) return undefined;
    const username = s.data.username ?? '';
    return {
      credentials: { ...(username ? { username } : {}), token: s.data.password as string },
      source,
      kind: ARGOCD_KIND,
      cleanup: async () => {},
    };
  }
  if (!has(s, 'sshPrivateKey')) return undefined;
  return sshFiles(tmp, s.data.sshPrivateKey as string, knownHosts, source, ARGOCD_KIND);
}

/** Lists Argo CD's repository Secrets in its namespace, decoded. */
export async function listRepoSecrets(core: CoreApi, namespace: string): Promise<RepoSecret[]> {
  const list = await core.listNamespacedSecret({
    namespace,
    labelSelector: `${SECRET_TYPE_LABEL} in (${ALL_TYPES.join(',')})`,
  });
  return list.items.map((s) => ({
    namespace,
    name: s.metadata?.name ?? '',
    type: s.metadata?.labels?.[SECRET_TYPE_LABEL] ?? '',
    data: Object.fromEntries(
      Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    ),
  }));
}

/** Argo CD's known hosts (argocd-ssh-known-hosts-cm), for SSH keys taken from its Secrets. */
export async function argoCdKnownHosts(core: CoreApi, namespace: string): Promise<string | undefined> {
  try {
    const cm = await core.readNamespacedConfigMap({ name: 'argocd-ssh-known-hosts-cm', namespace });
    return cm.data?.ssh_known_hosts;
  } catch (err) {
    if ((err as { code?: unknown }).code === 404) return undefined;
    throw err;
  }
}

/** Start-up check of --git-credentials-dir: it must be a readable directory. */
export async function checkCredentialsDir(dir: string): Promise<string | undefined> {
  try {
    const s = await stat(dir);
    return s.isDirectory() ? undefined : 'is not a directory';
  } catch (err) {
    return `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
}

/** What the writes of one batch share: one list of Argo CD's Secrets, one read of its known hosts. */
export interface CredentialCache {
  secrets?: Promise<RepoSecret[]>;
  knownHosts?: Promise<string | undefined>;
}

export interface CredentialOptions {
  core: CoreApi;
  credentialsDir?: string;
  /** --git-credentials-urls: the repositories the directory's credentials may be sent to. */
  credentialsURLs?: readonly string[];
  argocdCredentials: boolean;
  /** Argo CD's own namespace: where it keeps repository Secrets. */
  argocdNamespace: string;
  tmpDir?: string;
}

/**
 * Credentials for writing to `repo` for an Application of `project`: a matching Argo CD Secret
 * (when allowed) wins; else --git-credentials-dir; else none (userinfo in the URL, or a public remote).
 * `cache` lets the writes of one batch share one Secret list.
 */
export async function resolveCredentials(
  o: CredentialOptions,
  repo: RepoIdentity,
  project: string,
  cache: CredentialCache = {},
): Promise<ResolvedCredentials> {
  const tmp = o.tmpDir ?? tmpdir();
  if (o.argocdCredentials) {
    cache.secrets ??= listRepoSecrets(o.core, o.argocdNamespace);
    const match = matchRepoSecret(await cache.secrets, repo, project);
    if (match) {
      let knownHosts: string | undefined;
      if (!isHttp(repo)) {
        cache.knownHosts ??= argoCdKnownHosts(o.core, o.argocdNamespace);
        knownHosts = await cache.knownHosts;
      }
      const creds = await credentialsFromSecret(match, repo, knownHosts, tmp);
      if (creds) return creds;
    }
  }
  if (o.credentialsDir) return credentialsFromDir(o.credentialsDir, repo, o.credentialsURLs ?? [], tmp);
  return NONE;
}
