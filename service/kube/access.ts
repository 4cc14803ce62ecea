// How the service reaches the API server: the server URL and the TLS and credential options for each
// request, read from the in-cluster service account or a kubeconfig file, without the client library.
// Importing @kubernetes/client-node costs ~85 MiB of resident memory (its ~1,000 generated model
// classes), more than the service's whole cache at 20,000 configs, so the common credentials are
// handled here: service-account tokens, bearer tokens and token files, client certificates, CA
// bundles. A kubeconfig whose user runs an exec plugin or an auth-provider (cloud logins) is handed to
// the client library, loaded on demand for that case only.
import { readFileSync, statSync } from 'node:fs';
import type https from 'node:https';
import os from 'node:os';
import path from 'node:path';

/** The part of a client-node KubeConfig the service uses; a KubeConfig satisfies it too (tests pass one). */
export interface ClusterAccess {
  getCurrentCluster(): { server: string } | null;
  /** Adds TLS options and the Authorization header for one request. Re-reads rotating token files. */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
  /**
   * Told of every request's answer (its status, or "<error>" when none came) and latency to the
   * response headers, for rest_client_* metrics.
   */
  observeRequest?(method: string, host: string, code: string, seconds: number): void;
  /**
   * Awaited before every write (any method but GET) is sent: the service's write rate limit. Rejects
   * (with the signal's reason) when `signal` aborts first; the write is then not sent.
   */
  beforeWrite?(signal: AbortSignal): Promise<void>;
  /**
   * Called for every write synchronously, immediately before its bytes go out (after beforeWrite and
   * the connection): throws to refuse the write, which is then not sent. The leader's write fence.
   */
  beforeSend?(): void;
  /**
   * An API server in this process (a simulation's model of one, test/sim/exec-model.ts): requests and
   * watches go to it instead of over HTTP, with everything else about them (the write gate, the fence,
   * the timeout, the error for a non-2xx answer) as for HTTP. Never set in the service.
   */
  inProcess?: InProcessServer;
}

/** What watch-http.ts asks of an API server in this process instead of sending HTTP (ClusterAccess.inProcess). */
export interface InProcessServer {
  /** One request: the answer's status and body. Rejects with the signal's reason when it aborts first. */
  request(
    method: string,
    pathAndQuery: string,
    payload: string | undefined,
    signal: AbortSignal,
  ): Promise<{ status: number; text: string }>;
  /**
   * A watch: calls onLine for every line, resolves with nothing when the server ends the stream, or with
   * the status and body of a refusal. Rejects with the signal's reason when it aborts, or with what
   * onLine threw.
   */
  watch(
    pathAndQuery: string,
    signal: AbortSignal,
    onLine: (line: string) => void,
  ): Promise<{ status: number; text: string } | undefined>;
}

/**
 * The same access, with every write first awaiting `gate` (e.g. a RateGate's turn) and, when given,
 * checked by `fence` immediately before it is sent. The fence of a leader's writes checks the Lease
 * against the clock (kube/leader.ts, leaderWriteFence; docs/adr/0027): a write that waited for its
 * turn, or sat in a process that was stopped, past the end of the term is refused there, whether or
 * not any timer has noticed the term ended.
 */
export function writeGatedAccess(
  kc: ClusterAccess,
  gate: (signal: AbortSignal) => Promise<void>,
  fence?: () => void,
): ClusterAccess {
  return {
    getCurrentCluster: () => kc.getCurrentCluster(),
    applyToHTTPSOptions: (opts) => kc.applyToHTTPSOptions(opts),
    ...(kc.observeRequest ? { observeRequest: kc.observeRequest.bind(kc) } : {}),
    beforeWrite: gate,
    ...(fence ? { beforeSend: fence } : {}),
    ...(kc.inProcess ? { inProcess: kc.inProcess } : {}),
  };
}

/** The same access, with every request reported to `observe`. */
export function observedAccess(
  kc: ClusterAccess,
  observe: NonNullable<ClusterAccess['observeRequest']>,
): ClusterAccess {
  return {
    getCurrentCluster: () => kc.getCurrentCluster(),
    applyToHTTPSOptions: (opts) => kc.applyToHTTPSOptions(opts),
    observeRequest: observe,
    ...(kc.beforeWrite ? { beforeWrite: kc.beforeWrite.bind(kc) } : {}),
    ...(kc.beforeSend ? { beforeSend: kc.beforeSend.bind(kc) } : {}),
    ...(kc.inProcess ? { inProcess: kc.inProcess } : {}),
  };
}

export const IN_CLUSTER_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads a token file at most once a minute; bound service-account tokens rotate hourly. */
const TOKEN_REREAD_MS = 60_000;

interface Tls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecure?: boolean;
  serverName?: string;
}

/** A token read from a file, re-read when a minute has passed and the file changed. */
class TokenFile {
  readonly #file: string;
  #token = '';
  #readAt = 0;
  #mtimeMs = -1;
  constructor(file: string) {
    this.#file = file;
    this.#read();
  }
  #read() {
    const mtimeMs = statSync(this.#file).mtimeMs;
    if (mtimeMs !== this.#mtimeMs) {
      this.#token = readFileSync(this.#file, 'utf8').trim();
      this.#mtimeMs = mtimeMs;
    }
    this.#readAt = Date.now();
  }
  get value(): string {
    if (Date.now() - this.#readAt >= TOKEN_REREAD_MS) {
      try {
        this.#read();
      } catch {
        // Keep the last token: a file mid-rotation must not break every request.
      }
    }
    return this.#token;
  }
}

