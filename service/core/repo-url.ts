// The one parser of repository URLs (and of the other URLs that decide authority, such as an Argo CD
// destination server). A URL is parsed once into a canonical identity; every check (the AppProject's
// sourceRepos, the binding of a credential to a URL prefix, Argo CD's repository Secrets and
// templates) and every action (the URL git clones and pushes, the scope of the token header) uses
// that identity, so what was allowed is exactly what is contacted.
//
// Spellings that parsers disagree on are refused rather than interpreted: WHATWG's URL resolves `..`
// and `%2e%2e` and reads `\` as `/` for https, git and servers read them in other ways, and a check
// over the raw string saw a third thing (docs/security.md, "Repository URLs"). Pure: no I/O.

export type RepoScheme = 'https' | 'http' | 'ssh' | 'file';

export interface RepoIdentity {
  scheme: RepoScheme;
  /** The user of an ssh URL (`git`), or an http(s) username; '' when none. Never a password. */
  user: string;
  /** Lower case; '' for file://. An IPv6 literal keeps its brackets. */
  host: string;
  /** '' when absent or the scheme's default (443, 80, 22). */
  port: string;
  /** The path's segments: none is empty, `.` or `..`; the last has no `.git` suffix. */
  segments: readonly string[];
  /** `scheme://[ssh-user@]host[:port]/path`: equal exactly when two URLs name the same repository. */
  canonical: string;
  /** How git is to be given it: scp-like (`user@host:path`), and with `.git`, as it was written. */
  scp: boolean;
  gitSuffix: boolean;
}

/** A URL that is refused; the message says why without repeating the URL. */
export class RepoURLError extends Error {
  override name = 'RepoURLError';
}

const DEFAULT_PORTS: Record<string, string> = { https: '443', http: '80', ssh: '22' };
const SCHEMES: ReadonlySet<string> = new Set(['https', 'http', 'ssh', 'file']);
const HOST_NAME = /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/;
const IPV6 = /^\[[0-9a-f:.]+\]$/;
const USER = /^[A-Za-z0-9._~-]+$/;
// RFC 3986 pchar, without `%` (handled on its own).
const SEGMENT_CHARS = /^[A-Za-z0-9._~!$&'()*+,;=:@-]*$/;
const UNRESERVED = /^[A-Za-z0-9_~-]$/;

/**
 * Parses a repository URL: https://, http://, ssh://, file:// or scp-like `user@host:path`. Throws
 * RepoURLError for any URL with a `.`/`..` segment, a backslash, a percent-encoded `.`, `/`, `\` or
 * `%`, a control or non-ASCII character, a query or fragment, or userinfo with a password.
 */
export function parseRepoURL(raw: string): RepoIdentity {
  const s = checkCharacters(raw);
  const scp = /^(?:([^@/:]+)@)?([^/:@]+):(.*)$/.exec(s);
  if (scp && !s.includes('://')) {
    const [, user = '', host = '', rest = ''] = scp;
    // An absolute scp path (`host:/srv/repo`) is spelled as ssh://, which is absolute too.
    return identity('ssh', checkUser(user), checkHost(host), '', repoPath(rest), !rest.startsWith('/'));
  }
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]*)(.*)$/.exec(s);
  if (!m) throw new RepoURLError('it is neither a URL (https://, ssh://) nor scp-like user@host:path');
  const scheme = (m[1] as string).toLowerCase();
  if (!SCHEMES.has(scheme))
    throw new RepoURLError(`the scheme ${scheme}: is not supported (https, http, ssh)`);
  const { user, host, port } = authority(m[2] as string, scheme);
  if (scheme === 'file' && (host !== '' || user !== '' || port !== '')) {
    throw new RepoURLError('a file:// URL names no host');
  }
  if (scheme !== 'file' && host === '') throw new RepoURLError('it names no host');
  return identity(scheme as RepoScheme, user, host, port, repoPath(m[3] as string), false);
}

/** The text starts with a URL scheme (`x://`): for inputs that must not be a URL at all. */
export function hasURLScheme(raw: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(raw.trim());
}

/**
 * An --git-credentials-urls entry: a URL prefix (`https://git.example.com/team-a`, `git@host:team`),
 * or a bare host (`git.example.com[:port]`), which stands for https to it and ssh to user@host.
 */
export type CredentialScope = { prefix: RepoIdentity } | { host: string; port: string };

