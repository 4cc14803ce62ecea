// A model of the Kubernetes API server and of the controllers a Deployment restart depends on, for
// the execution-level simulation (exec-sim.ts). The service reaches it through its own adapters
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
//    out within maxSurge/maxUnavailable; status replicas/updatedReplicas/availableReplicas.
//
// Simplified, on purpose (none of it is what the restart strategy relies on):
//  - one namespace of Deployments; no nodes, scheduling, containers, probes or restarts;
//  - the disruption controller's status is computed at the eviction, never stale (the real one lags,
//    which only makes the real API refuse more);
//  - a terminating pod counts as not Ready at once (the kubelet marks it so shortly after);
//  - minReadySeconds is 0, so Ready is Available;
//  - the Deployment controller scales in one step per pass (the real one in the same bounds);
//  - watch events are delivered in order after a seeded lag, not over a socket.
import type { InProcessServer } from '../../service/kube/access.ts';

export type Json = Record<string, unknown>;
type Obj = {
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

type Resource = 'pods' | 'deployments' | 'replicasets' | 'statefulsets' | 'configmaps';

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
  /** Answer with this status (500 InternalError, 429 throttled, 409 Conflict) and change nothing. */
  | { kind: 'status'; status: number }
  /** Never answer (the client's own timeout ends it); `applied`: the write happened first. */
  | { kind: 'hang'; applied: boolean };

export interface ModelHooks {
  /** The fault for this request of the service. */
  fault(method: string, path: string): Fault;
  /** Watch delivery lag, ms. */
  lag(): number;
  /** The longest lag() gives, ms. */
  readonly maxLagMs: number;
  /** ms from creation to Ready for a new pod; undefined: the environment broke it, never Ready. */
  startMs(): number | undefined;
  /** Called for every write of the service that the model accepted, before it acts on it. */
  onWrite(sender: Sender, method: string, path: string, body: string | undefined): void;
  /** A violation the model itself saw (the floor, a template write, a pod replaced twice). */
  violation(msg: string): void;
  /** Whether evicting (or deleting by handover) this pod now replaces it a second time for one change. */
  replacedTwice(deployment: string, createdMs: number): string | undefined;
  /** What the model's controllers and kubelet did, for the trace. */
  note?(msg: string): void;
}

export interface DeploymentSpec {
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
const SECOND = 1000;

const clone = <T>(x: T): T => structuredClone(x);

/** RFC 3339 in whole seconds, as the API server writes metav1.Time. */
const stamp = (ms: number) => new Date(Math.floor(ms / SECOND) * SECOND).toISOString().replace('.000Z', 'Z');

/** An int-or-percent against a total, as the Deployment controller resolves it. */
export function resolve(v: number | string, total: number, roundUp: boolean): number {
  if (typeof v === 'number') return v;
  const pct = Number(v.replace('%', ''));
  const x = (pct * total) / 100;
  return roundUp ? Math.ceil(x) : Math.floor(x);
}

/** maxSurge and maxUnavailable resolved; both 0 would make no progress, so unavailable becomes 1. */
export function bounds(d: DeploymentSpec): { surge: number; unavailable: number } {
  // A StatefulSet's rolling update (and the restart's default) takes one pod at a time.
  if (d.kind === 'StatefulSet') return { surge: 0, unavailable: 1 };
  const surge = resolve(d.maxSurge, d.replicas, true);
  let unavailable = resolve(d.maxUnavailable, d.replicas, false);
  if (surge === 0 && unavailable === 0) unavailable = 1;
  return { surge, unavailable };
}

function parseSelector(s: string | null): Array<(l: Record<string, string>) => boolean> {
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

function status(
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

const ok = (o: unknown, code = 200) => ({ status: code, text: JSON.stringify(o) });

/** A template's hash, as the Deployment controller names ReplicaSets by it (any stable digest will do). */
function templateHash(t: unknown): string {
  let h = 2166136261;
  for (const c of JSON.stringify(t)) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return h.toString(36).slice(0, 8);
}

export class ApiModel {
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
  readonly specs = new Map<string, DeploymentSpec>();
  /** Pods the service created (surge pods), by uid: their adoption is a handover. */
  readonly ours = new Set<string>();
  /** Pods the service evicted or had the ReplicaSet delete, by uid. */
  readonly replacedByUs = new Set<string>();
  /** Every write of a Deployment's pod template by the service. */
  readonly templateWrites: string[] = [];
  /** Requests the model does not serve (a gap in the model, reported as a violation). */
  readonly unserved: string[] = [];
  /** Ready pods a scale-down of the Deployment controller deleted, and when. */
  readonly #lostByOthers: Array<{ app: string; at: number }> = [];
  readonly #watchers = new Set<(c: Change) => void>();
  readonly #enders = new Set<() => void>();
  #uid = 0;
  #name = 0;
  #syncAt: ReturnType<typeof setTimeout> | undefined;
  readonly hooks: ModelHooks;

  constructor(hooks: ModelHooks) {
    this.hooks = hooks;
  }

  now(): number {
    return Date.now();
  }

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
    for (const w of [...this.#watchers]) w(c);
    if (resource !== 'configmaps') this.#scheduleSync();
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
    this.#watchers.add(fn);
  }

  /** Drops every open watch (a network blip, an API server restart); `compact` also expires their rv. */
  dropWatches(compact: boolean): void {
    if (compact) this.compacted = this.rv;
    for (const end of [...this.#enders]) end();
  }

  // ---- pods ------------------------------------------------------------------------------------

  #startPod(p: Obj): void {
    p.status = { phase: 'Pending', conditions: [{ type: 'Ready', status: 'False' }] };
    const ms = this.hooks.startMs();
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

  /** The environment heals every pod it broke: they become Ready now. */
  heal(): void {
    for (const p of [...this.objs.pods.values()])
      if (!ready(p) && !p.metadata.deletionTimestamp) this.#markReady(p.metadata.name, p.metadata.uid);
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
  #checkTaking(p: Obj, how: string): void {
    const name = this.deploymentOf(p);
    if (!name) return;
    const spec = this.specs.get(name) as DeploymentSpec;
    const twice = this.hooks.replacedTwice(name, this.createdMs.get(p.metadata.uid) ?? 0);
    if (twice) this.hooks.violation(`${how} of ${p.metadata.name}: ${twice}`);
    this.replacedByUs.add(p.metadata.uid);
    if (!ready(p)) return;
    const floor = spec.replicas - bounds(spec).unavailable;
    // Ready pods another controller took away so recently that no watch could have shown it yet
    // count as still there: the service cannot see them go, and no API arbitrates between two
    // controllers spending one budget (a PodDisruptionBudget would; a known limit, see README).
    const unseen = this.#lostByOthers.filter(
      (l) => l.app === name && this.now() - l.at <= this.hooks.maxLagMs + 200,
    ).length;
    const left = this.readyOf(name).filter((x) => x !== p).length + unseen;
    if (left < floor)
      this.hooks.violation(
        `floor: ${how} of Ready pod ${p.metadata.name} left ${left} Ready pods of ${name}, under the floor ${floor}`,
      );
  }

  // ---- the controllers -------------------------------------------------------------------------

  #scheduleSync(): void {
    if (this.#syncAt) return;
    this.#syncAt = setTimeout(() => {
      this.#syncAt = undefined;
      for (const d of [...this.objs.deployments.values()]) this.#syncDeployment(d);
      for (const set of [...this.objs.statefulsets.values()]) this.#syncStatefulSet(set);
      for (const rs of [...this.objs.replicasets.values()]) this.#syncReplicaSet(rs);
      for (const d of [...this.objs.deployments.values()]) this.#deploymentStatus(d);
    }, 100 + this.hooks.lag());
  }

  addDeployment(spec: DeploymentSpec): void {
    this.specs.set(spec.name, spec);
    if (spec.kind === 'StatefulSet') {
      this.create('statefulsets', {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: {
          name: spec.name,
          uid: '',
          resourceVersion: '',
          generation: 1,
          annotations: { 'reloader.stakater.com/auto': 'true' },
        },
        spec: {
          replicas: spec.replicas,
          serviceName: spec.name,
          podManagementPolicy: 'OrderedReady',
          selector: { matchLabels: { app: spec.name } },
          updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
          template: podTemplate(spec),
        },
        status: {},
      });
      return;
    }
    this.create('deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: spec.name,
        uid: '',
        resourceVersion: '',
        generation: 1,
        annotations: { 'reloader.stakater.com/auto': 'true' },
      },
      spec: {
        replicas: spec.replicas,
        selector: { matchLabels: { app: spec.name } },
        strategy: {
          type: 'RollingUpdate',
          rollingUpdate: { maxSurge: spec.maxSurge, maxUnavailable: spec.maxUnavailable },
        },
        template: podTemplate(spec),
      },
      status: {},
    });
  }

  /** "The user" changes a Deployment's pod template (a new image): the Deployment controller rolls it out. */
  userTemplateChange(name: string): void {
    const resource = this.specs.get(name)?.kind === 'StatefulSet' ? 'statefulsets' : 'deployments';
    const d = this.objs[resource].get(name) as Obj;
    const old = clone(d);
    const tpl = (d.spec as { template: { spec: { containers: Array<{ image: string }> } } }).template;
    const c = tpl.spec.containers[0] as { image: string };
    c.image = `app:${Number(c.image.split(':')[1]) + 1}`;
    d.metadata.generation = (d.metadata.generation ?? 1) + 1;
    this.update(resource, d, old);
  }

  /**
   * The StatefulSet controller, OrderedReady with RollingUpdate: pod <name>-<i> for each ordinal,
   * created (again, under the same name, once the old one is gone) only when every lower ordinal is
   * Ready; a template change replaces the pods not on the update revision, highest ordinal first, one
   * at a time, each once the others are Ready.
   */
  #syncStatefulSet(set: Obj): void {
    const name = set.metadata.name;
    const spec = set.spec as {
      replicas: number;
      template: { metadata: { labels: Record<string, string> }; spec: Json };
    };
    const revision = `${name}-${templateHash(spec.template)}`;
    const pods = Array.from({ length: spec.replicas }, (_, i) => this.objs.pods.get(`${name}-${i}`));
    for (let i = 0; i < spec.replicas; i++) {
      const p = pods[i];
      if (p) {
        if (!ready(p) || p.metadata.deletionTimestamp) break;
        continue;
      }
      this.create('pods', {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name: `${name}-${i}`,
          uid: '',
          resourceVersion: '',
          labels: {
            ...spec.template.metadata.labels,
            'controller-revision-hash': revision,
            'statefulset.kubernetes.io/pod-name': `${name}-${i}`,
            'apps.kubernetes.io/pod-index': String(i),
          },
          ownerReferences: [
            { apiVersion: 'apps/v1', kind: 'StatefulSet', name, uid: set.metadata.uid, controller: true },
          ],
        },
        spec: clone(spec.template.spec),
      });
      break;
    }
    const settled = pods.every((p) => p && ready(p) && !p.metadata.deletionTimestamp);
    const outdated = pods.filter((p) => p && p.metadata.labels?.['controller-revision-hash'] !== revision);
    const highest = outdated[outdated.length - 1];
    if (settled && highest) {
      if (ready(highest)) this.#lostByOthers.push({ app: name, at: this.now() });
      this.deletePod(highest);
    }
    const live = pods.filter((p): p is Obj => p !== undefined && !p.metadata.deletionTimestamp);
    const updated = live.filter((p) => p.metadata.labels?.['controller-revision-hash'] === revision).length;
    const prev = (set.status ?? {}) as { currentRevision?: string };
    const st = {
      observedGeneration: set.metadata.generation,
      replicas: live.length,
      readyReplicas: live.filter(ready).length,
      updatedReplicas: updated,
      currentRevision: updated === spec.replicas ? revision : (prev.currentRevision ?? revision),
      updateRevision: revision,
    };
    if (JSON.stringify(st) === JSON.stringify(set.status)) return;
    const old = clone(set);
    set.status = st;
    this.update('statefulsets', set, old);
  }

  #rsOf(d: Obj): Obj[] {
    return [...this.objs.replicasets.values()].filter((rs) =>
      rs.metadata.ownerReferences?.some((o) => o.uid === d.metadata.uid),
    );
  }

  #syncDeployment(d: Obj): void {
    const spec = this.specs.get(d.metadata.name) as DeploymentSpec;
    const template = (d.spec as { template: unknown }).template;
    const hash = templateHash(template);
    const sets = this.#rsOf(d);
    let current = sets.find((rs) => rs.metadata.labels?.['pod-template-hash'] === hash);
    const revision = Math.max(0, ...sets.map((rs) => Number(rs.metadata.annotations?.[REV] ?? 0))) + 1;
    if (!current) {
      current = this.create('replicasets', {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        metadata: {
          name: `${d.metadata.name}-${hash}`,
          uid: '',
          resourceVersion: '',
          labels: { app: d.metadata.name, 'pod-template-hash': hash },
          annotations: { [REV]: String(revision) },
          ownerReferences: [
            {
              apiVersion: 'apps/v1',
              kind: 'Deployment',
              name: d.metadata.name,
              uid: d.metadata.uid,
              controller: true,
            },
          ],
        },
        spec: {
          replicas: sets.length === 0 ? spec.replicas : 0,
          selector: { matchLabels: { app: d.metadata.name, 'pod-template-hash': hash } },
          template: clone(template),
        },
      });
    }
    const rev = current.metadata.annotations?.[REV] as string;
    if (d.metadata.annotations?.[REV] !== rev) {
      const old = clone(d);
      d.metadata.annotations = { ...d.metadata.annotations, [REV]: rev };
      this.update('deployments', d, old);
    }
    // The rollout, within maxSurge and maxUnavailable, counted over the ReplicaSets' own pods.
    const { surge, unavailable } = bounds(spec);
    const olds = this.#rsOf(d).filter((rs) => rs !== current);
    const replicasOf = (rs: Obj) => (rs.spec as { replicas: number }).replicas;
    const setReplicas = (rs: Obj, n: number) => {
      if (replicasOf(rs) === n) return;
      const old = clone(rs);
      (rs.spec as { replicas: number }).replicas = n;
      this.update('replicasets', rs, old);
    };
    const total = [current, ...olds].reduce((n, rs) => n + replicasOf(rs), 0);
    const up = Math.min(spec.replicas, replicasOf(current) + Math.max(0, spec.replicas + surge - total));
    setReplicas(current, Math.max(replicasOf(current), up));
    const available = [current, ...olds].reduce((n, rs) => n + this.#ownedReady(rs).length, 0);
    let canDrop = available - (spec.replicas - unavailable);
    for (const rs of olds) {
      // Old pods that are not Ready cost no availability: they go first.
      const unready = this.#owned(rs).length - this.#ownedReady(rs).length;
      const drop = Math.min(replicasOf(rs), unready + Math.max(0, canDrop));
      canDrop -= Math.max(0, drop - unready);
      setReplicas(rs, replicasOf(rs) - drop);
    }
  }

  #owned(rs: Obj): Obj[] {
    return [...this.objs.pods.values()].filter(
      (p) =>
        !p.metadata.deletionTimestamp &&
        p.metadata.ownerReferences?.some((o) => o.controller && o.uid === rs.metadata.uid),
    );
  }

  #ownedReady(rs: Obj): Obj[] {
    return this.#owned(rs).filter(ready);
  }

  #syncReplicaSet(rs: Obj): void {
    const sel = (rs.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    // Adopt orphans the selector matches (ControllerRefManager.ClaimPods).
    for (const p of [...this.objs.pods.values()]) {
      if (p.metadata.deletionTimestamp || p.metadata.ownerReferences?.some((o) => o.controller)) continue;
      if (!Object.entries(sel).every(([k, v]) => p.metadata.labels?.[k] === v)) continue;
      const old = clone(p);
      p.metadata.ownerReferences = [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: rs.metadata.name,
          uid: rs.metadata.uid,
          controller: true,
        },
      ];
      this.hooks.note?.(`${rs.metadata.name} adopts ${p.metadata.name}`);
      this.update('pods', p, old);
    }
    const owned = this.#owned(rs);
    const want = (rs.spec as { replicas: number }).replicas;
    if (owned.length < want) {
      const tpl = (rs.spec as { template: { metadata: { labels: Record<string, string> }; spec: Json } })
        .template;
      for (let i = owned.length; i < want; i++) {
        this.create('pods', {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: `${rs.metadata.name}-${(++this.#name).toString(36).padStart(5, '0')}`,
            uid: '',
            resourceVersion: '',
            labels: { ...tpl.metadata.labels, ...sel },
            ownerReferences: [
              {
                apiVersion: 'apps/v1',
                kind: 'ReplicaSet',
                name: rs.metadata.name,
                uid: rs.metadata.uid,
                controller: true,
              },
            ],
          },
          spec: clone(tpl.spec),
        });
      }
    } else if (owned.length > want) {
      const cost = (p: Obj) => Number(p.metadata.annotations?.[COST] ?? 0);
      const readySince = (p: Obj) => Date.parse(readyCondition(p)?.lastTransitionTime ?? '') || 0;
      const ranked = [...owned].sort(
        (a, b) =>
          Number(ready(a)) - Number(ready(b)) ||
          cost(a) - cost(b) ||
          readySince(b) - readySince(a) ||
          (this.createdMs.get(b.metadata.uid) ?? 0) - (this.createdMs.get(a.metadata.uid) ?? 0),
      );
      // The excess is the service's doing for as many pods as it had adopted in (a handover); beyond
      // that, the Deployment controller scaled the ReplicaSet down (a rollout of the user's).
      let handed = owned.filter((p) => this.ours.has(p.metadata.uid)).length;
      for (const p of ranked.slice(0, owned.length - want)) {
        const handover = handed-- > 0;
        if (handover && !this.ours.has(p.metadata.uid)) this.#checkTaking(p, 'handover');
        else if (!handover && ready(p))
          this.#lostByOthers.push({ app: rs.metadata.labels?.app ?? '', at: this.now() });
        this.hooks.note?.(
          `${rs.metadata.name} deletes ${p.metadata.name} (excess${handover ? ', handover' : ''})`,
        );
        this.deletePod(p);
      }
    }
    for (const p of owned) if (this.ours.has(p.metadata.uid)) this.ours.delete(p.metadata.uid);
  }

  #deploymentStatus(d: Obj): void {
    const sets = this.#rsOf(d);
    const hash = templateHash((d.spec as { template: unknown }).template);
    const current = sets.find((rs) => rs.metadata.labels?.['pod-template-hash'] === hash);
    const st = {
      observedGeneration: d.metadata.generation,
      replicas: sets.reduce((n, rs) => n + this.#owned(rs).length, 0),
      updatedReplicas: current ? this.#owned(current).length : 0,
      readyReplicas: sets.reduce((n, rs) => n + this.#ownedReady(rs).length, 0),
      availableReplicas: sets.reduce((n, rs) => n + this.#ownedReady(rs).length, 0),
    };
    if (JSON.stringify(st) === JSON.stringify(d.status)) return;
    const old = clone(d);
    d.status = st;
    this.update('deployments', d, old);
  }

  // ---- the API ---------------------------------------------------------------------------------

  /** The API as one replica of the service reaches it. */
  server(sender: Sender): InProcessServer {
    return {
      request: (method, path, payload, signal) => this.#request(sender, method, path, payload, signal),
      watch: (path, signal, onLine) => this.#watch(path, signal, onLine),
    };
  }

  async #request(
    sender: Sender,
    method: string,
    pathAndQuery: string,
    payload: string | undefined,
    signal: AbortSignal,
  ): Promise<{ status: number; text: string }> {
    const [path = '', query = ''] = pathAndQuery.split('?');
    const q = new URLSearchParams(query);
    const fault = this.hooks.fault(method, path);
    const hang = () =>
      new Promise<never>((_, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    if (fault.kind === 'status') {
      const reason =
        { 500: 'InternalError', 429: 'TooManyRequests', 409: 'Conflict' }[fault.status] ?? 'Unknown';
      return status(fault.status, reason, `modelled ${fault.status}`);
    }
    if (fault.kind === 'hang' && !fault.applied) return hang();
    // A round trip takes a little time; the write lands at its end.
    await new Promise((r) => setTimeout(r, 5));
    if (signal.aborted) throw signal.reason;
    if (method !== 'GET') this.hooks.onWrite(sender, method, path, payload);
    const answer = this.#serve(
      method,
      path,
      q,
      payload === undefined ? undefined : (JSON.parse(payload) as Json),
    );
    if (fault.kind === 'hang') return hang();
    return answer;
  }

  #serve(
    method: string,
    path: string,
    q: URLSearchParams,
    body: Json | undefined,
  ): { status: number; text: string } {
    const m =
      /^\/(?:api\/v1|apis\/apps\/v1)(?:\/namespaces\/([^/]+))?\/(pods|deployments|replicasets|statefulsets|configmaps)(?:\/([^/]+))?(?:\/(eviction))?$/.exec(
        path,
      );
    if (!m) {
      this.unserved.push(`${method} ${path}`);
      return status(404, 'NotFound', `the model does not serve ${path}`);
    }
    const [, ns, res, name, sub] = m as unknown as [
      string,
      string | undefined,
      Resource,
      string | undefined,
      string | undefined,
    ];
    const inNs = ns === undefined || ns === NS;
    const store = this.objs[res];
    if (method === 'GET' && name === undefined) {
      if (q.get('resourceVersionMatch') === 'Exact') return this.#readAt(res, q);
      const items = inNs ? this.#select(res, q) : [];
      return ok({ kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: String(this.rv) }, items });
    }
    const cur = name !== undefined && inNs ? store.get(name) : undefined;
    if (method === 'GET') return cur ? ok(cur) : status(404, 'NotFound', `${res} "${name}" not found`);
    if (res === 'pods' && method === 'POST' && name === undefined) return this.#createPod(body as Obj);
    if (res === 'pods' && sub === 'eviction') return this.#evict(name as string, cur, body ?? {});
    if (!cur) return status(404, 'NotFound', `${res} "${name}" not found`);
    if (method === 'PATCH') {
      const meta = (body?.metadata ?? {}) as Json;
      if (meta.uid !== undefined && meta.uid !== cur.metadata.uid)
        return status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${res} "${name}": StorageError: invalid object, Code: 4, Precondition failed: UID in precondition: ${String(meta.uid)}, UID in object meta: ${cur.metadata.uid}`,
        );
      if (
        (res === 'deployments' || res === 'statefulsets') &&
        (body?.spec as Json | undefined)?.template !== undefined
      )
        this.templateWrites.push(`PATCH ${path}`);
      const old = clone(cur);
      mergePatch(cur as unknown as Json, body ?? {});
      return ok(this.update(res, cur, old));
    }
    if (method === 'DELETE' && res === 'pods') {
      this.deletePod(cur);
      return ok(cur);
    }
    this.unserved.push(`${method} ${path}`);
    return status(405, 'MethodNotAllowed', `the model does not serve ${method} ${path}`);
  }

  #select(res: Resource, q: URLSearchParams): Obj[] {
    const labels = parseSelector(q.get('labelSelector'));
    const field = q.get('fieldSelector');
    const byName = field?.startsWith('metadata.name=') ? field.slice('metadata.name='.length) : undefined;
    return [...this.objs[res].values()]
      .filter(
        (o) =>
          (byName === undefined || o.metadata.name === byName) &&
          labels.every((f) => f(o.metadata.labels ?? {})),
      )
      .map(clone);
  }

  /** A LIST at an exact past resourceVersion, from the change log; 410 once compacted. */
  #readAt(res: Resource, q: URLSearchParams): { status: number; text: string } {
    const at = Number(q.get('resourceVersion'));
    if (at <= this.compacted)
      return status(410, 'Expired', `too old resource version: ${at} (${this.compacted})`);
    const field = q.get('fieldSelector') ?? '';
    const byName = field.startsWith('metadata.name=') ? field.slice('metadata.name='.length) : undefined;
    const state = new Map<string, Obj>();
    for (const c of this.log) {
      if (c.rv > at) break;
      if (c.resource !== res) continue;
      if (c.type === 'DELETED') state.delete(c.object.metadata.name);
      else state.set(c.object.metadata.name, c.object);
    }
    const items = [...state.values()].filter((o) => byName === undefined || o.metadata.name === byName);
    return ok({ kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: String(at) }, items });
  }

  #createPod(body: Obj): { status: number; text: string } {
    const meta = body.metadata;
    const name = meta.name ?? `${meta.generateName ?? 'pod-'}${(++this.#name).toString(36).padStart(5, '0')}`;
    if (this.objs.pods.has(name)) return status(409, 'AlreadyExists', `pods "${name}" already exists`);
    const p = this.create('pods', {
      ...clone(body),
      metadata: { ...clone(meta), name, uid: '', resourceVersion: '' },
    });
    this.ours.add(p.metadata.uid);
    return ok(p, 201);
  }

  #evict(name: string, p: Obj | undefined, body: Json): { status: number; text: string } {
    if (!p) return status(404, 'NotFound', `pods "${name}" not found`);
    const opts = (body.deleteOptions ?? {}) as {
      preconditions?: { uid?: string; resourceVersion?: string };
      dryRun?: string[];
    };
    const uid = opts.preconditions?.uid;
    if (uid !== undefined && uid !== p.metadata.uid)
      return status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on Pod "${name}": the UID in the precondition (${uid}) does not match the UID in record (${p.metadata.uid}). The object might have been deleted and then recreated`,
      );
    const rv = opts.preconditions?.resourceVersion;
    if (rv !== undefined && rv !== p.metadata.resourceVersion)
      return status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on Pod "${name}": the ResourceVersion in the precondition (${rv}) does not match the ResourceVersion in record (${p.metadata.resourceVersion}). The object might have been modified`,
      );
    const accepted = () => ok({ kind: 'Status', apiVersion: 'v1', status: 'Success' }, 201);
    // canIgnorePDB: a terminating or Pending pod is deleted without a PDB check.
    const dryRun = opts.dryRun?.includes('All');
    if (p.metadata.deletionTimestamp || p.status?.phase === 'Pending') {
      if (!dryRun && !p.metadata.deletionTimestamp) {
        this.#checkTaking(p, 'eviction');
        this.deletePod(p);
      }
      return accepted();
    }
    const app = this.deploymentOf(p);
    const spec = app ? this.specs.get(app) : undefined;
    if (spec?.pdbMinAvailable !== undefined) {
      const healthy = this.readyOf(spec.name).length;
      const desired = spec.pdbMinAvailable;
      // unhealthyPodEvictionPolicy IfHealthyBudget (the default): a pod that is not Ready may go
      // when the budget is met; a Ready one only when one disruption is allowed.
      const allowed = ready(p) ? healthy - desired > 0 : healthy >= desired;
      if (!allowed)
        return status(
          429,
          'TooManyRequests',
          "Cannot evict pod as it would violate the pod's disruption budget.",
          {
            causes: [
              {
                reason: 'DisruptionBudget',
                message: `The disruption budget ${spec.name}-pdb needs ${desired} healthy pods and has ${healthy} currently`,
              },
            ],
          },
        );
    }
    if (dryRun) return accepted();
    this.#checkTaking(p, 'eviction');
    this.deletePod(p);
    return accepted();
  }

  async #watch(
    pathAndQuery: string,
    signal: AbortSignal,
    onLine: (line: string) => void,
  ): Promise<{ status: number; text: string } | undefined> {
    const [path = '', query = ''] = pathAndQuery.split('?');
    const q = new URLSearchParams(query);
    const m = /\/namespaces\/([^/]+)\/(pods|deployments|statefulsets)$/.exec(path);
    if (!m || m[1] !== NS) {
      this.unserved.push(`WATCH ${path}`);
      return status(404, 'NotFound', `the model does not watch ${path}`);
    }
    const res = m[2] as Resource;
    const labels = parseSelector(q.get('labelSelector'));
    const field = q.get('fieldSelector') ?? '';
    const byName = field.startsWith('metadata.name=') ? field.slice('metadata.name='.length) : undefined;
    const matches = (o: Obj | undefined) =>
      o !== undefined &&
      (byName === undefined || o.metadata.name === byName) &&
      labels.every((f) => f(o.metadata.labels ?? {}));
    return new Promise((resolve, reject) => {
      let deliverAt = this.now();
      let closed = false;
      const timers = new Set<ReturnType<typeof setTimeout>>();
      const close = (how: () => void) => {
        if (closed) return;
        closed = true;
        this.#watchers.delete(onChange);
        this.#enders.delete(end);
        for (const t of timers) clearTimeout(t);
        signal.removeEventListener('abort', onAbort);
        how();
      };
      const send = (line: Json) => {
        // In order, each after a seeded lag.
        deliverAt = Math.max(deliverAt, this.now() + this.hooks.lag());
        const t = setTimeout(() => {
          timers.delete(t);
          if (closed) return;
          try {
            onLine(JSON.stringify(line));
          } catch (err) {
            close(() => reject(err));
          }
        }, deliverAt - this.now());
        timers.add(t);
      };
      const onChange = (c: Change) => {
        if (c.resource !== res) return;
        const was = matches(c.old);
        const is = c.type !== 'DELETED' && matches(c.object);
        if (is) send({ type: was ? 'MODIFIED' : 'ADDED', object: c.object });
        else if (was) send({ type: 'DELETED', object: c.object });
      };
      const end = () => close(() => resolve(undefined));
      const onAbort = () => close(() => reject(signal.reason));
      signal.addEventListener('abort', onAbort, { once: true });
      this.#enders.add(end);
      const timeout = Number(q.get('timeoutSeconds') ?? 0);
      if (timeout > 0) timers.add(setTimeout(end, timeout * SECOND));
      const from = q.get('resourceVersion');
      if (q.get('sendInitialEvents') === 'true') {
        for (const o of this.#select(res, q)) send({ type: 'ADDED', object: o });
        send({
          type: 'BOOKMARK',
          object: {
            kind: 'Pod',
            apiVersion: 'v1',
            metadata: {
              resourceVersion: String(this.rv),
              annotations: { 'k8s.io/initial-events-end': 'true' },
            },
          },
        });
      } else if (from) {
        if (Number(from) < this.compacted) {
          send({
            type: 'ERROR',
            object: {
              kind: 'Status',
              apiVersion: 'v1',
              status: 'Failure',
              code: 410,
              reason: 'Expired',
              message: `too old resource version: ${from} (${this.compacted})`,
            },
          });
          const t = setTimeout(end, deliverAt - this.now() + 1);
          timers.add(t);
          return;
        }
        for (const c of this.log) if (c.rv > Number(from)) onChange(c);
      }
      this.#watchers.add(onChange);
    });
  }
}

const REV = 'deployment.kubernetes.io/revision';

/** The pod template of a modelled workload: one container reading its configs. */
function podTemplate(spec: DeploymentSpec): Json {
  return {
    metadata: { labels: { app: spec.name } },
    spec: {
      containers: [
        { name: 'c', image: 'app:1', envFrom: spec.uses.map((name) => ({ configMapRef: { name } })) },
      ],
    },
  };
}
const COST = 'controller.kubernetes.io/pod-deletion-cost';

function readyCondition(p: Obj): { status?: string; lastTransitionTime?: string } | undefined {
  return (
    p.status?.conditions as Array<{ type: string; status: string; lastTransitionTime?: string }> | undefined
  )?.find((c) => c.type === 'Ready');
}

export function ready(p: Obj): boolean {
  return readyCondition(p)?.status === 'True';
}

/** RFC 7386 JSON merge patch, in place. */
function mergePatch(target: Json, patch: Json): void {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (typeof v === 'object' && !Array.isArray(v)) {
      const t = target[k];
      if (typeof t !== 'object' || t === null || Array.isArray(t)) target[k] = {};
      mergePatch(target[k] as Json, v as Json);
    } else target[k] = clone(v);
  }
}
