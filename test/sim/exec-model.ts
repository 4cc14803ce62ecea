// A model of the Kubernetes API server and of the controllers a restart depends on, for the
// execution-level simulation (exec-sim.ts), in three layers: the cluster's state and pods (here), the
// controllers (exec-controllers.ts), the API in front (exec-api.ts). The service reaches it through its own adapters
// (service/kube/api.ts, live-view.ts, watch-http.ts) over ClusterAccess.inProcess: every request
// the real strategies send arrives here as method + path + JSON, exactly as it would go over HTTP,
// and every answer goes back as status + JSON (a Status object for a refusal).
//
// What it models, as the real kube-apiserver and kube-controller-manager behave:
//  - one global resourceVersion (etcd's revision), bumped by every write;
//  - pods with creationTimestamp in whole seconds (as the API server serializes it), a Ready
//    condition that turns True some time after creation (never, for a pod the environment broke),
//    and graceful deletion: deletionTimestamp at once, gone after the pod's shutdown time;
//  - the Eviction API (policy/v1, as pkg/registry/core/pod/storage/eviction.go has it): the uid and
//    resourceVersion preconditions (409 on a mismatch, 404 when gone), dry runs, no PDB check for a
//    Pending or terminating pod, and a PodDisruptionBudget check that refuses with 429 and a
//    DisruptionBudget cause (a pod that is not Ready: IfHealthyBudget);
//  - merge patches of a pod's metadata with a uid in the body: 409 when it differs (the store's
//    "Precondition failed: UID in precondition" conflict); null deletes a key;
//  - POST of a pod with generateName;
//  - LIST with label and field selectors, and an Exact read at a past resourceVersion (the
//    Deployment's history is kept; older than the compaction horizon: 410);
//  - WATCH: WatchList (sendInitialEvents, then the initial-events-end bookmark), resume from a
//    resourceVersion (410 Expired as an ERROR event when it was compacted), label-selector
//    transitions as ADDED/DELETED (as the watch cache sends them), timeoutSeconds, and drops;
//  - a ReplicaSet controller: keeps replicas, adopts orphans its selector matches, deletes the excess
//    ranked as getPodsToDelete ranks them (not Ready first, then pod-deletion-cost, then the shortest
//    Ready, then the newest);
//  - a Deployment controller: a template change makes a new ReplicaSet (revision + 1) and rolls it
//    out within maxSurge/maxUnavailable; status replicas/updatedReplicas/availableReplicas;
//  - a StatefulSet controller: OrderedReady pods <name>-<i>, recreated under the same name once the
//    old one is gone; RollingUpdate replaces the highest outdated ordinal once the others are Ready.
//
// Simplified, on purpose (none of it is what the restart strategy relies on):
//  - one namespace of Deployments and StatefulSets; no nodes, scheduling, containers, probes or restarts;
//  - the disruption controller's status is computed at the eviction, never stale (the real one lags,
//    which only makes the real API refuse more);
//  - a terminating pod counts as not Ready at once (the kubelet marks it so shortly after);
//  - minReadySeconds is 0, so Ready is Available;
//  - the Deployment controller scales in one step per pass (the real one in the same bounds);
//  - watch events are delivered in order after a seeded lag, not over a socket.

export type Json = Record<string, unknown>;
export type Obj = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid: string;
    resourceVersion: string;
    generation?: number;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{
      apiVersion: string;
      kind: string;
      name: string;
      uid: string;
      controller?: boolean;
    }>;
    generateName?: string;
    managedFields?: Array<{ manager: string; operation: string; time: string }>;
  };
  spec?: Json;
  status?: Json;
  data?: Record<string, string>;
};

export type Resource = 'pods' | 'deployments' | 'replicasets' | 'statefulsets' | 'configmaps';

export interface Change {
  rv: number;
  resource: Resource;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
  old: Obj | undefined;
}

/** Who sent a request: a replica of the service, identified for the Lease check. */
export interface Sender {
  identity: string;
}

