// The controllers of the execution-level simulation's model (exec-model.ts): the Deployment
// controller, the ReplicaSet controller and the StatefulSet controller, as far as a restart depends on
// them (what each does and leaves out: exec-model.ts's header).
import {
  bounds,
  ClusterModel,
  clone,
  type Json,
  type Obj,
  ready,
  readyCondition,
  templateHash,
  type WorkloadSpec,
} from './exec-model.ts';

export class ControlledModel extends ClusterModel {
  #syncAt: ReturnType<typeof setTimeout> | undefined;

  /** The controllers' next pass, one at a time, a little after the change (as informers deliver it). */
  protected override sync(): void {
    if (this.#syncAt) return;
    this.#syncAt = setTimeout(() => {
      this.#syncAt = undefined;
      for (const d of [...this.objs.deployments.values()]) this.#syncDeployment(d);
      for (const set of [...this.objs.statefulsets.values()]) this.#syncStatefulSet(set);
      for (const rs of [...this.objs.replicasets.values()]) this.#syncReplicaSet(rs);
      for (const d of [...this.objs.deployments.values()]) this.#deploymentStatus(d);
    }, 100 + this.hooks.lag());
  }

  /** Creates the workload of `spec`, opted in to reloads, with one container reading its configs. */
  addDeployment(spec: WorkloadSpec): void {
    this.specs.set(spec.name, spec);
    const sts = spec.kind === 'StatefulSet';
    const common = {
      replicas: spec.replicas,
      selector: { matchLabels: { app: spec.name } },
      template: podTemplate(spec),
    };
    this.create(sts ? 'statefulsets' : 'deployments', {
      apiVersion: 'apps/v1',
      kind: sts ? 'StatefulSet' : 'Deployment',
      metadata: {
        name: spec.name,
        uid: '',
        resourceVersion: '',
        generation: 1,
        annotations: { 'reloader.stakater.com/auto': 'true' },
      },
      spec: sts
        ? {
            ...common,
            serviceName: spec.name,
            podManagementPolicy: 'OrderedReady',
            updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 0 } },
          }
        : {
            ...common,
            strategy: {
              type: 'RollingUpdate',
              rollingUpdate: { maxSurge: spec.maxSurge, maxUnavailable: spec.maxUnavailable },
            },
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
      if (ready(highest)) this.lostByOthers.push({ app: name, at: this.now() });
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
    const spec = this.specs.get(d.metadata.name) as WorkloadSpec;
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
            name: `${rs.metadata.name}-${(++this.nameSeq).toString(36).padStart(5, '0')}`,
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
        if (handover && !this.ours.has(p.metadata.uid)) this.checkTaking(p, 'handover');
        else if (!handover && ready(p))
          this.lostByOthers.push({ app: rs.metadata.labels?.app ?? '', at: this.now() });
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
}

const REV = 'deployment.kubernetes.io/revision';

/** The pod template of a modelled workload: one container reading its configs. */
function podTemplate(spec: WorkloadSpec): Json {
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
