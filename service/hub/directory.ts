// Which cluster an Application deploys to, resolved as Argo CD resolves `spec.destination`
// (util/argo GetDestinationServer, v3.6): `server` (canonical, as cluster Secrets' are read); or `name`, looked up
// among every cluster Secret, served or not, and only when exactly one has that name; both set, or
// neither, resolves to nothing. Pure.

import { canonicalServerURL } from '../core/repo-url.ts';

export interface Destination {
  server?: string;
  name?: string;
}

export class ClusterDirectory {
  /** Cluster Secret (namespace/name) → the name and server it registers. */
  readonly #secrets = new Map<string, { name: string; server: string }>();

  /** Records what a cluster Secret registers; true when that changed anything. */
  put(secret: string, entry: { name: string; server: string }): boolean {
    const old = this.#secrets.get(secret);
    this.#secrets.set(secret, entry);
    return old?.name !== entry.name || old?.server !== entry.server;
  }

  delete(secret: string): boolean {
    return this.#secrets.delete(secret);
  }

  /** The server an Application with this destination deploys to, or undefined when Argo CD would not resolve it. */
  serverOf(d: Destination): string | undefined {
    const server = d.server ?? '';
    const name = d.name ?? '';
    if (server !== '' && name !== '') return undefined;
    if (server !== '') return canonicalServerURL(server);
    if (name === '') return undefined;
    // Argo CD counts the Secrets with the name: two with one name are ambiguous to it.
    const named = [...this.#secrets.values()].filter((e) => e.name === name);
    return named.length === 1 ? named[0]?.server : undefined;
  }
}
