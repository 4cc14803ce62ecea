// Hub mode's sharding (docs/hub-mode.md, "Sharding"): replicas share the served clusters through one
// Lease per cluster, and each takes at most its fair share, ⌈clusters ÷ live replicas⌉. A replica is
// live while its own roster Lease (`<release>-replica-<digest of identity>`, label
// app.kubernetes.io/component=hub-replica) is renewed. As in leader election (core/lease-logic.ts),
// another replica's Lease is judged expired from when *this* process last saw it change, never from
// the renewTime the other wrote with its own clock. The number of replicas is whatever runs: nothing
// needs to be told it.

import { createHash } from 'node:crypto';
import type { V1Lease } from '@kubernetes/client-node';
import { microTime } from '../core/lease-logic.ts';
import type { LeaseRosterApi } from '../kube/api.ts';
import type { Logger } from '../log.ts';

/** The most clusters one replica leads: ⌈clusters ÷ live replicas⌉ (at least one replica: this one). */
export function fairShare(clusters: number, replicas: number): number {
  return Math.ceil(clusters / Math.max(1, replicas));
}

/** A cluster's rank for a replica (rendezvous hashing): higher comes first. Pure. */
export function rank(clusterId: string, replica: string): bigint {
  return BigInt(`0x${createHash('sha256').update(`${clusterId}\0${replica}`).digest('hex').slice(0, 13)}`);
}

/**
 * The clusters whose warm standby this replica keeps (ADR 0043): of those another replica leads (or
 * nobody), the ones this replica ranks first for among the other live replicas (rendezvous hashing),
 * so that if their leader died, each has one warm standby somewhere; at most `limit`, best ranked
 * first. `leader` is the leading replica's identity, undefined when none leads. Pure.
 */
export function standbyPicks(o: {
  clusters: ReadonlyArray<{ id: string; leader: string | undefined }>;
  live: readonly string[];
  self: string;
  limit: number;
}): string[] {
  if (o.limit <= 0) return [];
  const mine: Array<{ id: string; r: bigint }> = [];
  for (const c of o.clusters) {
    if (c.leader === o.self) continue;
    let best: string | undefined;
    let bestRank = -1n;
    for (const replica of o.live) {
      if (replica === c.leader) continue;
      const r = rank(c.id, replica);
      if (r > bestRank || (r === bestRank && replica < (best ?? ''))) {
        best = replica;
        bestRank = r;
      }
    }
    if (best === o.self) mine.push({ id: c.id, r: bestRank });
  }
  return mine
    .sort((a, b) => (a.r === b.r ? a.id.localeCompare(b.id) : a.r > b.r ? -1 : 1))
    .slice(0, o.limit)
    .map((c) => c.id);
}

/** Which other replicas are live, from when their roster Leases were last seen to change. Pure. */
export class Liveness {
  readonly #seen = new Map<string, { version: string; changedAt: number; holder: string }>();

  /** A Lease as listed now: its renewal marker (renewTime, or resourceVersion) and this process's clock. */
  see(name: string, version: string, now: number, holder = ''): void {
    const was = this.#seen.get(name);
    if (!was || was.version !== version) this.#seen.set(name, { version, changedAt: now, holder });
  }