/** A seeded fault the driver decides for each request of the service. */
export type Fault =
  | { kind: 'none' }
  /** Answer with this status (500 InternalError, 429 throttled, 409 Conflict, 403 quota) and change nothing. */
  | { kind: 'status'; status: number }
  /** Never answer (the client's own timeout ends it); `applied`: the write happened first. */
  | { kind: 'hang'; applied: boolean };

export interface ModelHooks {
  /** The fault for this request of the service (`body`: the write's payload, as sent). */
  fault(method: string, path: string, body?: string): Fault;
  /** Watch delivery lag, ms. */
  lag(): number;
  /** The longest lag() gives, ms. */
  readonly maxLagMs: number;
  /** ms from creation to Ready for a new pod; undefined: the environment broke it, never Ready. */
  startMs(pod: Obj): number | undefined;
  /** Whether the environment's heal makes this pod Ready (not one that reads a bad config). Default yes. */
  healable?(pod: Obj): boolean;
  /** Called for every write of the service that the model accepted, before it acts on it. */
  onWrite(sender: Sender, method: string, path: string, body: string | undefined): void;
  /** A violation the model itself saw (the floor, a template write, a pod replaced twice). */
  violation(msg: string): void;
  /** Whether evicting (or deleting by handover) this pod now replaces it a second time for one change. */
  replacedTwice(deployment: string, createdMs: number): string | undefined;
  /** What the model's controllers and kubelet did, for the trace. */
  note?(msg: string): void;
}

export interface WorkloadSpec {
  /** Default Deployment. A StatefulSet has no surge: maxSurge is ignored, maxUnavailable is 1. */
  kind?: 'Deployment' | 'StatefulSet';
  name: string;
  replicas: number;
  maxSurge: number | string;
  maxUnavailable: number | string;
  /** PodDisruptionBudget minAvailable, if any. */
  pdbMinAvailable?: number;
  /** Pod shutdown time, ms. */
  graceMs: number;
  /** The configs the pods read. */
  uses: string[];
}

export const NS = 'sim';
export const SECOND = 1000;

export const clone = <T>(x: T): T => structuredClone(x);

/** RFC 3339 in whole seconds, as the API server writes metav1.Time. */
export const stamp = (ms: number) =>
  new Date(Math.floor(ms / SECOND) * SECOND).toISOString().replace('.000Z', 'Z');

/** An int-or-percent against a total, as the Deployment controller resolves it. */
export function resolve(v: number | string, total: number, roundUp: boolean): number {
  if (typeof v === 'number') return v;
  const pct = Number(v.replace('%', ''));
  const x = (pct * total) / 100;
  return roundUp ? Math.ceil(x) : Math.floor(x);
}

/** maxSurge and maxUnavailable resolved; both 0 would make no progress, so unavailable becomes 1. */
export function bounds(d: WorkloadSpec): { surge: number; unavailable: number } {
  // A StatefulSet's rolling update (and the restart's default) takes one pod at a time.
  if (d.kind === 'StatefulSet') return { surge: 0, unavailable: 1 };
  const surge = resolve(d.maxSurge, d.replicas, true);
  let unavailable = resolve(d.maxUnavailable, d.replicas, false);
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { surge, unavailable };
}

export function parseSelector(s: string | null): Array<(l: Record<string, string>) => boolean> {
  if (!s) return [];
  return s.split(',').map((part) => {
    const neq = part.split('!=');
    if (neq.length === 2) return (l) => l[neq[0] as string] !== neq[1];
    const eq = part.split('=');
    if (eq.length === 2) return (l) => l[eq[0] as string] === eq[1];
    if (part.startsWith('!')) return (l) => l[part.slice(1)] === undefined;
    return (l) => l[part] !== undefined;
  });
}

export function status(
  code: number,
  reason: string,
  message: string,
  details?: Json,
): { status: number; text: string } {
  return {
    status: code,
    text: JSON.stringify({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      code,
      reason,
      message,
      details,
    }),
  };
}

export const ok = (o: unknown, code = 200) => ({ status: code, text: JSON.stringify(o) });

/** A template's hash, as the Deployment controller names ReplicaSets by it (any stable digest will do). */
export function templateHash(t: unknown): string {
  let h = 2166136261;
  for (const c of JSON.stringify(t)) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h.toString(36).slice(0, 8);
}

