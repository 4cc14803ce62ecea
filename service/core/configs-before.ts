// The configs as a term's start first saw them. A start judges every workload once its caches are
// synced; a config written while it judges is replayed as a change once it is done (reconciler.ts).
// A workload seen for the first time is baselined: recorded at what its pods read. Recorded at the
// configs' current content, a write seen while the start ran would be taken for the baseline and its
// replay would find nothing to do, a change lost. So a baseline reads this view instead: the current
// configs, except those updated or deleted during the start, seen as they were before their first
// change then. A config created during the start is seen as it is now (a config and its workload in
// one apply are a baseline, not a change), and so are all configs for a workload created during the
// start (its pods come after the writes before it).
import type { ConfigLookup } from './plan.ts';
import type { ConfigRecord } from './records.ts';
import { type ConfigKind, configId } from './types.ts';

/** `before`: configId → the config as it was before its first change during the start. */
export function configsBefore(
  current: ConfigLookup,
  before: ReadonlyMap<string, ConfigRecord>,
): ConfigLookup {
  if (before.size === 0) return current;
  return {
    get: (ref) => before.get(configId(ref)) ?? current.get(ref),
    *inNamespace(namespace: string, kind: ConfigKind) {
      const seen = new Set<string>();
      for (const r of current.inNamespace(namespace, kind)) {
        const id = configId(r.ref);
        seen.add(id);
        yield before.get(id) ?? r;
      }
      // Deleted during the start: still there as the start first saw it.
      for (const [id, r] of before)
        if (!seen.has(id) && r.ref.namespace === namespace && r.ref.kind === kind) yield r;
    },
  };
}

/**
 * What a term's start saw written while it judged: each config updated or deleted, as it was before
 * its first change then, and the workloads created. A creation of a config notes nothing (it is seen
 * as it is), and a later write of it keeps the created one.
 */
export class SeenDuringStart {
  readonly #before = new Map<string, ConfigRecord>();
  readonly #born = new Set<string>();

  config(old: ConfigRecord | undefined): void {
    if (!old) return;
    const id = configId(old.ref);
    if (!this.#before.has(id)) this.#before.set(id, old);
  }

  workload(id: string, created: boolean): void {
    if (created) this.#born.add(id);
  }

  /**
   * The configs a baseline of workload `id` reads, or undefined when they are the current ones: nothing
   * was written during the start, or the workload was created during it (its pods come after the
   * writes before it).
   */
  lookup(id: string, current: ConfigLookup): ConfigLookup | undefined {
    if (this.#before.size === 0 || this.#born.has(id)) return undefined;
    return configsBefore(current, this.#before);
  }

  clear(): void {
    this.#before.clear();
    this.#born.clear();
  }
}
