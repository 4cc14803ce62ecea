// How hub mode reaches a served cluster: its server and the credentials its cluster Secret holds,
// swapped in place when the Secret changes, so rotated credentials are used from the next request on,
// without restarting the cluster's engine.
import type https from 'node:https';
import type { ClusterAccess } from '../kube/access.ts';
import type { ClusterCredentials } from './cluster-secret.ts';
import { ExecCredentialSource } from './exec-plugin.ts';

export class ClusterSecretAccess implements ClusterAccess {
  readonly #server: string;
  #credentials: ClusterCredentials;
  #exec: ExecCredentialSource | undefined;

  constructor(server: string, credentials: ClusterCredentials) {
    this.#server = server;
    this.#credentials = credentials;
    this.#exec = credentials.exec ? new ExecCredentialSource(credentials.exec) : undefined;
  }

  /** Rotated credentials: every request from now on uses them (open watches reconnect with them). */
  rotate(credentials: ClusterCredentials): void {
    this.#credentials = credentials;
    this.#exec = credentials.exec ? new ExecCredentialSource(credentials.exec) : undefined;
  }

  getCurrentCluster() {
    return { server: this.#server };
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    const c = this.#credentials;
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
