// Which Argo CD Application a ConfigMap or Secret belongs to, read the way Argo CD reads it: the
// tracking-id annotation `<app>:<group>/<kind>:<namespace>/<name>` (Argo CD 3.x default), or the
// instance label (2.x default). Apps outside Argo CD's own namespace are written `<appNs>_<app>`.
// Pure: no I/O.
import type { TrackingMethod } from '../config/choices.ts';

export const TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id';

export interface TrackingId {
  /** The instance name as written: `app`, or `appNs_app`. */
  instance: string;
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

/** An Application, by namespace and name. */
export interface AppKey {
  namespace: string;
  name: string;
}

export const appKeyString = (k: AppKey): string => `${k.namespace}/${k.name}`;

/**
 * Parses a tracking id as Argo CD does (util/argo/resource_tracking.go): three `:`-separated parts,
 * the last of which may itself contain `:`; the second and third must each split on `/` into
 * exactly two parts. Returns undefined for anything else.
 */
export function parseTrackingId(value: string): TrackingId | undefined {
  const first = value.indexOf(':');
  if (first < 0) return undefined;
  const second = value.indexOf(':', first + 1);
  if (second < 0) return undefined;
  const gk = value.slice(first + 1, second).split('/');
  const nn = value.slice(second + 1).split('/');
  if (gk.length !== 2 || nn.length !== 2) return undefined;
  return {
    instance: value.slice(0, first),
    group: gk[0] as string,
    kind: gk[1] as string,
    namespace: nn[0] as string,
    name: nn[1] as string,
  };
}

/**
 * The Application an instance name (`app` or `appNs_app`) refers to. An unqualified name is an app in
 * Argo CD's own namespace (`controlNamespace`). Kubernetes names cannot contain `_`, so the first one
 * separates namespace and name, as in Argo CD's ParseInstanceName.
 */
export function parseInstanceName(instance: string, controlNamespace: string): AppKey | undefined {
  if (instance === '') return undefined;
  const i = instance.indexOf('_');
  if (i < 0) return { namespace: controlNamespace, name: instance };
  const namespace = instance.slice(0, i);
  const name = instance.slice(i + 1);
  return namespace && name ? { namespace, name } : undefined;
}

/** The instance name Argo CD writes for an app: bare in its own namespace, else `appNs_app`. */
export function instanceName(app: AppKey, controlNamespace: string): string {
  return app.namespace === controlNamespace ? app.name : `${app.namespace}_${app.name}`;
}

/** What the tracking code needs to know about the object the annotation or label sits on. */
export interface TrackedObject {
  group: string;
  kind: string;
  /** '' for a cluster-scoped object. */
  namespace: string;
  name: string;
  annotations: Readonly<Record<string, string>>;
  labels: Readonly<Record<string, string>>;
}

/**
 * True when a tracking id describes `obj`. Argo CD ignores an id copied onto another object
 * (controller/state.go, isSelfReferencedObj): group, kind and name must match, and the namespace
 * too unless the object is cluster-scoped. The API version is not part of the id.
 */
export function describes(id: TrackingId, obj: TrackedObject): boolean {
  return (
    (obj.namespace === id.namespace || obj.namespace === '') &&
    obj.name === id.name &&
    obj.group === id.group &&
    obj.kind === id.kind
  );
}

export interface TrackingOptions {
  method: TrackingMethod;
  labelKey: string;
  /** Argo CD's own namespace: unqualified instance names refer to apps there. */
  controlNamespace: string;
}

export type TrackingResult =
  | { app: AppKey; by: 'annotation' | 'label' }
  | { app: undefined; ignored?: string };

/**
 * The Application that tracks `obj`, or undefined. `annotation` reads only the tracking id;
 * `label` only the label; `annotation+label` (our default) reads the tracking id and falls back to
 * the label when there is no tracking id at all, so one setting serves Argo CD 2.x and 3.x. A
 * tracking id that is present but malformed, or that describes another object, decides on its own:
 * the object is not tracked (a copied annotation usually comes with a copied label).
 */
export function trackedBy(obj: TrackedObject, o: TrackingOptions): TrackingResult {
  const raw = o.method === 'label' ? undefined : obj.annotations[TRACKING_ANNOTATION];
  if (raw !== undefined) {
    const id = parseTrackingId(raw);
    if (!id) return { app: undefined, ignored: `malformed ${TRACKING_ANNOTATION} ${JSON.stringify(raw)}` };
    if (!describes(id, obj)) {
      return {
        app: undefined,
        ignored: `${TRACKING_ANNOTATION} ${JSON.stringify(raw)} describes another object`,
      };
    }
    const app = parseInstanceName(id.instance, o.controlNamespace);
    return app ? { app, by: 'annotation' } : { app: undefined, ignored: `no app in ${JSON.stringify(raw)}` };
  }
  if (o.method === 'annotation') return { app: undefined };
  const label = obj.labels[o.labelKey];
  const app = label ? parseInstanceName(label, o.controlNamespace) : undefined;
  return app ? { app, by: 'label' } : { app: undefined };
}