/** Undefined for an entry that is neither a prefix nor a host. */
export function parseCredentialScope(entry: string): CredentialScope | undefined {
  const e = entry.trim();
  if (e === '') return undefined;
  if (hasURLScheme(e) || e.includes('@')) {
    const prefix = parseRepoPrefix(e);
    return prefix && { prefix };
  }
  const https = parseRepoPrefix(`https://${e}`);
  return https && https.segments.length === 0 ? { host: https.host, port: https.port } : undefined;
}

/** The scope covers the repository: under the prefix, or on the host (https, or ssh with a user). */
export function scopeCovers(scope: CredentialScope, repo: RepoIdentity): boolean {
  if ('prefix' in scope) return repoWithin(repo, scope.prefix);
  if (repo.host !== scope.host) return false;
  if (repo.scheme === 'https') return repo.port === scope.port;
  return repo.scheme === 'ssh' && repo.user !== '' && scope.port === '' && repo.port === '';
}

/** An OCI artifact reference (`oci://…`), which Argo CD renders from a registry, not from git. */
export function isOciReference(raw: string): boolean {
  return /^oci:\/\//i.test(raw.trim());
}

/** parseRepoURL, or undefined for a refused URL. */
export function tryParseRepoURL(raw: string): RepoIdentity | undefined {
  try {
    return parseRepoURL(raw);
  } catch (err) {
    if (err instanceof RepoURLError) return undefined;
    throw err;
  }
}

/** Why a URL is refused, or undefined when it parses. */
export function repoURLProblem(raw: string): string | undefined {
  try {
    parseRepoURL(raw);
    return undefined;
  } catch (err) {
    if (err instanceof RepoURLError) return err.message;
    throw err;
  }
}

/**
 * The URL git is given for an identity. For http(s) the user is left out (it travels in the
 * Authorization header, scoped to this URL). parseRepoURL(contactURL(id)) has id's canonical form.
 */
export function contactURL(id: RepoIdentity): string {
  const path = `${id.segments.join('/')}${id.gitSuffix ? '.git' : ''}`;
  const user = id.user !== '' && id.scheme === 'ssh' ? `${id.user}@` : '';
  if (id.scp && id.port === '') return `${user}${id.host}:${path}`;
  return `${id.scheme}://${user}${id.host}${id.port ? `:${id.port}` : ''}/${path}`;
}

/** The identity without its user, query-free, for messages and logs. */
export function displayURL(id: RepoIdentity): string {
  return contactURL({ ...id, user: '', scp: false });
}

/**
 * True when `repo` lies under `prefix`: the same scheme, (ssh) user, host and port, and the prefix's path
 * segments are the first segments of the repository's. `team-a` never covers `team-abc`.
 */
export function repoWithin(repo: RepoIdentity, prefix: RepoIdentity): boolean {
  if (
    repo.scheme !== prefix.scheme ||
    (repo.scheme === 'ssh' && repo.user !== prefix.user) ||
    repo.host !== prefix.host ||
    repo.port !== prefix.port ||
    prefix.segments.length > repo.segments.length
  ) {
    return false;
  }
  return prefix.segments.every((seg, i) => repo.segments[i] === seg);
}

/**
 * A URL prefix a credential is bound to: like parseRepoURL, but a host alone (no path) is allowed,
 * as in Argo CD's repo-creds `url: https://git.example.com`.
 */
export function parseRepoPrefix(raw: string): RepoIdentity | undefined {
  const s = raw.trim().replace(/\/+$/, '');
  const hostOnly = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/[^/]+|[^@/:]+@[^/:@]+:?)$/.test(s);
  if (!hostOnly) return tryParseRepoURL(s);
  const id = tryParseRepoURL(s.includes('://') ? `${s}/x` : `${s.replace(/:$/, '')}:x`);
  return id && { ...id, segments: [], canonical: canonicalOf(id.scheme, id.user, id.host, id.port, []) };
}

/**
 * An AppProject sourceRepos pattern (trusted: the platform team writes it), brought to the canonical
 * spelling so that it can be glob-matched against `RepoIdentity.canonical`: scp-like becomes ssh://,
 * scheme and host lower case, the default port, a trailing `/` and `.git` dropped. Glob characters
 * pass through. A pattern without a scheme is returned trimmed.
 */
export function canonicalRepoPattern(raw: string): string {
  const p = raw.trim();
  const scp = /^(?:([^@/:]+)@)?([^/:@]+):(.*)$/.exec(p);
  if (scp && !p.includes('://')) {
    const [, user, host = '', rest = ''] = scp;
    return patternOf('ssh', user ? `${user}@` : '', host, '', rest);
  }
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]*)(.*)$/.exec(p);
  if (!m) return p;
  const scheme = (m[1] as string).toLowerCase();
  const auth = m[2] as string;
  const at = auth.lastIndexOf('@');
  const user = at >= 0 ? auth.slice(0, at + 1) : '';
  const hostPort = /^(.*?)(?::(\d+))?$/.exec(auth.slice(at + 1)) as RegExpExecArray;
  return patternOf(scheme, user, hostPort[1] as string, hostPort[2] ?? '', m[3] as string);
}

