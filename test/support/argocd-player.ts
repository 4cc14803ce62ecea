// Plays Argo CD's part on the real API server: an Application, and syncs of it. A sync writes
// status.operationState Running (with `operation` set, as the controller does), applies manifests
// wave by wave with the tracking annotation (and/or label) and Argo CD's field manager in one of
// three modes, then writes the terminal phase with syncResult.resources. Every Application write goes
// through createArgoObject/replaceArgoObject, which check it against the upstream CRD schema.
import { type KubernetesObject, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { createArgoObject, readArgoObject, replaceArgoObject } from './argo.ts';
import { type Kube, statusOf } from './kube.ts';
import type { ArgoObject } from './upstream-schema.ts';

export const APPLY_MODES = ['client-side-apply', 'server-side-apply', 'replace'] as const;
export type ApplyMode = (typeof APPLY_MODES)[number];

export const ARGOCD_FIELD_MANAGER = 'argocd-controller';
export const TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id';
export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

export interface Manifest extends KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
  };
  [k: string]: unknown;
}

export interface PlayerOptions {
  kube: Kube;
  /** Where the Application lives. */
  appNamespace: string;
  appName: string;
  /** Argo CD's own namespace; apps elsewhere are tracked as `<appNs>_<app>`. Default: appNamespace. */
  controlNamespace?: string;
  /** Where the manifests go. */
  destination: string;
  mode: ApplyMode;
  tracking?: 'annotation' | 'label' | 'annotation+label';
  labelKey?: string;
}

export interface ResourceResult {
  group: string;
  version: string;
  kind: string;
  namespace: string;
  name: string;
  status: 'Synced';
  message: string;
  syncPhase: 'Sync';
}

export interface Operation {
  revision: string;
  startedAt: string;
  resources: ResourceResult[];
}

export type TerminalPhase = 'Succeeded' | 'Failed' | 'Error';

const REPO = 'http://127.0.0.1:1/config.git';

function groupVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/** RFC 3339 with whole seconds, as metav1.Time is written. */
const rfc3339 = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * kubectl's three-way apply reduced to a JSON merge patch: the new manifest, plus null for every key
 * the last applied manifest had and the new one drops (lists are replaced whole).
 */
export function threeWayMergePatch(lastApplied: unknown, desired: unknown): unknown {
  if (!isObject(desired)) return desired;
  const out: Record<string, unknown> = {};
  const last = isObject(lastApplied) ? lastApplied : {};
  for (const k of Object.keys(last)) if (!(k in desired)) out[k] = null;
  for (const [k, v] of Object.entries(desired)) out[k] = isObject(v) ? threeWayMergePatch(last[k], v) : v;
  return out;
}

export class ArgoCdPlayer {
  readonly o: Required<Omit<PlayerOptions, 'kube'>> & { kube: Kube };
  readonly objects: KubernetesObjectApi;
  #lastStartedAt = 0;

  private constructor(o: PlayerOptions) {
    this.o = {
      controlNamespace: o.appNamespace,
      tracking: 'annotation',
      labelKey: 'app.kubernetes.io/instance',
      ...o,
    };
    this.objects = KubernetesObjectApi.makeApiClient(o.kube.kc);
  }

  /** Creates the Application and returns a player for it. */
  static async start(o: PlayerOptions): Promise<ArgoCdPlayer> {
    const p = new ArgoCdPlayer(o);
    await createArgoObject(o.kube.custom, p.#application());
    return p;
  }

  get instance(): string {
    const { appNamespace, appName, controlNamespace } = this.o;
    return appNamespace === controlNamespace ? appName : `${appNamespace}_${appName}`;
  }

  trackingId(m: Manifest): string {
    const { group } = groupVersion(m.apiVersion);
    return `${this.instance}:${group}/${m.kind}:${m.metadata.namespace ?? this.o.destination}/${m.metadata.name}`;
  }

  /** The manifest as Argo CD sends it: in the destination namespace, with tracking metadata. */
  rendered(m: Manifest): Manifest {
    const out = structuredClone(m);
    out.metadata.namespace ??= this.o.destination;
    if (this.o.tracking !== 'label') {
      out.metadata.annotations = { ...out.metadata.annotations, [TRACKING_ANNOTATION]: this.trackingId(out) };
    }
    if (this.o.tracking !== 'annotation') {
      out.metadata.labels = { ...out.metadata.labels, [this.o.labelKey]: this.instance.slice(0, 63) };
    }
    return out;
  }

  /** Writes Running, as the controller does when it picks up a sync. */
  async startSync(revision: string): Promise<Operation> {
    // startedAt identifies the operation and has 1 s precision: two syncs must not share one.
    const at = Math.max(Date.now(), this.#lastStartedAt + 1000);
    this.#lastStartedAt = at;
    const op: Operation = { revision, startedAt: rfc3339(at), resources: [] };
    await this.#writeStatus((app) => {
      app.operation = this.#operation(revision);
      app.status = {
        ...(app.status as object),
        operationState: {
          operation: this.#operation(revision),
          phase: 'Running',
          message: 'one or more tasks are running',
          startedAt: op.startedAt,
        },
      };
    });
    return op;
  }

