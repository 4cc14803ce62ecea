// Hub mode's one reading of an Argo CD cluster Secret (label argocd.argoproj.io/secret-type: cluster):
// the destination it names, the credentials to reach it, and the namespaces it is scoped to. Parsed
// once into a ServedCluster; every later check (is it opted in, which Application goes to it) and
// every request to it uses that form. The fields and their meaning follow Argo CD's own reading
// (util/db/cluster.go SecretToCluster, v3.6): `server` (here in the canonical form of
// core/repo-url.ts, which Argo CD's trailing-slash trim maps onto), `name`,
// `namespaces` a comma list, `config` the JSON of ClusterConfig whose byte fields are base64.
//
// Credentials served: a bearer token, a TLS client certificate, basic auth, CA data, serverName,
// insecure. An exec provider runs a program: accepted only in a credentials Secret of ours (in the
// release namespace, which tenants cannot write) and only for a command the platform team lists; in
// a cluster Secret, which an Argo CD project admin can write, it is refused and never run (ADR
// 0037-hub-credentials-only-from-our-own-secrets). awsAuthConfig is refused everywhere.
//
// A cluster Secret whose credentials are refused still names a served cluster: it is served only
// through a credentials Secret of ours, and held until one exists (hub.ts, credentials-choice.ts).

import { createHash } from 'node:crypto';
import { canonicalServerURL } from '../core/repo-url.ts';

export const CLUSTER_SECRET_TYPE_LABEL = 'argocd.argoproj.io/secret-type';
/** The opt-in: a cluster Secret with this label set to "true" is served; nothing is by default. */
export const HUB_SERVE_LABEL = 'gitops-reloader.io/serve';
/**
 * The label of a Secret of our own, in the hub's release namespace, that holds the credentials hub
 * mode uses for one server instead of Argo CD's (its `server` and `config`, as a cluster Secret has
 * them): the least-privilege alternative to Argo CD's usually cluster-admin credentials.
 */
export const CREDENTIALS_LABEL = 'gitops-reloader.io/cluster-credentials';

export interface ClusterCredentials {
  bearerToken?: string;
  username?: string;
  password?: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure: boolean;
  serverName?: string;
  /**
   * A client-go exec credential plugin: only ever read from a credentials Secret of ours, and run
   * only when its command is in --hub-exec-commands.
   */
  exec?: ExecPlugin;
}

export interface ExecPlugin {
  command: string;
  args: string[];
  env: Record<string, string>;
  apiVersion: string;
}

/** The exec credential API versions a plugin may speak (client.authentication.k8s.io). */
export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];

/** What the hub allows in its own credentials Secrets: the exec plugins (absolute paths) the platform team listed. */
export interface ReadOptions {
  execCommands?: readonly string[];
}

export interface ServedCluster {
  /** The Secret's namespace/name: where it was read from. */
  secret: string;
  /** Argo CD's key for the cluster: `server`, canonical (core/repo-url.ts canonicalServerURL). */
  server: string;
  /** Its `name` (an Application's destination.name resolves through it). */
  name: string;
  /** The namespaces it is scoped to; empty: every namespace. */
  namespaces: string[];
  /**
   * The cluster Secret's own credentials, or why they are not used (never their values): then the
   * cluster is served only through a credentials Secret of ours, and held until there is one.
   */
  credentials: UsableCredentials | { refused: string };
  /** A DNS label from the server alone (clusterId, 128 bits of digest): names its Lease, ledger and records in the hub. */
  id: string;
}

export interface UsableCredentials {
  credentials: ClusterCredentials;
  /** A digest of the credentials (never the credentials): a change means they were rotated. */
  credentialsDigest: string;
}

export type ClusterSecretReading =
  | { served: ServedCluster }
  | { notServed: string }
  | { refused: string; name?: string; server?: string };

interface RawSecret {
  metadata?: { namespace?: string; name?: string; labels?: Record<string, string> | null } | null;
  data?: Record<string, string> | null;
}

const decode = (b64: string | undefined): string | undefined =>
  b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');

const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * A DNS label (≤ 53 characters) from the cluster's canonical server, Argo CD's key for it: its host
 * and port, readable, and 128 bits of a digest of the whole server, so that no one can make two servers
 * share one (a crafted server that did would share the other cluster's Lease and ledger; issue 35,
 * finding 4). Not from the cluster's `name`: a rename would move the cluster's Lease and ledger, and a
 * replica started after it would lead the cluster next to one started before it.
 */