class LeanAccess implements ClusterAccess {
  readonly #server: string;
  readonly #tls: Tls;
  readonly #auth: () => string | undefined;
  constructor(server: string, tls: Tls, auth: () => string | undefined) {
    this.#server = server;
    this.#tls = tls;
    this.#auth = auth;
  }
  getCurrentCluster() {
    return { server: this.#server };
  }
  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const t = this.#tls;
    if (t.ca) opts.ca = t.ca;
    if (t.cert) opts.cert = t.cert;
    if (t.key) opts.key = t.key;
    if (t.insecure) opts.rejectUnauthorized = false;
    if (t.serverName) opts.servername = t.serverName;
    const auth = this.#auth();
    if (auth) opts.headers = { ...(opts.headers as Record<string, string> | undefined), Authorization: auth };
  }
}

/** The service account's access from inside a pod, or undefined when not running in one. */
export function inClusterAccess(
  env: NodeJS.ProcessEnv = process.env,
  dir: string = IN_CLUSTER_DIR,
): ClusterAccess | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  const tokenPath = path.join(dir, 'token');
  let exists = false;
  try {
    exists = statSync(tokenPath).isFile();
  } catch {
    exists = false;
  }
  if (!host || !port || !exists) return undefined;
  const token = new TokenFile(tokenPath);
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return new LeanAccess(`https://${hostPart}:${port}`, { ca: readFileSync(path.join(dir, 'ca.crt')) }, () => {
    const v = token.value;
    return v ? `Bearer ${v}` : undefined;
  });
}

type Named<T> = { name?: string } & T;
interface KubeconfigFile {
  clusters?: Named<{ cluster?: Record<string, unknown> }>[];
  users?: Named<{ user?: Record<string, unknown> }>[];
  contexts?: Named<{ context?: { cluster?: string; user?: string } }>[];
  'current-context'?: string;
}

/** Thrown for a kubeconfig that cannot be used; the message names the file and what is wrong. */
export class KubeconfigError extends Error {
  override name = 'KubeconfigError';
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * Access from a kubeconfig file (its current context). Credentials the lean loader does not handle
 * (exec plugins, auth-providers) are delegated to @kubernetes/client-node, imported for that case only.
 */
export async function kubeconfigAccess(file: string): Promise<ClusterAccess> {
  let doc: KubeconfigFile;
  try {
    // Imported here: in a pod the service account is used and the YAML parser is never loaded.
    const { parse } = await import('yaml');
    doc = (parse(readFileSync(file, 'utf8')) ?? {}) as KubeconfigFile;
  } catch (err) {
    throw new KubeconfigError(`kubeconfig ${file}: ${(err as Error).message}`);
  }
  const fail = (why: string): never => {
    throw new KubeconfigError(`kubeconfig ${file}: ${why}`);
  };
  const contextName = str(doc['current-context']) ?? fail('no current-context');
  const context =
    doc.contexts?.find((c) => c.name === contextName)?.context ?? fail(`no context "${contextName}"`);
  const cluster =
    doc.clusters?.find((c) => c.name === context.cluster)?.cluster ?? fail(`no cluster "${context.cluster}"`);
  const user = (context.user ? doc.users?.find((u) => u.name === context.user)?.user : undefined) ?? {};
  if (user.exec !== undefined || user['auth-provider'] !== undefined) {
    const { KubeConfig } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    kc.loadFromFile(file);
    return kc;
  }
  const server = str(cluster.server) ?? fail(`cluster "${context.cluster}" has no server`);
  const base = path.dirname(path.resolve(file));
  const bytes = (src: Record<string, unknown>, dataKey: string, fileKey: string): Buffer | undefined => {
    const data = str(src[dataKey]);
    if (data) return Buffer.from(data, 'base64');
    const f = str(src[fileKey]);
    return f ? readFileSync(path.resolve(base, f)) : undefined;
  };
  const tls: Tls = {
    ca: bytes(cluster, 'certificate-authority-data', 'certificate-authority'),
    cert: bytes(user, 'client-certificate-data', 'client-certificate'),
    key: bytes(user, 'client-key-data', 'client-key'),
    insecure: cluster['insecure-skip-tls-verify'] === true,
    serverName: str(cluster['tls-server-name']),
  };
  const token = str(user.token);
  const tokenFile = str(user.tokenFile)
    ? new TokenFile(path.resolve(base, user.tokenFile as string))
    : undefined;
  const username = str(user.username);
  const basic = username
    ? `Basic ${Buffer.from(`${username}:${str(user.password) ?? ''}`).toString('base64')}`
    : undefined;
  return new LeanAccess(server, tls, () => {
    if (token) return `Bearer ${token}`;
    if (tokenFile) return `Bearer ${tokenFile.value}`;
    return basic;
  });
}

/** An explicit kubeconfig path; else in-cluster; else the first file in $KUBECONFIG; else ~/.kube/config. */
export async function loadClusterAccess(
  file?: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ClusterAccess> {
  if (file) return kubeconfigAccess(file);
  const inCluster = inClusterAccess(env);
  if (inCluster) return inCluster;
  const candidates = [
    ...(env.KUBECONFIG ?? '').split(path.delimiter),
    path.join(env.HOME ?? os.homedir(), '.kube', 'config'),
  ];
  for (const c of candidates) {
    if (!c) continue;
    try {
      if (statSync(c).isFile()) return kubeconfigAccess(c);
    } catch {
      // not there: try the next one
    }
  }
  throw new KubeconfigError(
    'no cluster access: not running in a pod, no --kubeconfig, and neither $KUBECONFIG nor ~/.kube/config exists',
  );
}
