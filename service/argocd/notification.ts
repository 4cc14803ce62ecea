// The body our notification template (argocd-plugin/notifications) renders, and its validation.
// A malformed body is rejected with the path of the first offending field. Pure.
import { OPERATION_PHASES, type OperationPhase, type SyncedResource } from './sync-tracker.ts';
import type { AppKey } from './tracking.ts';

export const NOTIFICATION_VERSION = 1;
export const MAX_RESOURCES = 10_000;
export const MAX_REVISIONS = 100;

export interface SyncNotification {
  app: AppKey;
  phase: OperationPhase;
  startedAt: string;
  finishedAt?: string;
  revision?: string;
  revisions?: string[];
  resources: SyncedResource[];
}

export class InvalidNotification extends Error {
  override name = 'InvalidNotification';
  readonly field: string;
  constructor(field: string, message: string) {
    super(`${field}: ${message}`);
    this.field = field;
  }
}

// Kubernetes object names: an Application is a DNS subdomain, a namespace a DNS label.
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// RFC 3339 as Kubernetes writes metav1.Time (seconds, optional fraction, Z or an offset).
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
// Printable text without control characters; resource names of other kinds may hold ':' or '@'.
const TEXT = /^[^\p{Cc}]*$/u;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function text(v: unknown, field: string, o: { max: number; required: boolean; pattern?: RegExp }) {
  if (v === undefined || v === null) {
    if (o.required) throw new InvalidNotification(field, 'is required');
    return undefined;
  }
  if (typeof v !== 'string') throw new InvalidNotification(field, `must be a string, got ${kindOf(v)}`);
  if (o.required && v === '') throw new InvalidNotification(field, 'must not be empty');
  if (v.length > o.max) throw new InvalidNotification(field, `is longer than ${o.max} characters`);
  if (!TEXT.test(v)) throw new InvalidNotification(field, 'contains control characters');
  if (o.pattern && !o.pattern.test(v))
    throw new InvalidNotification(field, `${JSON.stringify(v)} is not valid`);
  return v;
}

function timestamp(v: unknown, field: string, required: boolean): string | undefined {
  const s = text(v, field, { max: 64, required });
  if (s === undefined || (s === '' && !required)) return undefined;
  if (!RFC3339.test(s) || Number.isNaN(Date.parse(s))) {
    throw new InvalidNotification(field, `${JSON.stringify(s)} is not an RFC 3339 time`);
  }
  return s;
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}

function resource(v: unknown, field: string): SyncedResource {
  if (!isObject(v)) throw new InvalidNotification(field, `must be an object, got ${kindOf(v)}`);
  const status = text(v.status, `${field}.status`, { max: 64, required: false });
  return {
    group: text(v.group, `${field}.group`, { max: 253, required: false }) ?? '',
    version: text(v.version, `${field}.version`, { max: 64, required: false }) ?? '',
    kind: text(v.kind, `${field}.kind`, { max: 253, required: true }) as string,
    namespace: text(v.namespace, `${field}.namespace`, { max: 63, required: false }) ?? '',
    name: text(v.name, `${field}.name`, { max: 253, required: true }) as string,
    ...(status !== undefined ? { status } : {}),
  };
}

/** Validates a parsed JSON body. Throws InvalidNotification naming the first bad field. */
export function parseNotification(body: unknown): SyncNotification {
  if (!isObject(body)) throw new InvalidNotification('(body)', `must be a JSON object, got ${kindOf(body)}`);
  if (body.version !== undefined && body.version !== NOTIFICATION_VERSION) {
    throw new InvalidNotification('version', `must be ${NOTIFICATION_VERSION}`);
  }
  if (!isObject(body.app)) throw new InvalidNotification('app', `must be an object, got ${kindOf(body.app)}`);
  const name = text(body.app.name, 'app.name', { max: 253, required: true, pattern: SUBDOMAIN }) as string;
  const namespace = text(body.app.namespace, 'app.namespace', {
    max: 63,
    required: true,
    pattern: LABEL,
  }) as string;
  const phase = text(body.phase, 'phase', { max: 32, required: true }) as OperationPhase;
  if (!OPERATION_PHASES.includes(phase)) {
    throw new InvalidNotification('phase', `must be one of ${OPERATION_PHASES.join(', ')}`);
  }
  const startedAt = timestamp(body.startedAt, 'startedAt', true) as string;
  const finishedAt = timestamp(body.finishedAt, 'finishedAt', false);
  const revision = text(body.revision, 'revision', { max: 1024, required: false }) || undefined;
  let revisions: string[] | undefined;
  if (body.revisions !== undefined && body.revisions !== null) {
    if (!Array.isArray(body.revisions)) {
      throw new InvalidNotification('revisions', `must be an array, got ${kindOf(body.revisions)}`);
    }
    if (body.revisions.length > MAX_REVISIONS) {
      throw new InvalidNotification('revisions', `has more than ${MAX_REVISIONS} entries`);
    }
    revisions = body.revisions.map(
      (r, i) => text(r, `revisions[${i}]`, { max: 1024, required: true }) as string,
    );
  }
  let resources: SyncedResource[] = [];
  if (body.resources !== undefined && body.resources !== null) {
    if (!Array.isArray(body.resources)) {
      throw new InvalidNotification('resources', `must be an array, got ${kindOf(body.resources)}`);
    }
    if (body.resources.length > MAX_RESOURCES) {
      throw new InvalidNotification('resources', `has more than ${MAX_RESOURCES} entries`);
    }
    resources = body.resources.map((r, i) => resource(r, `resources[${i}]`));
  }
  return {
    app: { namespace, name },
    phase,
    startedAt,
    ...(finishedAt !== undefined ? { finishedAt } : {}),
    ...(revision !== undefined ? { revision } : {}),
    ...(revisions && revisions.length > 0 ? { revisions } : {}),
    resources,
  };
}
