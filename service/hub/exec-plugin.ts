// A client-go exec credential plugin (the kubeconfig `exec` user, Argo CD's execProviderConfig), run
// only when the platform team lists its command in --hub-exec-commands: no shell, a bounded run, the
// ExecCredential it prints read for a token or a client certificate, kept until its expiry. What it
// prints is never logged; a failure names the command and its exit, not its output.
import { execFile } from 'node:child_process';
import type { ExecPlugin } from './cluster-secret.ts';

/** A plugin's run may take this long (cloud logins are slow); then it is killed. */
const RUN_TIMEOUT_MS = 30_000;
/** A credential is fetched again this long before it expires. */
const EXPIRY_MARGIN_MS = 10_000;

export interface ExecCredential {
  token?: string;
  cert?: string;
  key?: string;
  /** ms since the epoch; undefined: valid until the plugin is replaced. */
  expiresAt?: number;
}

export class ExecPluginError extends Error {
  override name = 'ExecPluginError';
}

/** Reads the ExecCredential a plugin printed. Pure. */
export function parseExecCredential(stdout: string, apiVersion: string, command: string): ExecCredential {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(stdout) as Record<string, unknown>;
  } catch {
    throw new ExecPluginError(`exec plugin ${command} did not print JSON`);
  }
  if (doc?.kind !== 'ExecCredential' || doc.apiVersion !== apiVersion) {
    throw new ExecPluginError(`exec plugin ${command} did not print an ExecCredential of ${apiVersion}`);
  }
  const status = (doc.status ?? {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const token = str(status.token);
  const cert = str(status.clientCertificateData);
  const key = str(status.clientKeyData);
  if (!token && !(cert && key)) {
    throw new ExecPluginError(
      `exec plugin ${command} printed neither a token nor a client certificate and key`,
    );
  }
  const exp = str(status.expirationTimestamp);
  const expiresAt = exp === undefined ? undefined : Date.parse(exp);
  if (expiresAt !== undefined && Number.isNaN(expiresAt)) {
    throw new ExecPluginError(`exec plugin ${command} printed an expirationTimestamp that is not a time`);
  }
  return {
    ...(token ? { token } : {}),
    ...(cert && key ? { cert, key } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
  };
}

/** One plugin's credential: run on first use and again when it is about to expire, one run at a time. */
export class ExecCredentialSource {
  readonly #plugin: ExecPlugin;
  readonly #now: () => number;
  #cached: ExecCredential | undefined;
  #running: Promise<ExecCredential> | undefined;

  constructor(plugin: ExecPlugin, now: () => number = Date.now) {
    this.#plugin = plugin;
    this.#now = now;
  }

  async get(): Promise<ExecCredential> {
    const c = this.#cached;
    if (c && (c.expiresAt === undefined || this.#now() < c.expiresAt - EXPIRY_MARGIN_MS)) return c;
    this.#running ??= this.#run().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #run(): Promise<ExecCredential> {
    const p = this.#plugin;
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        p.command,
        p.args,
        {
          timeout: RUN_TIMEOUT_MS,
          maxBuffer: 1 << 20,
          // What a plugin needs to find its tools and config, its own env, and what client-go passes.
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            HOME: process.env.HOME ?? '/',
            ...p.env,
            KUBERNETES_EXEC_INFO: JSON.stringify({
              apiVersion: p.apiVersion,
              kind: 'ExecCredential',
              spec: { interactive: false },
            }),
          },
        },
        (err, out) => {
          if (err) {
            const how = err.killed ? 'was killed (timeout)' : `exited with ${err.code ?? 'an error'}`;
            reject(new ExecPluginError(`exec plugin ${p.command} ${how}`));
          } else resolve(out);
        },
      );
    });
    const c = parseExecCredential(stdout, p.apiVersion, p.command);
    this.#cached = c;
    return c;
  }
}