  /** The identities (holders) of the other replicas whose Lease changed within `durationMs`. */
  liveHolders(self: string, now: number, durationMs: number): string[] {
    const out: string[] = [];
    for (const [name, s] of this.#seen)
      if (name !== self && now - s.changedAt < durationMs && s.holder !== '') out.push(s.holder);
    return out;
  }

  /** Forgets Leases not in the latest list (deleted: their replica stopped). */
  keepOnly(names: ReadonlySet<string>): void {
    for (const n of [...this.#seen.keys()]) if (!names.has(n)) this.#seen.delete(n);
  }

  /** Replicas whose Lease changed within `durationMs`, counting `self` always. */
  live(self: string, now: number, durationMs: number): number {
    let n = 1;
    for (const [name, s] of this.#seen) if (name !== self && now - s.changedAt < durationMs) n++;
    return n;
  }
}

export const ROSTER_COMPONENT = 'hub-replica';
/** On a roster Lease: the weights of the clusters its replica leads, as JSON {cluster id: weight}. */
export const WEIGHTS_ANNOTATION = 'gitops-reloader.io/cluster-weights';

/** A roster Lease's weights annotation, read once: positive integers by cluster id; anything else dropped. */
export function readWeights(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  if (text === undefined) return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return out;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return out;
  for (const [id, w] of Object.entries(parsed)) {
    if (typeof w === 'number' && Number.isSafeInteger(w) && w > 0) out.set(id, w);
  }
  return out;
}

export interface RosterOptions {
  api: LeaseRosterApi;
  namespace: string;
  releaseName: string;
  identity: string;
  leaseDurationMs: number;
  retryPeriodMs: number;
  log: Logger;
  /** Called after every successful round, with the live replicas now. */
  onRound(liveReplicas: number): void;
  /** The weights of the clusters this replica leads, published on its roster Lease (by cluster id). */
  weights?(): Record<string, number>;
  clock?: () => number;
}

const clockNow = () => performance.now();

/** This replica's roster Lease, renewed every retry period, and the count of live replicas. */
export class ReplicaRoster {
  readonly #o: RosterOptions;
  readonly #name: string;
  readonly #liveness = new Liveness();
  readonly #stop = new AbortController();
  #live = 1;
  #liveIdentities: string[];
  #rounds = 0;
  #weights = new Map<string, number>();
  /** The roster Lease as the last write returned it. */
  #current: V1Lease | undefined;
  #loop: Promise<void> | undefined;

  constructor(o: RosterOptions) {
    this.#o = o;
    const digest = createHash('sha256').update(o.identity).digest('hex').slice(0, 12);
    this.#name = `${o.releaseName}-replica-${digest}`;
    this.#liveIdentities = [o.identity];
  }

  /** The cluster weights the live replicas published (by cluster id), as last listed. */
  get weights(): ReadonlyMap<string, number> {
    return this.#weights;
  }

  /**
   * True once the live replicas were counted twice (two rounds, a retry period apart): replicas started
   * within a retry period of this one have their roster Leases by then, so a replica started with
   * others does not plan as if it were alone.
   */
  get counted(): boolean {
    return this.#rounds >= 2;
  }

  /** The live replicas' identities (this one's included) as last counted. */
  get liveIdentities(): readonly string[] {
    return this.#liveIdentities;
  }

  /** Live replicas (this one included) as last counted. */
  get live(): number {
    return this.#live;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#loop;
    // Gone at once, so the others take over its share without waiting for it to expire.
    await this.#o.api
      .deleteNamespacedLease({ namespace: this.#o.namespace, name: this.#name })
      .catch(() => undefined);
  }

  async #run(): Promise<void> {
    const clock = this.#o.clock ?? clockNow;
    while (!this.#stop.signal.aborted) {
      try {
        await this.#renew();
        const { items } = await this.#o.api.listNamespacedLease({
          namespace: this.#o.namespace,
          labelSelector: `app.kubernetes.io/component=${ROSTER_COMPONENT},app.kubernetes.io/instance=${this.#o.releaseName}`,
        });
        const now = clock();
        const names = new Set<string>();
        const weights = new Map<string, number>();
        for (const l of items) {
          for (const [id, w] of readWeights(l.metadata?.annotations?.[WEIGHTS_ANNOTATION]))
            weights.set(id, w);
          const name = l.metadata?.name ?? '';
          names.add(name);
          this.#liveness.see(
            name,
            String(l.spec?.renewTime ?? l.metadata?.resourceVersion ?? ''),
            now,
            l.spec?.holderIdentity ?? '',
          );
        }
        this.#liveness.keepOnly(names);
        this.#live = this.#liveness.live(this.#name, now, this.#o.leaseDurationMs);
        this.#liveIdentities = [
          this.#o.identity,
          ...this.#liveness.liveHolders(this.#name, now, this.#o.leaseDurationMs),
        ];
        this.#rounds++;
        this.#weights = weights;
        this.#o.onRound(this.#live);
      } catch (err) {
        this.#o.log.warn(
          { err: (err as Error).message, lease: this.#name },
          'could not renew or list the replica roster',
        );
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, this.#o.retryPeriodMs);
        this.#stop.signal.addEventListener('abort', () => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** Renews this replica's roster Lease: one write a round, from the copy the last write returned. */
  async #renew(): Promise<void> {
    const { api, namespace } = this.#o;
    const weights = this.#o.weights?.();
    const annotations = weights ? { [WEIGHTS_ANNOTATION]: JSON.stringify(weights) } : undefined;
    const withWeights = (l: V1Lease): V1Lease =>
      annotations
        ? { ...l, metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, ...annotations } } }
        : l;
    const spec = {
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: Math.round(this.#o.leaseDurationMs / 1000),
      renewTime: microTime(Date.now()) as unknown as Date,
    };
    const status = (err: unknown) => (err as { code?: number }).code ?? (err as { status?: number }).status;
    if (this.#current) {
      try {
        this.#current = await api.replaceNamespacedLease({
          namespace,
          name: this.#name,
          body: withWeights({ ...this.#current, spec }),
        });
        return;
      } catch (err) {
        // Changed or deleted behind our back: read it again below.
        if (status(err) !== 409 && status(err) !== 404) throw err;
        this.#current = undefined;
      }
    }
    let current: V1Lease | undefined;
    try {
      current = await api.readNamespacedLease({ namespace, name: this.#name });
    } catch (err) {
      if (status(err) !== 404) throw err;
    }
    this.#current = current
      ? await api.replaceNamespacedLease({
          namespace,
          name: this.#name,
          body: withWeights({ ...current, spec }),
        })
      : await api.createNamespacedLease({
          namespace,
          body: {
            metadata: {
              name: this.#name,
              ...(annotations ? { annotations } : {}),
              labels: {
                'app.kubernetes.io/name': 'gitops-reloader',
                'app.kubernetes.io/component': ROSTER_COMPONENT,
                'app.kubernetes.io/instance': this.#o.releaseName,
              },
            },
            spec,
          },
        });
  }
}
