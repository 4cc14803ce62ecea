// Which served cluster's gate is told of each Argo CD Application: the one its `spec.destination`
// resolves to (ClusterDirectory), re-resolved when an Application changes, when it is deleted, and
// when the cluster Secrets change (a name now naming another server). An Application that moves
// between clusters is deleted from the old cluster's gate. Pure: hub.ts feeds it the Application watch.
import type { AppSync } from '../argocd/sync-tracker.ts';
import { type AppKey, appKeyString } from '../argocd/tracking.ts';
import type { ClusterDirectory } from './directory.ts';

/** What a served cluster's gate is told (SyncGate satisfies it). */
export interface AppGate {
  observe(app: AppSync): void;
  appDeleted(app: AppKey): void;
}

export class AppRouter {
  readonly #directory: ClusterDirectory;
  readonly #gateOf: (server: string) => AppGate | undefined;
  /** Applications by key, with the server their destination resolves to now. */
  readonly #apps = new Map<string, { app: AppSync; server: string | undefined }>();

  constructor(directory: ClusterDirectory, gateOf: (server: string) => AppGate | undefined) {
    this.#directory = directory;
    this.#gateOf = gateOf;
  }

  /** An Application added or changed. */
  route(app: AppSync): void {
    const k = appKeyString(app.app);
    const was = this.#apps.get(k)?.server;
    const server = this.#directory.serverOf(app.destination);
    this.#apps.set(k, { app, server });
    if (was !== undefined && was !== server) this.#gateOf(was)?.appDeleted(app.app);
    if (server !== undefined) this.#gateOf(server)?.observe(app);
  }

  deleted(app: AppKey): void {
    const k = appKeyString(app);
    const server = this.#apps.get(k)?.server;
    this.#apps.delete(k);
    if (server !== undefined) this.#gateOf(server)?.appDeleted(app);
  }

  /** The cluster Secrets changed: every Application is resolved again. */
  reroute(): void {
    for (const { app } of [...this.#apps.values()]) this.route(app);
  }

  /** The server an Application deploys to now, as last resolved. */
  serverOf(app: AppKey): string | undefined {
    return this.#apps.get(appKeyString(app))?.server;
  }

  /** The Applications deploying to a server: what a new gate of that cluster starts from. */
  appsOf(server: string): AppSync[] {
    return [...this.#apps.values()].filter((a) => a.server === server).map((a) => a.app);
  }
}