/**
 * The cluster's state: the store with its change log, and the pods' lifecycle. The controllers
 * (exec-controllers.ts) and the API in front (exec-api.ts) build on it; ApiModel is the whole.
 */
export class ClusterModel {
  rv = 100;
  readonly objs: Record<Resource, Map<string, Obj>> = {
    pods: new Map(),
    deployments: new Map(),
    replicasets: new Map(),
    statefulsets: new Map(),
    configmaps: new Map(),
  };
  /** The change log watches resume from; entries at or below `compacted` are gone (410). */
  readonly log: Change[] = [];
  compacted = 0;
  /** Exact creation ms of each pod uid (the API shows whole seconds). */
  readonly createdMs = new Map<string, number>();
  readonly specs = new Map<string, WorkloadSpec>();
  /** Pods the service created (surge pods), by uid: their adoption is a handover. */
  readonly ours = new Set<string>();
  /** Pods the service evicted or had the ReplicaSet delete, by uid. */
  readonly replacedByUs = new Set<string>();
  /** Every write of a Deployment's pod template by the service. */
  readonly templateWrites: string[] = [];
  /** Requests the model does not serve (a gap in the model, reported as a violation). */
  readonly unserved: string[] = [];
  /** Ready pods a scale-down of the Deployment controller deleted, and when. */
  protected readonly lostByOthers: Array<{ app: string; at: number }> = [];
  protected readonly watchers = new Set<(c: Change) => void>();
  protected readonly enders = new Set<() => void>();
  #uid = 0;
  protected nameSeq = 0;
  readonly hooks: ModelHooks;

  constructor(hooks: ModelHooks) {
    this.hooks = hooks;
  }

  now(): number {
    return Date.now();
  }

  /** Called after every write but a ConfigMap's: the controllers run (exec-controllers.ts). */
  protected sync(): void {}

  // ---- the store -------------------------------------------------------------------------------

