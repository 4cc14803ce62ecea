// The in-memory picture of the cluster the service keeps: slim config records, slim workload
// records with their parsed policies, and the reverse index config → workloads that use it.
// Fed by the watches; read by the reconciler and the planner. No I/O.
import { KEYS, type ParsedWorkloadPolicy, parseWorkloadPolicy } from './core/annotations.ts';
import type { ConfigLookup } from './core/plan.ts';
import type { ConfigRecord, WorkloadRecord } from './core/records.ts';
import { type ConfigKind, type ConfigRef, configId, workloadId } from './core/types.ts';

export interface TrackedWorkload {
  id: string;
  rec: WorkloadRecord;
  parsed: ParsedWorkloadPolicy;
  /** resourceVersion at which we saw the pod template change ('0' if not since start-up). */
  templateRV: string;
}

export class ClusterState implements ConfigLookup {
  readonly configs = new Map<string, ConfigRecord>();
  readonly workloads = new Map<string, TrackedWorkload>();
  /** configId → ids of workloads whose pod template references it. */
  readonly #users = new Map<string, Set<string>>();
  /** namespace → ids of workloads with a named reload list (they may watch unreferenced configs). */
  readonly #named = new Map<string, Set<string>>();
  readonly #byNamespace = new Map<string, Map<string, ConfigRecord>>();
  readonly #defaultStrategy: ParsedWorkloadPolicy['policy']['strategy'];
  readonly #csi: boolean;

  /** `csi`: --enable-csi-integration, so SecretProviderClass annotations are acted on. */
  constructor(defaultStrategy: ParsedWorkloadPolicy['policy']['strategy'], csi = false) {
    this.#defaultStrategy = defaultStrategy;
    this.#csi = csi;
  }

  get(ref: ConfigRef): ConfigRecord | undefined {
    return this.configs.get(configId(ref));
  }

  *inNamespace(namespace: string, kind: ConfigKind): Iterable<ConfigRecord> {
    for (const r of this.#byNamespace.get(namespace)?.values() ?? []) if (r.ref.kind === kind) yield r;
  }

  putConfig(rec: ConfigRecord): ConfigRecord | undefined {
    const id = configId(rec.ref);
    const old = this.configs.get(id);
    this.configs.set(id, rec);
    let ns = this.#byNamespace.get(rec.ref.namespace);
    if (!ns) {
      ns = new Map();
      this.#byNamespace.set(rec.ref.namespace, ns);
    }
    ns.set(id, rec);
    return old;
  }

  deleteConfig(ref: ConfigRef): ConfigRecord | undefined {
    const id = configId(ref);
    const old = this.configs.get(id);
    this.configs.delete(id);
    this.#byNamespace.get(ref.namespace)?.delete(id);
    return old;
  }

  /** Stores a workload and re-indexes it; returns the previous version. */
  putWorkload(rec: WorkloadRecord): { now: TrackedWorkload; old: TrackedWorkload | undefined } {
    const id = workloadId(rec.ref);
    const old = this.workloads.get(id);
    if (old) this.#unindex(old);
    const parsed = parseWorkloadPolicy(rec.annotations, rec.templateAnnotations, {
      kind: rec.ref.kind,
      defaultStrategy: this.#defaultStrategy,
      csi: this.#csi,
    });
    const templateRV =
      old && old.rec.templateHash !== rec.templateHash ? rec.resourceVersion : (old?.templateRV ?? '0');
    const now = { id, rec, parsed, templateRV };
    this.workloads.set(id, now);
    this.#index(now);
    return { now, old };
  }

  deleteWorkload(id: string): TrackedWorkload | undefined {
    const old = this.workloads.get(id);
    if (old) this.#unindex(old);
    this.workloads.delete(id);
    return old;
  }

  /** Workloads a change to this config may concern. */
  affectedBy(ref: ConfigRef): string[] {
    const out = new Set(this.#users.get(configId(ref)) ?? []);
    for (const w of this.#named.get(ref.namespace) ?? []) out.add(w);
    return [...out];
  }

  #hasNamed(t: TrackedWorkload): boolean {
    const p = t.parsed.policy;
    return [...p.configMaps.named, ...p.secrets.named, ...p.providerClasses.named].some(
      (n) => n.list.entries.length > 0,
    );
  }

  #index(t: TrackedWorkload) {
    for (const u of t.rec.uses) {
      const id = configId(u.config);
      let set = this.#users.get(id);
      if (!set) {
        set = new Set();
        this.#users.set(id, set);
      }
      set.add(t.id);
    }
    if (this.#hasNamed(t)) {
      let set = this.#named.get(t.rec.ref.namespace);
      if (!set) {
        set = new Set();
        this.#named.set(t.rec.ref.namespace, set);
      }
      set.add(t.id);
    }
  }

  #unindex(t: TrackedWorkload) {
    for (const u of t.rec.uses) {
      const id = configId(u.config);
      const set = this.#users.get(id);
      set?.delete(t.id);
      if (set?.size === 0) this.#users.delete(id);
    }
    this.#named.get(t.rec.ref.namespace)?.delete(t.id);
  }
}

export const reloadRequestOf = (t: TrackedWorkload | undefined): string | undefined =>
  t?.rec.annotations[KEYS.reloadRequestedAt];