export function clusterId(server: string): string {
  // The slug is for people reading Lease names; the digest is what tells servers apart.
  const slug = server
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^https?-+/, '')
    .replace(/^-+|-+$/g, '')
    .slice(0, 20)
    .replace(/-+$/, '');
  const digest = createHash('sha256').update(server).digest('hex').slice(0, CLUSTER_ID_DIGEST_HEX);
  return slug ? `${slug}-${digest}` : `c-${digest}`;
}

/** Hex digits of SHA-256 in a cluster id: 128 bits. */
export const CLUSTER_ID_DIGEST_HEX = 32;

function bytes(v: unknown, field: string): Buffer | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new Error(`config.tlsClientConfig.${field} is not a base64 string`);
  return Buffer.from(v, 'base64');
}

/**
 * What any cluster Secret registers, served or not (an Application's destination.name resolves
 * through them all): its `name` as Argo CD reads it (untrimmed: destination.name must equal it), and
 * its server in canonical form (as destinations are read), or as written when the parser refuses it
 * (it then names no served cluster, and its name still counts).
 */
export function registration(raw: RawSecret): { name: string; server: string; rawServer: string } {
  const data = raw.data ?? {};
  const rawServer = decode(data.server) ?? '';
  return { name: decode(data.name) ?? '', server: canonicalServerURL(rawServer) ?? rawServer, rawServer };
}

/**
 * Reads one cluster Secret. Secret data never appears in what it returns as a reason. An exec plugin
 * is never taken from it: an Argo CD project admin can write one (a project-scoped cluster), and would
 * choose the program's arguments, its environment and the server its output is sent to.
 */