  #write(resource: Resource, type: Change['type'], o: Obj, old: Obj | undefined): Obj {
    this.rv++;
    o.metadata.resourceVersion = String(this.rv);
    // The time of the last write, as the API server keeps it in managedFields (catch-up reads it).
    if (resource === 'configmaps' && type !== 'DELETED')
      o.metadata.managedFields = [{ manager: 'user', operation: 'Update', time: stamp(this.now()) }];
    if (type === 'DELETED') this.objs[resource].delete(o.metadata.name);
    else this.objs[resource].set(o.metadata.name, o);
    const c: Change = { rv: this.rv, resource, type, object: clone(o), old: old && clone(old) };
    this.log.push(c);
    for (const w of [...this.watchers]) w(c);
    if (resource !== 'configmaps') this.sync();
    return o;
  }

  create(resource: Resource, o: Obj): Obj {
    o.metadata.uid ||= `uid-${++this.#uid}`;
    o.metadata.namespace ??= NS;
    o.metadata.creationTimestamp = stamp(this.now());
    if (resource === 'pods') {
      this.createdMs.set(o.metadata.uid, this.now());
      this.#startPod(o);
    }
    return this.#write(resource, 'ADDED', o, undefined);
  }

  update(resource: Resource, o: Obj, old: Obj): Obj {
    return this.#write(resource, 'MODIFIED', o, old);
  }

  /** Calls `fn` with every change, as it is written (the service's informers, in the driver). */
  subscribe(fn: (c: Change) => void): void {
    this.watchers.add(fn);
  }

  /** Drops every open watch (a network blip, an API server restart); `compact` also expires their rv. */
  dropWatches(compact: boolean): void {
    if (compact) this.compacted = this.rv;
    for (const end of [...this.enders]) end();
  }

  // ---- pods ------------------------------------------------------------------------------------

  #startPod(p: Obj): void {
    p.status = { phase: 'Pending', conditions: [{ type: 'Ready', status: 'False' }] };
    const ms = this.hooks.startMs(p);
    // Broken by the environment: it runs, and never becomes Ready (until healed).
    if (ms === undefined) p.status.phase = 'Running';
    else setTimeout(() => this.#markReady(p.metadata.name, p.metadata.uid), ms);
  }

  #markReady(name: string, uid: string): void {
    const cur = this.objs.pods.get(name);
    if (!cur || cur.metadata.uid !== uid || cur.metadata.deletionTimestamp) return;
    const old = clone(cur);
    this.hooks.note?.(`${name} Ready`);
    cur.status = {
      phase: 'Running',
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: stamp(this.now()) }],
    };
    this.update('pods', cur, old);
  }

  /** The environment heals every pod it broke (or those `only` names): they become Ready now. */
  heal(only?: (p: Obj) => boolean): void {
    for (const p of [...this.objs.pods.values()])
      if (!ready(p) && !p.metadata.deletionTimestamp && (only ?? this.hooks.healable ?? (() => true))(p))
        this.#markReady(p.metadata.name, p.metadata.uid);
  }

  /** Graceful deletion: terminating now, gone after the owner's shutdown time. */
  deletePod(p: Obj): void {
    if (p.metadata.deletionTimestamp) return;
    const old = clone(p);
    p.metadata.deletionTimestamp = stamp(this.now());
    p.status = { ...p.status, conditions: [{ type: 'Ready', status: 'False' }] };
    this.update('pods', p, old);
    const grace = this.specs.get(this.deploymentOf(p) ?? '')?.graceMs ?? 1000;
    setTimeout(() => {
      const cur = this.objs.pods.get(p.metadata.name);
      if (cur && cur.metadata.uid === p.metadata.uid) this.#write('pods', 'DELETED', cur, cur);
    }, grace);
  }

  /** The Deployment whose selector (app=NAME) the pod carries. */
  deploymentOf(p: Obj): string | undefined {
    const app = p.metadata.labels?.app;
    return app && this.specs.has(app) ? app : undefined;
  }

  /** Ready, not terminating pods a Deployment's selector matches (its surge pods included). */
  readyOf(name: string): Obj[] {
    return [...this.objs.pods.values()].filter(
      (p) => p.metadata.labels?.app === name && !p.metadata.deletionTimestamp && ready(p),
    );
  }

  /** The floor check of a pod the service takes away (evicts, or has the ReplicaSet delete). */
  protected checkTaking(p: Obj, how: string): void {
    const name = this.deploymentOf(p);
    if (!name) return;
    const spec = this.specs.get(name) as WorkloadSpec;
    const twice = this.hooks.replacedTwice(name, this.createdMs.get(p.metadata.uid) ?? 0);
    if (twice) this.hooks.violation(`${how} of ${p.metadata.name}: ${twice}`);
    this.replacedByUs.add(p.metadata.uid);
    if (!ready(p)) return;
    const floor = spec.replicas - bounds(spec).unavailable;
    // Ready pods another controller took away so recently that no watch could have shown it yet
    // count as still there: the service cannot see them go, and no API arbitrates between two
    // controllers spending one budget (a PodDisruptionBudget would; a known limit, see README).
    const unseen = this.lostByOthers.filter(
      (l) => l.app === name && this.now() - l.at <= this.hooks.maxLagMs + 200,
    ).length;
    const left = this.readyOf(name).filter((x) => x !== p).length + unseen;
    if (left < floor)
      this.hooks.violation(
        `floor: ${how} of Ready pod ${p.metadata.name} left ${left} Ready pods of ${name}, under the floor ${floor}`,
      );
  }
}

export function readyCondition(p: Obj): { status?: string; lastTransitionTime?: string } | undefined {
  return (
    p.status?.conditions as Array<{ type: string; status: string; lastTransitionTime?: string }> | undefined
  )?.find((c) => c.type === 'Ready');
}

export function ready(p: Obj): boolean {
  return readyCondition(p)?.status === 'True';
}

/** RFC 7386 JSON merge patch, in place. */
export function mergePatch(target: Json, patch: Json): void {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (typeof v === 'object' && !Array.isArray(v)) {
      const t = target[k];
      if (typeof t !== 'object' || t === null || Array.isArray(t)) target[k] = {};
      mergePatch(target[k] as Json, v as Json);
    } else target[k] = clone(v);
  }
}
