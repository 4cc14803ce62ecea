// The body Flux's notification-controller POSTs to a `generic` or `generic-hmac` Provider, parsed
// once into one frozen FluxEvent. Pure. A malformed body is rejected with the first offending field.
//
// Facts it relies on, read in the released source (Go module cache):
//  - fluxcd/pkg/apis/event v0.27.0, v1beta1/event.go: the body is Event {involvedObject (a
//    corev1.ObjectReference: kind, namespace, name, uid, apiVersion, resourceVersion, all omitempty),
//    severity (trace|info|error), timestamp (metav1.Time: RFC 3339 in UTC, whole seconds, or null),
//    message, reason, metadata (map[string]string, omitempty), reportingController,
//    reportingInstance}. metadata.go: the keys "revision" and "originRevision".
//  - notification-controller v1.9.0, internal/server/event_server.go cleanupMetadata and
//    event_handlers.go combineEventMetadata/excludeInternalMetadata: before forwarding, metadata keeps
//    only keys prefixed "<involved object's group>/" or "event.toolkit.fluxcd.io/", drops
//    <group>/checksum, <group>/digest and <group>/token, and STRIPS the prefixes; Alert
//    .spec.eventMetadata keys are added, the object's controller keys winning. So what arrives is
//    "revision", not "kustomize.toolkit.fluxcd.io/revision" (its docs/spec/v1beta3/providers.md
//    example still shows the prefixed key: we read the bare key first, then the prefixed one).
//  - kustomize-controller v1.9.0, internal/controller/kustomization_controller.go event()/apply()/
//    prune(): revision and originRevision under "kustomize.toolkit.fluxcd.io/"; an apply event's
//    message is one ssa ChangeSetEntry.String() per changed object, joined with "\n" (unchanged and
//    skipped objects left out), a prune event's lists every deleted (or skipped) object, and a
//    failed apply's error event is the error followed by the lines of what was applied before it.
//  - fluxcd/pkg/ssa v0.76.0, changeset.go and utils/fmt.go: ChangeSetEntry.String() is
//    "<subject> <action>"; the subject is "Kind/namespace/name", or "Kind/name" for a cluster-scoped
//    object. The kind is NOT group-qualified; actions are created, configured, unchanged, deleted,
//    skipped, unknown.
//  - helm-controller v1.6.0, internal/reconcile/release.go eventMeta: "helm.toolkit.fluxcd.io/"
//    revision (the chart version), token (the values digest, removed by notification-controller),
//    app-version and oci-digest; no originRevision. Its messages list no objects.
//  - fluxcd/pkg/runtime v0.110.0, events/recorder.go: trace-severity events never leave the
//    controller; involvedObject always has kind, name, namespace and apiVersion.
//
// Nothing in these events is Secret data, but the message can echo what a tenant wrote (an apply
// error quotes the object), so it is kept only truncated, and its change lines are claims to check
// against the Kustomization's inventory, not authority.

export interface FluxObjectRef {
  kind: 'Kustomization' | 'HelmRelease';
  namespace: string;
  name: string;
}

export interface FluxChange {
  kind: string;
  /** '' for core; UNKNOWN_GROUP when the kind is not a well-known one (the message names no group). */
  group: string;
  /** '' for a cluster-scoped object. */
  namespace: string;
  name: string;
  action: string;
}

export interface FluxEvent {
  object: FluxObjectRef;
  severity: 'info' | 'error';
  reason: string;
  /** Truncated to MAX_MESSAGE_CHARS. */
  message: string;
  revision?: string;
  originRevision?: string;
  timestamp: string;
  changes: FluxChange[];
}

