// One served cluster in hub mode: its access (the credentials in use, rotated in place), its engine
// (serve() with a HubSeat, started when the hub wants it: the replica is to lead the cluster or keep a
// warm standby of it (ADR 0043); once the cluster answers, retried with back-off until it does or the
// engine is stopped), and what the hub keeps about it (its gate, its claim on a fair share).
import type { SyncGate } from '../argocd/gate.ts';
import type { Config } from '../config/config.ts';
import { getJson } from '../kube/watch-http.ts';
import type { Logger } from '../log.ts';
import type { RunningService } from '../serve.ts';
import { ClusterSecretAccess } from './cluster-access.ts';
import type { ServedCluster } from './cluster-secret.ts';
import type { CredentialsChoice, SeatUsing } from './credentials-choice.ts';

/** Between attempts to start a cluster's engine (unreachable, refused): doubling to this cap. */
const RETRY_MAX_MS = 60_000;

export interface Seat {
  cluster: ServedCluster;
  /** What its access uses now (credentials-choice.ts): credentials by digest, or nothing (held). */
  using: SeatUsing;
  /** When this replica last chose to compete for the cluster's Lease (it counts against its share until it leads). */
  claimedAt?: number;
  access: ClusterSecretAccess;
  abort: AbortController;
  /** While the hub wants an engine here (to lead the cluster, or as a warm standby): since when, and its stop. */
  engine?: { abort: AbortController; since: number };
  gate?: SyncGate;
  running?: RunningService;
  /** Takes the cluster's series out of /metrics. */
  dropMetrics?: () => void;
  /** Resolves once the engine runs, or gave up because the seat was closed. */
  started: Promise<void>;
}

/** The flags of one cluster's engine: its names in the hub, its scope, and nothing the hub does itself. */
export function clusterConfig(cfg: Config, cluster: ServedCluster, identity: string): Config {
  return {
    ...cfg,
    // Its ledger, Lease and records: <release>-<cluster id>-…, in the hub's release namespace.
    releaseName: `${cfg.releaseName}-${cluster.id}`,
    // Each seat elects as itself: two seats that ever shared one Lease would contend for it, not both
    // hold it (issue 35, finding 4). The replica part before the `/` says whose seat it is.
    leaderIdentity: seatIdentity(identity, cluster.id),
    namespaces: scopeOf(cfg.namespaces, cluster.namespaces) ?? [],
    // The hub receives notifications and watches Applications; Flux is not served in hub mode.
    webhookTokenFile: undefined,
    fluxNamespaces: [],
    fluxWebhookTokenFile: undefined,
  };
}

/**
 * Whether a cluster may get a seat next to the open ones: not when its server is served already (one
 * seat per server), nor when another server has its id (they would share a Lease and a ledger: that
 * one is closed too, so which came first decides nothing).
 */
export function admit(
  open: Iterable<Pick<ServedCluster, 'server' | 'id' | 'secret'>>,
  wanted: Pick<ServedCluster, 'server' | 'id'>,
): { admit: true } | { sameServer: string } | { sameId: string; server: string } {
  for (const c of open) {
    if (c.server === wanted.server) return { sameServer: c.secret };
    if (c.id === wanted.id) return { sameId: c.secret, server: c.server };
  }
  return { admit: true };
}

/**
 * The clusters to serve now that no seat serves their server: for each such server, the first cluster
 * Secret (by namespace/name) that wants it, unless another server wanting service has the same id. A
 * duplicate Secret (the new one created, then the old one deleted) is served once the old one goes.
 */
export function promotions(
  wanting: ReadonlyMap<string, Pick<ServedCluster, 'server' | 'id'>>,
  served: (server: string) => boolean,
): string[] {
  const bySecret = [...wanting].sort(([a], [b]) => a.localeCompare(b));
  const out: string[] = [];
  const taken = new Set<string>();
  for (const [secret, c] of bySecret) {
    if (served(c.server) || taken.has(c.server)) continue;
    if (bySecret.some(([, o]) => o.server !== c.server && o.id === c.id)) continue;
    taken.add(c.server);
    out.push(secret);
  }
  return out;
}

/** The identity one seat elects with: `<replica identity>/<cluster id>`. */
export const seatIdentity = (replica: string, clusterId: string) => `${replica}/${clusterId}`;

