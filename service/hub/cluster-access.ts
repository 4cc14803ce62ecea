// How hub mode reaches a served cluster: its server and the credentials its cluster Secret holds,
// swapped in place when the Secret changes, so rotated credentials are used from the next request on,
// without restarting the cluster's engine. Held (credentials-choice.ts): no credentials at all, every
// request fails before it is sent, until credentials are given again.
import type https from 'node:https';
import type { ClusterAccess } from '../kube/access.ts';
import type { ClusterCredentials } from './cluster-secret.ts';
import { ExecCredentialSource } from './exec-plugin.ts';

export class ClusterHeldError extends Error {
  override name = 'ClusterHeldError';
}

export class ClusterSecretAccess implements ClusterAccess {
  readonly #server: string;
  #credentials: ClusterCredentials | { held: string };
  #exec: ExecCredentialSource | undefined;
  #usable: { promise: Promise<void>; resolve: () => void } | undefined;

  /** `held`: why no credentials are given (a refused Secret), never a credential value. */
  constructor(server: string, credentials: ClusterCredentials | { held: string }) {
    this.#server = server;
    this.#credentials = { held: '' };
    if ('held' in credentials) this.hold(credentials.held);
    else this.rotate(credentials);
  }

  /** Rotated credentials: every request from now on uses them (open watches reconnect with them). */
  rotate(credentials: ClusterCredentials): void {
    this.#credentials = credentials;
    this.#exec = credentials.exec ? new ExecCredentialSource(credentials.exec) : undefined;
    this.#usable?.resolve();
    this.#usable = undefined;
  }

  /** No credentials from now on: every request fails with `reason` before anything is sent. */
  hold(reason: string): void {
    this.#credentials = { held: reason };
    this.#exec = undefined;
    if (!this.#usable) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#usable = { promise, resolve };
    }
  }

  /** Why it is held, or undefined when it has credentials. */
  get held(): string | undefined {
    return 'held' in this.#credentials ? this.#credentials.held : undefined;
  }

  /** Resolves once it has credentials (at once when it has). */
  async usable(): Promise<void> {
    await this.#usable?.promise;
  }

  getCurrentCluster() {
    return { server: this.#server };
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const c = this.#credentials;
    if ('held' in c) throw new ClusterHeldError(`cluster held, no credentials are used: ${c.held}`);
    if (c.ca) opts.ca = c.ca;
    if (c.cert) opts.cert = c.cert;
    if (c.key) opts.key = c.key;
    if (c.insecure) opts.rejectUnauthorized = false;
    if (c.serverName) opts.servername = c.serverName;
    // An exec plugin's credential (fetched, or cached until it is about to expire).
    const x = this.#exec ? await this.#exec.get() : undefined;
    if (x?.cert && x.key) {
      opts.cert = x.cert;
      opts.key = x.key;
    }
    const auth = x?.token
      ? `Bearer ${x.token}`
      : c.bearerToken
        ? `Bearer ${c.bearerToken}`
        : c.username
          ? `Basic ${Buffer.from(`${c.username}:${c.password ?? ''}`).toString('base64')}`
          : undefined;
    if (auth) opts.headers = { ...(opts.headers as Record<string, string> | undefined), Authorization: auth };
  }
}