export class InvalidFluxEvent extends Error {
  override name = 'InvalidFluxEvent';
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field}: ${message}`);
    this.field = field;
  }
}

/** The Flux kinds we act on, and the API group each must belong to. */
export const FLUX_OBJECT_GROUPS = {
  Kustomization: 'kustomize.toolkit.fluxcd.io',
  HelmRelease: 'helm.toolkit.fluxcd.io',
} as const;

/** A change line's group when its kind is not in WELL_KNOWN_GROUPS: not a valid API group name. */
export const UNKNOWN_GROUP = '*';
export const MAX_MESSAGE_CHARS = 4096;
export const MAX_CHANGES = 10_000;
export const MAX_METADATA_KEYS = 256;
export const MAX_REVISION_CHARS = 1024;
export const CHANGE_ACTIONS = [
  'created',
  'configured',
  'unchanged',
  'deleted',
  'skipped',
  'unknown',
] as const;

/**
 * The group of kinds whose name says it: the message gives only the kind (ssa utils.FmtObjMetadata),
 * so a change line is resolved through this table, and any other kind gets UNKNOWN_GROUP.
 */
const WELL_KNOWN_GROUPS: ReadonlyMap<string, string> = new Map([
  ...[
    'ConfigMap',
    'Secret',
    'Service',
    'ServiceAccount',
    'Namespace',
    'PersistentVolumeClaim',
    'PersistentVolume',
    'Pod',
    'LimitRange',
    'ResourceQuota',
  ].map((k) => [k, ''] as const),
  ...['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet'].map((k) => [k, 'apps'] as const),
  ...['Job', 'CronJob'].map((k) => [k, 'batch'] as const),
  ...['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].map(
    (k) => [k, 'rbac.authorization.k8s.io'] as const,
  ),
  ...['Ingress', 'IngressClass', 'NetworkPolicy'].map((k) => [k, 'networking.k8s.io'] as const),
  ['PodDisruptionBudget', 'policy'],
  ['HorizontalPodAutoscaler', 'autoscaling'],
  ['CustomResourceDefinition', 'apiextensions.k8s.io'],
  ['Rollout', 'argoproj.io'],
  ['SecretProviderClass', 'secrets-store.csi.x-k8s.io'],
  ...Object.entries(FLUX_OBJECT_GROUPS),
  ...['GitRepository', 'OCIRepository', 'HelmRepository', 'HelmChart', 'Bucket'].map(
    (k) => [k, 'source.toolkit.fluxcd.io'] as const,
  ),
]);

// Kubernetes names: DNS-1123 subdomains (object names) and labels (namespaces).
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const KIND = /^[A-Za-z][A-Za-z0-9]*$/;
const API_VERSION = /^(?:([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)\/)?v[a-z0-9]+$/;
// metav1.Time marshals as "2006-01-02T15:04:05Z"; fractions and offsets are RFC 3339 too.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const NO_CONTROL = /^[^\p{Cc}]*$/u;
// One ChangeSetEntry.String(): "Kind/namespace/name action" or "Kind/name action".
const CHANGE_LINE = new RegExp(
  `^([A-Za-z][A-Za-z0-9]{0,62})/(?:([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/)?([^/ ]{1,253}) (${CHANGE_ACTIONS.join('|')})$`,
);
const MAX_CHANGE_LINE = 63 + 1 + 63 + 1 + 253 + 1 + 10;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}

function field(o: Json, key: string): unknown {
  return Object.hasOwn(o, key) ? o[key] : undefined;
}

function text(
  v: unknown,
  name: string,
  o: { max: number; required: boolean; nonEmpty?: boolean; pattern?: RegExp; controls?: boolean },
): string | undefined {
  if (v === undefined || v === null) {
    if (o.required) throw new InvalidFluxEvent(name, 'is required');
    return undefined;
  }
  if (typeof v !== 'string') throw new InvalidFluxEvent(name, `must be a string, got ${kindOf(v)}`);
  if (o.nonEmpty && v === '') throw new InvalidFluxEvent(name, 'must not be empty');
  if (v.length > o.max) throw new InvalidFluxEvent(name, `is longer than ${o.max} characters`);
  if (!o.controls && !NO_CONTROL.test(v)) throw new InvalidFluxEvent(name, 'contains control characters');
  if (o.pattern && v !== '' && !o.pattern.test(v)) {
    throw new InvalidFluxEvent(name, `${JSON.stringify(v)} is not valid`);
  }
  return v;
}

/** Cuts at a code point boundary and says so, for logs and Events. */
function truncate(s: string, max: number): string {
  if (s.length <= max) return s;
  const mark = '…';
  let end = max - mark.length;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--; // do not split a surrogate pair
  return s.slice(0, end) + mark;
}

/** The changed objects an apply or prune message lists; lines of any other form are not changes. */
function changesOf(message: string): FluxChange[] {
  const out: FluxChange[] = [];
  for (const line of message.split('\n')) {
    if (line.length > MAX_CHANGE_LINE) continue;
    const m = CHANGE_LINE.exec(line);
    if (!m) continue;
    const [, kind = '', namespace = '', name = '', action = ''] = m;
    // Names of every kind we act on are DNS-1123 subdomains; a line whose name is not one (an RBAC
    // "system:..." name, or anything forged) names nothing we could reload.
    if (name.length > 253 || !SUBDOMAIN.test(name)) continue;
    if (out.length === MAX_CHANGES) {
      throw new InvalidFluxEvent('message', `lists more than ${MAX_CHANGES} changed objects`);
    }
    out.push(
      Object.freeze({ kind, group: WELL_KNOWN_GROUPS.get(kind) ?? UNKNOWN_GROUP, namespace, name, action }),
    );
  }
  return out;
}

const metadataField = (key: string) => `metadata[${JSON.stringify(truncate(key, 64))}]`;

function metadataOf(v: unknown): Json {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new InvalidFluxEvent('metadata', `must be an object, got ${kindOf(v)}`);
  const keys = Object.keys(v);
  if (keys.length > MAX_METADATA_KEYS) {
    throw new InvalidFluxEvent('metadata', `has more than ${MAX_METADATA_KEYS} keys`);
  }
  for (const k of keys) {
    // Go unmarshals it into map[string]string: notification-controller never sends anything else.
    if (typeof v[k] !== 'string') {
      throw new InvalidFluxEvent(metadataField(k), `must be a string, got ${kindOf(v[k])}`);
    }
  }
  return v;
}

/** The bare key notification-controller v1.9.0 forwards, else the controller's prefixed one. */
function metadataValue(meta: Json, group: string, key: string): string | undefined {
  const k = field(meta, key) !== undefined ? key : `${group}/${key}`;
  return text(field(meta, k), metadataField(k), { max: MAX_REVISION_CHARS, required: false }) || undefined;
}

/**
 * Validates a parsed JSON body. Returns the event, or `{ ignored }` for a valid event about an object
 * we do not act on (a GitRepository, a trace). Throws InvalidFluxEvent naming the first bad field.
 */
export function parseFluxEvent(body: unknown): FluxEvent | { ignored: string } {
  if (!isObject(body)) throw new InvalidFluxEvent('(body)', `must be a JSON object, got ${kindOf(body)}`);
  const ref = field(body, 'involvedObject');
  if (!isObject(ref)) {
    throw new InvalidFluxEvent('involvedObject', `must be an object, got ${kindOf(ref)}`);
  }
  const kind = text(field(ref, 'kind'), 'involvedObject.kind', {
    max: 63,
    required: true,
    nonEmpty: true,
    pattern: KIND,
  }) as string;
  const apiVersion = text(field(ref, 'apiVersion'), 'involvedObject.apiVersion', {
    max: 253 + 1 + 63,
    required: false,
    pattern: API_VERSION,
  });
  const namespace = text(field(ref, 'namespace'), 'involvedObject.namespace', {
    max: 63,
    required: true,
    nonEmpty: true,
    pattern: LABEL,
  }) as string;
  const name = text(field(ref, 'name'), 'involvedObject.name', {
    max: 253,
    required: true,
    nonEmpty: true,
    pattern: SUBDOMAIN,
  }) as string;
  const severity = text(field(body, 'severity'), 'severity', { max: 16, required: true }) as string;
  if (severity !== 'info' && severity !== 'error' && severity !== 'trace') {
    throw new InvalidFluxEvent('severity', 'must be one of info, error, trace');
  }
  const timestamp = text(field(body, 'timestamp'), 'timestamp', {
    max: 64,
    required: true,
    nonEmpty: true,
  }) as string;
  if (!RFC3339.test(timestamp) || Number.isNaN(Date.parse(timestamp))) {
    throw new InvalidFluxEvent('timestamp', `${JSON.stringify(timestamp)} is not an RFC 3339 time`);
  }
  const reason = text(field(body, 'reason'), 'reason', {
    max: 256,
    required: true,
    nonEmpty: true,
  }) as string;
  // Free text with newlines; the body limit bounds it (Flux's own bound, 39,000, is not enforced).
  const message = text(field(body, 'message'), 'message', {
    max: Number.MAX_SAFE_INTEGER,
    required: true,
    controls: true,
  }) as string;
  const meta = metadataOf(field(body, 'metadata'));
  text(field(body, 'reportingController'), 'reportingController', { max: 253, required: false });

  const group = apiVersion?.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
  const ours = Object.hasOwn(FLUX_OBJECT_GROUPS, kind)
    ? FLUX_OBJECT_GROUPS[kind as FluxObjectRef['kind']]
    : undefined;
  if (ours === undefined)
    return Object.freeze({ ignored: `a ${kind} is not a Kustomization or HelmRelease` });
  if (apiVersion !== undefined && group !== ours) {
    return Object.freeze({ ignored: `a ${kind} of ${apiVersion}, not of ${ours}` });
  }
  if (severity === 'trace') return Object.freeze({ ignored: 'a trace event' });

  const revision = metadataValue(meta, ours, 'revision');
  const originRevision = metadataValue(meta, ours, 'originRevision');
  // helm-controller's messages name a release and a chart, never objects.
  const changes = kind === 'Kustomization' ? changesOf(message) : [];
  return Object.freeze({
    object: Object.freeze({ kind: kind as FluxObjectRef['kind'], namespace, name }),
    severity,
    reason,
    message: truncate(message, MAX_MESSAGE_CHARS),
    ...(revision !== undefined ? { revision } : {}),
    ...(originRevision !== undefined ? { originRevision } : {}),
    timestamp,
    changes: Object.freeze(changes) as FluxChange[],
  });
}