function patternOf(scheme: string, user: string, host: string, port: string, path: string): string {
  // As in the identity: an https user name names no repository.
  const who = scheme === 'ssh' ? user : '';
  const p = port.replace(/^0+(?=\d)/, '');
  const keep = p !== '' && p !== DEFAULT_PORTS[scheme] ? `:${p}` : '';
  const rest = path
    .replace(/\/{2,}/g, '/')
    .replace(/^\/+/, '')
    .replace(/\/+$/, '')
    .replace(/\.git$/, '');
  return `${scheme}://${who}${host.toLowerCase()}${keep}/${rest}`;
}

/**
 * An Argo CD cluster URL (`spec.destination.server`, an AppProject destination), canonical: https or
 * http, lower-case host, no default port, no trailing `/`, and no userinfo, query, fragment or dot
 * segment. Undefined for anything else, which names no cluster this service will act for.
 */
export function canonicalServerURL(raw: string): string | undefined {
  let s: string;
  try {
    s = checkCharacters(raw);
  } catch {
    return undefined;
  }
  const m = /^(https?):\/\/([^/]*)(.*)$/i.exec(s);
  if (!m) return undefined;
  const scheme = (m[1] as string).toLowerCase();
  try {
    const { user, host, port } = authority(m[2] as string, scheme);
    if (user !== '' || host === '') return undefined;
    const segments = pathSegments(m[3] as string);
    return `${scheme}://${host}${port ? `:${port}` : ''}${segments.map((seg) => `/${seg}`).join('')}`;
  } catch {
    return undefined;
  }
}

// --- parsing ----------------------------------------------------------------------------------------

