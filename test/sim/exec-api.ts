// The API server of the execution-level simulation's model (exec-model.ts): what the service's
// requests and watches reach over ClusterAccess.inProcess, with the seeded faults the driver asks
// for (what it serves and how: exec-model.ts's header).
import type { InProcessServer } from '../../service/kube/access.ts';
import { ControlledModel } from './exec-controllers.ts';
import {
  type Change,
  clone,
  type Json,
  mergePatch,
  NS,
  type Obj,
  ok,
  parseSelector,
  type Resource,
  ready,
  SECOND,
  type Sender,
  status,
} from './exec-model.ts';

/** The whole model: the cluster, its controllers, and the API in front. */
export class ApiModel extends ControlledModel {
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
    const fault = this.hooks.fault(method, path, payload);
    const hang = () =>
      new Promise<never>((_, reject) => {
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      });
    if (fault.kind === 'status') {
      const reason =
        { 500: 'InternalError', 429: 'TooManyRequests', 409: 'Conflict', 403: 'Forbidden' }[fault.status] ??
        'Unknown';
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
    const name =
      meta.name ?? `${meta.generateName ?? 'pod-'}${(++this.nameSeq).toString(36).padStart(5, '0')}`;
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
        this.checkTaking(p, 'eviction');
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
    this.checkTaking(p, 'eviction');
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
        this.watchers.delete(onChange);
        this.enders.delete(end);
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
      this.enders.add(end);
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
      this.watchers.add(onChange);
    });
  }
}