export function readClusterSecret(raw: RawSecret): ClusterSecretReading {
  const labels = raw.metadata?.labels ?? {};
  const secret = `${raw.metadata?.namespace ?? ''}/${raw.metadata?.name ?? ''}`;
  if (labels[CLUSTER_SECRET_TYPE_LABEL] !== 'cluster') return { notServed: 'not an Argo CD cluster Secret' };
  if (labels[HUB_SERVE_LABEL] !== 'true') return { notServed: `no ${HUB_SERVE_LABEL}=true label` };
  const data = raw.data ?? {};
  const { name, rawServer } = registration(raw);
  if (rawServer.trim() === '') return { refused: `cluster Secret ${secret} has no server`, name };
  // The one URL parser: a server with userinfo, a dot segment, a query or odd characters names no
  // cluster we act for.
  const server = canonicalServerURL(rawServer);
  if (server === undefined) {
    return { refused: `cluster Secret ${secret}: server is not an http(s) URL we accept`, name };
  }
  const namespaces = (decode(data.namespaces) ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  const badNs = namespaces.find((n) => !NAMESPACE.test(n));
  if (badNs !== undefined) {
    return {
      refused: `cluster Secret ${secret}: namespaces lists a name that is not a namespace`,
      name,
      server,
    };
  }
  const credentials = readConfig(decode(data.config), `cluster Secret ${secret}`, { exec: 'refused' });
  return { served: { secret, server, name, namespaces, credentials, id: clusterId(server) } };
}

/** The `config` JSON of a cluster Secret (Argo CD's ClusterConfig): the credentials it holds, or why not. */
function readConfig(
  text: string | undefined,
  what: string,
  o: { exec: 'refused' } | ReadOptions,
): UsableCredentials | { refused: string } {
  let config: Record<string, unknown>;
  try {
    config = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    if (typeof config !== 'object' || config === null || Array.isArray(config))
      throw new Error('not an object');
  } catch {
    return { refused: `${what}: config is not a JSON object` };
  }
  let exec: ExecPlugin | undefined;
  if (config.execProviderConfig !== undefined && config.execProviderConfig !== null) {
    if ('exec' in o) {
      return {
        refused: `${what}: execProviderConfig is accepted only in a credentials Secret of ours in the release namespace (label ${CREDENTIALS_LABEL}), never in a cluster Secret; its command is not run (docs/hub-mode.md)`,
      };
    }
    const read = readExec(config.execProviderConfig, o);
    if (typeof read === 'string') return { refused: `${what}: ${read}` };
    exec = read;
  }
  if (config.awsAuthConfig) {
    return {
      refused: `${what}: awsAuthConfig credentials are not supported yet (docs/hub-mode.md)`,
    };
  }
  const tls = (config.tlsClientConfig ?? {}) as Record<string, unknown>;
  let credentials: ClusterCredentials;
  try {
    const str = (v: unknown, field: string): string | undefined => {
      if (v === undefined || v === null || v === '') return undefined;
      if (typeof v !== 'string') throw new Error(`config.${field} is not a string`);
      return v;
    };
    credentials = {
      bearerToken: str(config.bearerToken, 'bearerToken'),
      username: str(config.username, 'username'),
      password: str(config.password, 'password'),
      ca: bytes(tls.caData, 'caData'),
      cert: bytes(tls.certData, 'certData'),
      key: bytes(tls.keyData, 'keyData'),
      insecure: tls.insecure === true,
      serverName: str(tls.serverName, 'tlsClientConfig.serverName'),
      exec,
    };
  } catch (err) {
    return { refused: `${what}: ${(err as Error).message}` };
  }
  for (const k of Object.keys(credentials) as (keyof ClusterCredentials)[])
    if (credentials[k] === undefined) delete credentials[k];
  if ((credentials.cert === undefined) !== (credentials.key === undefined)) {
    return { refused: `${what}: certData and keyData come together` };
  }
  if (!credentials.bearerToken && !credentials.cert && !credentials.username && !credentials.exec) {
    return {
      refused: `${what}: no bearerToken, client certificate, username or exec plugin`,
    };
  }
  const credentialsDigest = createHash('sha256')
    .update(
      JSON.stringify([
        credentials.bearerToken,
        credentials.username,
        credentials.password,
        credentials.ca?.toString('base64'),
        credentials.cert?.toString('base64'),
        credentials.key?.toString('base64'),
        credentials.insecure,
        credentials.serverName,
        credentials.exec,
      ]),
    )
    .digest('hex');
  return { credentials, credentialsDigest };
}

export type CredentialsReading =
  | ({ server: string; secret: string } & UsableCredentials)
  /** Refused: `server` when it could be read (the cluster it holds), never a credential value. */
  | { refused: string; secret: string; server?: string };

/** Reads one credentials Secret of ours (CREDENTIALS_LABEL=true). Secret data never appears in a reason. */
export function readCredentialsSecret(raw: RawSecret, o: ReadOptions = {}): CredentialsReading {
  const secret = `${raw.metadata?.namespace ?? ''}/${raw.metadata?.name ?? ''}`;
  const data = raw.data ?? {};
  const server = canonicalServerURL(decode(data.server) ?? '');
  if (server === undefined)
    return { refused: `credentials Secret ${secret}: server is not an http(s) URL we accept`, secret };
  const read = readConfig(decode(data.config), `credentials Secret ${secret}`, o);
  return 'refused' in read ? { refused: read.refused, secret, server } : { server, secret, ...read };
}

/** Argo CD's execProviderConfig, when its command is allowed; else why not (never its env values). */
function readExec(v: unknown, o: ReadOptions): ExecPlugin | string {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'execProviderConfig is not an object';
  const e = v as Record<string, unknown>;
  if (typeof e.command !== 'string' || e.command === '') return 'execProviderConfig has no command';
  if (!(o.execCommands ?? []).includes(e.command)) {
    return 'execProviderConfig runs a program that --hub-exec-commands does not list; hub mode runs only the plugins the platform team allows (docs/hub-mode.md)';
  }
  const args = e.args ?? [];
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string'))
    return 'execProviderConfig.args is not a list of strings';
  const env = e.env ?? {};
  if (
    typeof env !== 'object' ||
    env === null ||
    Array.isArray(env) ||
    Object.values(env).some((x) => typeof x !== 'string')
  ) {
    return 'execProviderConfig.env is not a map of strings';
  }
  const apiVersion =
    typeof e.apiVersion === 'string' && e.apiVersion !== '' ? e.apiVersion : EXEC_API_VERSIONS[0];
  if (!EXEC_API_VERSIONS.includes(apiVersion as string))
    return 'execProviderConfig.apiVersion is not client.authentication.k8s.io/v1 or v1beta1';
  return {
    command: e.command,
    args: args as string[],
    env: env as Record<string, string>,
    apiVersion: apiVersion as string,
  };
}