function checkCharacters(raw: string): string {
  const s = raw.trim();
  if (s === '') throw new RepoURLError('it is empty');
  // Controls, spaces, DEL and anything outside ASCII: servers and git decode and fold these in ways
  // that differ (a full-width dot, a NUL), so none of them is read.
  if (/[^\x21-\x7e]/.test(s)) throw new RepoURLError('it holds a control, space or non-ASCII character');
  if (s.includes('\\')) throw new RepoURLError('it holds a backslash');
  if (/[?#]/.test(s)) throw new RepoURLError('it holds a query or fragment');
  return s;
}

function authority(auth: string, scheme: string): { user: string; host: string; port: string } {
  const parts = auth.split('@');
  if (parts.length > 2) throw new RepoURLError('its authority holds more than one @');
  const [userinfo, hostPort] = parts.length === 2 ? (parts as [string, string]) : ['', parts[0] as string];
  if (userinfo.includes(':')) throw new RepoURLError('it carries a password in its userinfo');
  const hp = /^(\[[^\]]*\]|[^:]*)(?::([0-9]*))?$/.exec(hostPort);
  if (!hp) throw new RepoURLError('its host and port cannot be read');
  const host = checkHost(hp[1] as string);
  let port = '';
  if (hp[2] !== undefined && hp[2] !== '') {
    const n = Number(hp[2]);
    if (!Number.isInteger(n) || n < 1 || n > 65535) throw new RepoURLError('its port is not 1 to 65535');
    port = String(n) === DEFAULT_PORTS[scheme] ? '' : String(n);
  }
  return { user: parts.length === 2 ? checkUser(userinfo) : '', host, port };
}

function checkUser(user: string): string {
  if (user !== '' && !USER.test(user))
    throw new RepoURLError('its user name holds characters other than A-Z a-z 0-9 . _ ~ -');
  return user;
}

function checkHost(raw: string): string {
  const host = raw.toLowerCase();
  if (host === '') return host;
  if (!HOST_NAME.test(host) && !IPV6.test(host))
    throw new RepoURLError('its host is not a host name or IP address');
  // A host whose last label is a number is an IPv4 address to WHATWG URL, curl and the resolver,
  // which read `0x7f.1`, `2130706433` and `127.000.0.1` as 127.0.0.1: only the dotted-decimal
  // spelling is read, so that one address has one identity (issue 35).
  const labels = host.split('.');
  if (/^(0x[0-9a-f]*|[0-9]+)$/.test(labels.at(-1) as string)) {
    const octet = /^(0|[1-9][0-9]{0,2})$/;
    if (labels.length !== 4 || !labels.every((l) => octet.test(l) && Number(l) <= 255))
      throw new RepoURLError('its host is a numeric address not written as four decimal octets');
  }
  return host;
}

/**
 * The path's segments. Percent-encoded unreserved characters are decoded (RFC 3986 §6.2.2.2) and the
 * others upper-cased; an encoded `.`, `/`, `\`, `%`, control or non-ASCII byte is refused, as is a
 * `.` or `..` segment. Empty segments (`//`, a trailing `/`) are dropped; `.git` ends the last one.
 */
function pathSegments(raw: string): string[] {
  const segments: string[] = [];
  for (const part of raw.split('/')) {
    if (part === '') continue;
    const seg = decodeSegment(part);
    // `..;x` too: servlet containers (Tomcat, Jetty: Bitbucket Server, Gerrit) drop a `;` path
    // parameter and then resolve the `..` it leaves.
    const name = seg.split(';')[0];
    if (name === '.' || name === '..') throw new RepoURLError('its path holds a . or .. segment');
    segments.push(seg);
  }
  return segments;
}

/** A repository's path: at least one segment, the last without its `.git` (remembered for git). */
function repoPath(raw: string): { segments: string[]; gitSuffix: boolean } {
  const segments = pathSegments(raw);
  const last = segments[segments.length - 1];
  if (last === undefined) throw new RepoURLError('it names no repository path');
  if (!last.endsWith('.git')) return { segments, gitSuffix: false };
  const name = last.slice(0, -4);
  if (name === '' || name === '.' || name === '..')
    throw new RepoURLError('its path holds a . or .. segment');
  segments[segments.length - 1] = name;
  return { segments, gitSuffix: true };
}

function decodeSegment(part: string): string {
  if (!SEGMENT_CHARS.test(part.replace(/%[0-9A-Fa-f]{2}/g, ''))) {
    throw new RepoURLError(
      /%/.test(part)
        ? 'its path holds a % that is not a percent-encoded byte'
        : 'its path holds a character git URLs do not allow unencoded',
    );
  }
  return part.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => {
    const byte = Number.parseInt(hex, 16);
    const c = String.fromCharCode(byte);
    if (c === '.' || c === '/' || c === '\\' || c === '%') {
      throw new RepoURLError('its path holds a percent-encoded . / \\ or %');
    }
    if (byte < 0x20 || byte > 0x7e)
      throw new RepoURLError('its path holds a percent-encoded control, space or non-ASCII byte');
    return UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
  });
}

// An http(s) user name says who authenticates, not which repository: it is not part of the identity
// (git is given the URL without it). An ssh user is: `git@host` and `admin@host` are other accounts.
function canonicalOf(scheme: string, user: string, host: string, port: string, segments: readonly string[]) {
  return `${scheme}://${user && scheme === 'ssh' ? `${user}@` : ''}${host}${port ? `:${port}` : ''}/${segments.join('/')}`;
}

function identity(
  scheme: RepoScheme,
  user: string,
  host: string,
  port: string,
  path: { segments: string[]; gitSuffix: boolean },
  scp: boolean,
): RepoIdentity {
  return {
    scheme,
    user,
    host,
    port,
    segments: path.segments,
    canonical: canonicalOf(scheme, user, host, port, path.segments),
    scp,
    gitSuffix: path.gitSuffix,
  };
}

/**
 * The URL of a request to the API server at `server` (a path prefix kept: API proxies such as
 * Rancher's serve under one), for the HTTP client. A server the canonical parser reads must come out
 * with the host it reads: one address, one identity (issue 35).
 */
export function apiRequestURL(server: string, pathAndQuery: string): URL {
  const url = new URL(server.replace(/\/+$/, '') + pathAndQuery);
  let host = canonicalHosts.get(server);
  if (host === undefined) {
    const canonical = canonicalServerURL(server);
    host = canonical === undefined ? '' : (/^https?:\/\/([^/]*)/.exec(canonical)?.[1] as string);
    // Servers are few (this process's own, and the clusters a hub serves): kept, not parsed per request.
    if (canonicalHosts.size < 10_000) canonicalHosts.set(server, host);
  }
  if (host !== '' && url.host !== host) {
    throw new RepoURLError(`the API server ${server} would be reached as ${url.host}, not ${host}`);
  }
  return url;
}

/** Server as given → the host the canonical parser reads ('' when it reads none). */
const canonicalHosts = new Map<string, string>();