/** The replica a seat's Lease holder belongs to (what precedes its `/<cluster id>`). */
export const replicaOf = (holder: string) => holder.replace(/\/[^/]*$/, '');

/** The namespaces to watch in a cluster: the flags' and the cluster Secret's; undefined when they share none. */
export function scopeOf(flags: readonly string[], secret: readonly string[]): string[] | undefined {
  if (flags.length === 0) return [...secret];
  if (secret.length === 0) return [...flags];
  const both = flags.filter((n) => secret.includes(n));
  return both.length > 0 ? both : undefined;
}

export interface SeatDeps {
  cfg: Config;
  log: Logger;
  /** Where the credentials in use come from, for the log. */
  credentialsFrom(seat: Seat): string;
  /** Starts the cluster's engine (hub.ts: serve() with a HubSeat). */
  engine(seat: Seat, cfg: Config, log: Logger): Promise<RunningService>;
}

const delay = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });

/** Opens a seat: the cluster is known and its access made; no engine runs until startEngine(). */
export function openSeat(cluster: ServedCluster, using: CredentialsChoice): Seat {
  return {
    cluster,
    access: new ClusterSecretAccess(
      cluster.server,
      'use' in using ? using.use : { held: `${using.secret}: ${using.hold}` },
    ),
    using:
      'use' in using ? { digest: using.digest, from: using.from, ours: using.ours } : { held: using.hold },
    abort: new AbortController(),
    started: Promise.resolve(),
  };
}

/** Starts the seat's engine (if not started): once the cluster answers, retried with back-off until it does. */
export function startEngine(seat: Seat, d: SeatDeps): void {
  if (seat.engine || seat.abort.signal.aborted) return;
  const engine = { abort: new AbortController(), since: performance.now() };
  seat.engine = engine;
  const signal = AbortSignal.any([seat.abort.signal, engine.abort.signal]);
  const cluster = seat.cluster;
  seat.started = (async () => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        // Held (refused credentials): nothing is sent to the cluster until credentials are given.
        if (seat.access.held !== undefined) {
          await Promise.race([seat.access.usable(), delay(RETRY_MAX_MS, signal)]);
          attempt = -1;
          continue;
        }
        // Discovery in serve() needs an answer: do not start against a cluster that gives none.
        await getJson(seat.access, '/version', signal, 10_000);
        if (signal.aborted) return;
        const running = await d.engine(seat, d.cfg, d.log);
        if (signal.aborted) {
          await running.stop();
          return;
        }
        seat.running = running;
        d.log.info(
          { server: cluster.server, namespaces: cluster.namespaces, credentials: d.credentialsFrom(seat) },
          'serving cluster',
        );
        return;
      } catch (err) {
        const retryInMs = Math.min(1000 * 2 ** attempt, RETRY_MAX_MS);
        d.log.warn(
          { server: cluster.server, err: (err as Error).message, retryInMs },
          'cannot start serving the cluster; retrying',
        );
        await delay(retryInMs, signal);
      }
    }
  })();
}

/**
 * Stops the seat's engine, keeping the seat (the replica neither leads the cluster nor keeps it warm):
 * its watches and caches go, and its series leave /metrics.
 */
export async function stopEngine(seat: Seat, why: string, log: Logger): Promise<void> {
  const engine = seat.engine;
  if (!engine) return;
  engine.abort.abort(new Error(why));
  await seat.started;
  const running = seat.running;
  seat.running = undefined;
  await running?.stop();
  seat.dropMetrics?.();
  seat.dropMetrics = undefined;
  if (seat.engine === engine) seat.engine = undefined;
  if (running) log.info({ cluster: seat.cluster.name, server: seat.cluster.server, why }, 'engine stopped');
}

/** Stops the seat's engine (it writes nothing more in the cluster) and takes its series out of /metrics. */
export async function closeSeat(seat: Seat, why: string, log: Logger): Promise<void> {
  seat.abort.abort(new Error(why));
  await seat.started;
  const running = seat.running;
  seat.running = undefined;
  seat.engine = undefined;
  await running?.stop();
  seat.dropMetrics?.();
  log.info({ cluster: seat.cluster.name, server: seat.cluster.server, why }, 'stopped serving cluster');
}
