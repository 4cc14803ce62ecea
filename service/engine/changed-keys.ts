// Which keys of a config a reload's change touched, for the status's "done" list (engine/status.ts):
// key names only, never values or digests. A reload knows, per config, what the workload's pods ran
// (the ledger's record) and what it brings (its target); both are usage digests (core/config-hash.ts):
// for a use of named keys, a list of [key, digest] pairs, which tells the keys itself; for a use of the
// whole config, its `all` digest, whose per-key digests only the config's records had. KeyMemory keeps
// those of the contents the watch showed recently, so that a change seen live can be told; one found at
// start (its old content never seen) cannot, and its keys are left unknown.

import type { ConfigDigest } from '../core/config-hash.ts';
import { MISSING, namedKeyDigests } from '../core/config-hash.ts';

/** Contents remembered at most (their per-key digest maps are the records' own, not copies). */
export const KEY_MEMORY_LIMIT = 512;

/** The per-key digests of the configs' recent contents, by config and `all` digest. */
export class KeyMemory {
  readonly #byContent = new Map<string, Readonly<Record<string, string>>>();
  readonly #limit: number;

  constructor(limit = KEY_MEMORY_LIMIT) {
    this.#limit = limit;
  }

  /** A content of `config` seen (the old and the new one of each change the watch shows). */
  saw(config: string, digest: ConfigDigest | undefined): void {
    if (!digest) return;
    const id = `${config} ${digest.all}`;
    this.#byContent.delete(id);
    this.#byContent.set(id, digest.keys);
    if (this.#byContent.size > this.#limit) {
      const oldest = this.#byContent.keys().next().value;
      if (oldest !== undefined) this.#byContent.delete(oldest);
    }
  }

  keysOf(config: string, all: string): Readonly<Record<string, string>> | undefined {
    return this.#byContent.get(`${config} ${all}`);
  }
}

/**
 * The key names whose digest differs between what a workload saw of a config (`before`) and what it
 * sees now (`after`), sorted; undefined when that cannot be told. `keysOf` gives the per-key digests of
 * a whole-config digest when known.
 */
export function changedKeys(
  before: string | undefined,
  after: string | undefined,
  keysOf: (all: string) => Readonly<Record<string, string>> | undefined,
): string[] | undefined {
  const from = perKey(before, keysOf);
  const to = perKey(after, keysOf);
  if (!from || !to) return undefined;
  const names = new Set([...Object.keys(from), ...Object.keys(to)]);
  return [...names].filter((k) => from[k] !== to[k]).sort();
}

/** A usage digest as per-key digests, when it can be read so. */
function perKey(
  usage: string | undefined,
  keysOf: (all: string) => Readonly<Record<string, string>> | undefined,
): Readonly<Record<string, string>> | undefined {
  if (usage === MISSING) return {};
  if (usage === undefined) return undefined;
  return namedKeyDigests(usage) ?? keysOf(usage);
}
