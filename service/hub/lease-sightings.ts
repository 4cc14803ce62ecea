// What this replica has seen of the served clusters' Leases (hub mode, ADR 0043), from one watch of the
// Leases in the release namespace, on this process's own clock: who leads each cluster, and since when
// each record stands unchanged. A replica decides from it which clusters to start an engine for (those
// nobody leads), and hands the sighting to the engine's election, so a Lease already seen unrenewed
// for a lease duration is taken at once (leader.ts `seen`). As in leader election
// (core/lease-logic.ts), a Lease is expired a lease duration after this process saw it change, never
// by the renewTime another wrote with its own clock.
import { isExpired, type LeaseRecord, type Observed, observe } from '../core/lease-logic.ts';
import { replicaOf } from './seat.ts';

export class LeaseSightings {
  readonly #seen = new Map<string, Observed>();
  readonly #fallbackMs: number;
  readonly #clock: () => number;
  /** The watch has listed once: a Lease not seen does not exist. */
  synced = false;

  constructor(leaseDurationMs: number, clock: () => number = () => performance.now()) {
    this.#fallbackMs = leaseDurationMs;
    this.#clock = clock;
  }

  saw(name: string, record: LeaseRecord): void {
    this.#seen.set(name, observe(this.#seen.get(name), record, this.#clock()));
  }

  gone(name: string): void {
    this.#seen.delete(name);
  }

  /** The Lease as last seen, with when it was first seen so. */
  seen(name: string): Observed | undefined {
    return this.#seen.get(name);
  }

  /** The replica leading the Lease now, or undefined when none does (absent, released, or expired). */
  leader(name: string, now = this.#clock()): string | undefined {
    const o = this.#seen.get(name);
    if (!o || o.record.holderIdentity === '' || isExpired(o, now, this.#fallbackMs)) return undefined;
    return replicaOf(o.record.holderIdentity);
  }
}