  /** Applies one wave of manifests in the player's mode; records what Argo CD would report. */
  async apply(op: Operation, manifests: Manifest[]): Promise<void> {
    for (const m of manifests) {
      const desired = this.rendered(m);
      const message = await this.#applyOne(desired);
      const { group, version } = groupVersion(desired.apiVersion);
      const r: ResourceResult = {
        group,
        version,
        kind: desired.kind,
        namespace: desired.metadata.namespace as string,
        name: desired.metadata.name,
        status: 'Synced',
        message,
        syncPhase: 'Sync',
      };
      op.resources = [...op.resources.filter((x) => !(x.kind === r.kind && x.name === r.name)), r];
    }
  }

  /** Writes the terminal phase with syncResult.resources, and clears `operation`. */
  async finishSync(op: Operation, phase: TerminalPhase = 'Succeeded'): Promise<string> {
    const finishedAt = rfc3339(Math.max(Date.now(), Date.parse(op.startedAt)));
    await this.#writeStatus((app) => {
      delete app.operation;
      app.status = {
        ...(app.status as object),
        operationState: {
          operation: this.#operation(op.revision),
          phase,
          message:
            phase === 'Succeeded'
              ? 'successfully synced (all tasks run)'
              : 'one or more objects failed to apply',
          startedAt: op.startedAt,
          finishedAt,
          syncResult: {
            revision: op.revision,
            source: { repoURL: REPO, path: 'app', targetRevision: 'main' },
            resources: op.resources,
          },
        },
      };
    });
    return finishedAt;
  }

  /** A whole sync: Running, each wave applied in order (with a hook after each), then `phase`. */
  async sync(
    waves: Manifest[][],
    o: { revision?: string; phase?: TerminalPhase; afterWave?: (i: number) => Promise<void> } = {},
  ): Promise<{ op: Operation; finishedAt: string }> {
    const op = await this.startSync(o.revision ?? `rev-${Date.now()}`);
    for (const [i, wave] of waves.entries()) {
      await this.apply(op, wave);
      await o.afterWave?.(i);
    }
    return { op, finishedAt: await this.finishSync(op, o.phase) };
  }

  async #applyOne(desired: Manifest): Promise<string> {
    const what = `${desired.kind.toLowerCase()}/${desired.metadata.name}`;
    const existing = await this.objects.read(desired).catch((err: unknown) => {
      if (statusOf(err) === 404) return undefined;
      throw err;
    });
    switch (this.o.mode) {
      case 'server-side-apply':
        await this.objects.patch(
          desired,
          undefined,
          undefined,
          ARGOCD_FIELD_MANAGER,
          true,
          PatchStrategy.ServerSideApply,
        );
        return `${what} serverside-applied`;
      case 'replace': {
        if (!existing) {
          await this.objects.create(desired, undefined, undefined, ARGOCD_FIELD_MANAGER);
          return `${what} created`;
        }
        // A controller may write the object between our read and the replace (the Deployment
        // controller's status and revision annotation): 409, and the sync tries again with a fresh read.
        let current = existing;
        for (let attempt = 1; ; attempt++) {
          const body = structuredClone(desired);
          body.metadata.resourceVersion = current.metadata?.resourceVersion;
          try {
            await this.objects.replace(body, undefined, undefined, ARGOCD_FIELD_MANAGER);
            return `${what} replaced`;
          } catch (err) {
            if ((err as { code?: number }).code !== 409 || attempt >= 5) throw err;
            current = await this.objects.read(desired);
          }
        }
      }
      case 'client-side-apply': {
        const lastApplied = JSON.stringify(desired);
        const withLast = structuredClone(desired);
        withLast.metadata.annotations = { ...withLast.metadata.annotations, [LAST_APPLIED]: lastApplied };
        if (!existing) {
          await this.objects.create(withLast, undefined, undefined, ARGOCD_FIELD_MANAGER);
          return `${what} created`;
        }
        const previous = existing.metadata?.annotations?.[LAST_APPLIED];
        const patch = threeWayMergePatch(previous ? JSON.parse(previous) : {}, withLast) as Manifest;
        const before = existing.metadata?.resourceVersion;
        const after = await this.objects.patch(
          patch,
          undefined,
          undefined,
          ARGOCD_FIELD_MANAGER,
          undefined,
          PatchStrategy.MergePatch,
        );
        return `${what} ${after.metadata?.resourceVersion === before ? 'unchanged' : 'configured'}`;
      }
    }
  }

  #operation(revision: string) {
    return { sync: { revision, syncStrategy: { hook: {} } }, initiatedBy: { automated: true } };
  }

  #application(): ArgoObject {
    return {
      apiVersion: 'argoproj.io/v1alpha1',
      kind: 'Application',
      metadata: { name: this.o.appName, namespace: this.o.appNamespace },
      spec: {
        project: 'default',
        source: { repoURL: REPO, path: 'app', targetRevision: 'main' },
        destination: { server: 'https://kubernetes.default.svc', namespace: this.o.destination },
      },
    };
  }

  /** Read, change, replace: Argo CD writes Application status with a plain update. */
  async #writeStatus(change: (app: ArgoObject) => void): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const app = await readArgoObject<ArgoObject>(
        this.o.kube.custom,
        'Application',
        this.o.appNamespace,
        this.o.appName,
      );
      change(app);
      try {
        await replaceArgoObject(this.o.kube.custom, app);
        return;
      } catch (err) {
        if (statusOf(err) !== 409 || attempt >= 5) throw err;
      }
    }
  }
}
