// Stakater Reloader v1.4's metric families (internal/pkg/metrics/prometheus.go), with its names,
// types, label names and buckets, fed from what gitops-reloader does, so dashboards and alerts built
// on Reloader keep working after a switch. docs/migrating-from-reloader.md says what each counts here.
// Every label value comes from a fixed set: an unknown value is counted as "other", never passed on.
// Only reloader_reload_executed_total_by_namespace carries a namespace, and only when enabled
// (--metrics-count-by-namespace, or Reloader's METRICS_COUNT_BY_NAMESPACE=enabled), as in Reloader.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Why a config event or a change led to no reload (reloader_skipped_total{reason}). */
export const SKIP_REASONS = [
  // Reloader's own values.
  'no_data_change', // the data the workloads read is unchanged (a label edit, or keys they do not use)
  'ignored_or_not_selected', // the namespace is ignored or not selected
  'no_match', // no workload uses the config
  // Ours.
  'dry_run',
  'unsupported', // the strategy cannot act on this workload (e.g. a bare pod)
] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/** reloader_errors_total{type}. */
export const ERROR_TYPES = [
  'handler_error', // handling a config event failed
  'update_workload', // a reload failed
  'webhook_send', // a --webhook-url POST failed after its retries
  'watch', // a watch failed (it recovers by itself)
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

export const EVENT_TYPES = ['add', 'update', 'delete'] as const;
export type EventType = (typeof EVENT_TYPES)[number];
export const EVENT_RESOURCES = [
  'configmaps',
  'secrets',
  'namespaces',
  'secretproviderclasspodstatuses',
] as const;
export const RECONCILE_RESULTS = ['success', 'error', 'skipped'] as const;
export type ReconcileResult = (typeof RECONCILE_RESULTS)[number];
export const ACTION_RESULTS = ['success', 'error'] as const;
export const KINDS = ['Deployment', 'StatefulSet', 'DaemonSet', 'CronJob', 'Job', 'Rollout'] as const;
const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

// Reloader's buckets, so histogram_quantile over both gives comparable answers.
const RECONCILE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const ACTION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const QUEUE_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const REST_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30];

/** Reloader v1.4's families, as it declares them: name → [type, label names]. For tests and docs. */
export const RELOADER_FAMILIES: Record<string, [string, string[]]> = {
  reloader_reload_executed_total: ['counter', ['success']],
  reloader_reconcile_total: ['counter', ['result']],
  reloader_reconcile_duration_seconds: ['histogram', ['result']],
  reloader_action_total: ['counter', ['workload_kind', 'result']],
  reloader_action_latency_seconds: ['histogram', ['workload_kind']],
  reloader_skipped_total: ['counter', ['reason']],
  reloader_workqueue_depth: ['gauge', []],
  reloader_workqueue_adds_total: ['counter', []],
  reloader_workqueue_latency_seconds: ['histogram', []],
  reloader_errors_total: ['counter', ['type']],
  reloader_retries_total: ['counter', []],
  reloader_events_received_total: ['counter', ['event_type', 'resource_type']],
  reloader_events_processed_total: ['counter', ['event_type', 'resource_type', 'result']],
  reloader_workloads_scanned_total: ['counter', ['kind']],
  reloader_workloads_matched_total: ['counter', ['kind']],
  rest_client_requests_total: ['counter', ['code', 'method', 'host']],
  rest_client_request_duration_seconds: ['histogram', ['verb', 'host']],
};

const oneOf = <T extends string>(v: string, allowed: readonly T[]): T | 'other' =>
  (allowed as readonly string[]).includes(v) ? (v as T) : 'other';

export interface ReloaderMetricsOptions {
  registers: Registry[];
  countByNamespace: boolean;
}

export class ReloaderMetrics {
  readonly #executed: Counter<'success'>;
  readonly #byNamespace: Counter<'success' | 'namespace'> | undefined;
  readonly #reconciles: Counter<'result'>;
  readonly #reconcileDuration: Histogram<'result'>;
  readonly #actions: Counter<'workload_kind' | 'result'>;
  readonly #actionLatency: Histogram<'workload_kind'>;
  readonly #skipped: Counter<'reason'>;
  readonly #errors: Counter<'type'>;
  readonly #retries: Counter;
  readonly #queueAdds: Counter;
  readonly #queueLatency: Histogram;
  readonly #received: Counter<'event_type' | 'resource_type'>;
  readonly #processed: Counter<'event_type' | 'resource_type' | 'result'>;
  readonly #scanned: Counter<'kind'>;
  readonly #matched: Counter<'kind'>;
  readonly #restRequests: Counter<'code' | 'method' | 'host'>;
  readonly #restDuration: Histogram<'verb' | 'host'>;
  #depth: () => number = () => 0;

  constructor(o: ReloaderMetricsOptions) {
    const registers = o.registers;
    this.#executed = new Counter({
      name: 'reloader_reload_executed_total',
      help: 'Counter of reloads executed by Reloader. Here: reload attempts that succeeded or failed, by success.',
      labelNames: ['success'],
      registers,
    });
    if (o.countByNamespace) {
      this.#byNamespace = new Counter({
        name: 'reloader_reload_executed_total_by_namespace',
        help: 'Counter of reloads executed by Reloader by namespace.',
        labelNames: ['success', 'namespace'],
        registers,
      });
    }
    this.#reconciles = new Counter({
      name: 'reloader_reconcile_total',
      help: 'Total number of reconcile/handler invocations by result. Here: ConfigMap/Secret events handled.',
      labelNames: ['result'],
      registers,
    });
    this.#reconcileDuration = new Histogram({
      name: 'reloader_reconcile_duration_seconds',
      help: 'Time spent in reconcile/handler in seconds. Here: deciding and queueing, not the restart itself.',
      labelNames: ['result'],
      buckets: RECONCILE_BUCKETS,
      registers,
    });
    this.#actions = new Counter({
      name: 'reloader_action_total',
      help: 'Total number of reload actions by workload kind and result.',
      labelNames: ['workload_kind', 'result'],
      registers,
    });
    this.#actionLatency = new Histogram({
      name: 'reloader_action_latency_seconds',
      help: 'Time from event received to action applied in seconds. Here: first observed change to the reload starting (debounce included).',
      labelNames: ['workload_kind'],
      buckets: ACTION_BUCKETS,
      registers,
    });
    this.#skipped = new Counter({
      name: 'reloader_skipped_total',
      help: 'Total number of skipped operations by reason.',
      labelNames: ['reason'],
      registers,
    });
    new Gauge({
      name: 'reloader_workqueue_depth',
      help: 'Current depth of the work queue. Here: reloads waiting to run.',
      registers,
      collect: (() => {
        const depth = () => this.#depth();
        return function (this: Gauge) {
          this.set(depth());
        };
      })(),
    });
    this.#queueAdds = new Counter({
      name: 'reloader_workqueue_adds_total',
      help: 'Total number of items added to the work queue.',
      registers,
    });
    this.#queueLatency = new Histogram({
      name: 'reloader_workqueue_latency_seconds',
      help: 'Time spent in the work queue in seconds.',
      buckets: QUEUE_BUCKETS,
      registers,
    });
    this.#errors = new Counter({
      name: 'reloader_errors_total',
      help: 'Total number of errors by type.',
      labelNames: ['type'],
      registers,
    });
    this.#retries = new Counter({
      name: 'reloader_retries_total',
      help: 'Total number of retry attempts (failed reloads and webhook POSTs retried).',
      registers,
    });
    this.#received = new Counter({
      name: 'reloader_events_received_total',
      help: 'Total number of events received by type and resource.',
      labelNames: ['event_type', 'resource_type'],
      registers,
    });
    this.#processed = new Counter({
      name: 'reloader_events_processed_total',
      help: 'Total number of events processed by type, resource, and result.',
      labelNames: ['event_type', 'resource_type', 'result'],
      registers,
    });
    this.#scanned = new Counter({
      name: 'reloader_workloads_scanned_total',
      help: 'Total number of workloads scanned by kind. Here: the workloads the index names for a changed config (no LIST).',
      labelNames: ['kind'],
      registers,
    });
    this.#matched = new Counter({
      name: 'reloader_workloads_matched_total',
      help: 'Total number of workloads matched for reload by kind.',
      labelNames: ['kind'],
      registers,
    });
    this.#restRequests = new Counter({
      name: 'rest_client_requests_total',
      help: 'Number of HTTP requests, partitioned by status code, method, and host.',
      labelNames: ['code', 'method', 'host'],
      registers,
    });
    this.#restDuration = new Histogram({
      name: 'rest_client_request_duration_seconds',
      help: 'Request latency in seconds. Broken down by verb and host.',
      labelNames: ['verb', 'host'],
      buckets: REST_BUCKETS,
      registers,
    });
    // As Reloader does, both success series exist from the start, so increase() sees the first one.
    for (const success of ['true', 'false']) this.#executed.inc({ success }, 0);
  }

  /** One reload attempt ended (success or failure; skips and interruptions are not reloads). */
  reloadExecuted(success: boolean, kind: string, namespace: string): void {
    this.#executed.inc({ success: String(success) });
    this.#byNamespace?.inc({ success: String(success), namespace });
    this.#actions.inc({ workload_kind: oneOf(kind, KINDS), result: success ? 'success' : 'error' });
  }

  /** Seconds from the first observed change to the reload starting. */
  actionLatency(kind: string, seconds: number): void {
    if (Number.isFinite(seconds))
      this.#actionLatency.observe({ workload_kind: oneOf(kind, KINDS) }, Math.max(0, seconds));
  }

  skipped(reason: SkipReason): void {
    this.#skipped.inc({ reason: oneOf(reason, SKIP_REASONS) });
  }

  error(type: ErrorType): void {
    this.#errors.inc({ type: oneOf(type, ERROR_TYPES) });
  }

  retry(): void {
    this.#retries.inc();
  }

  /** The queue of reloads: its depth is read at every scrape. Returns a function that detaches it. */
  queueDepthFrom(depth: () => number): () => void {
    this.#depth = depth;
    return () => {
      if (this.#depth === depth) this.#depth = () => 0;
    };
  }

  queueAdded(): void {
    this.#queueAdds.inc();
  }

  queueLatency(seconds: number): void {
    if (Number.isFinite(seconds)) this.#queueLatency.observe(Math.max(0, seconds));
  }

  eventReceived(eventType: EventType, resource: string): void {
    this.#received.inc({ event_type: eventType, resource_type: oneOf(resource, EVENT_RESOURCES) });
  }

  /** One config event handled: its reconcile result, time, and the processed counter. */
  reconciled(eventType: EventType, resource: string, result: ReconcileResult, seconds: number): void {
    this.#reconciles.inc({ result });
    this.#reconcileDuration.observe({ result }, Math.max(0, seconds));
    this.#processed.inc({
      event_type: eventType,
      resource_type: oneOf(resource, EVENT_RESOURCES),
      result: result === 'error' ? 'dropped' : 'success',
    });
  }

  workloadsScanned(kind: string, n = 1): void {
    this.#scanned.inc({ kind: oneOf(kind, KINDS) }, n);
  }

  workloadMatched(kind: string): void {
    this.#matched.inc({ kind: oneOf(kind, KINDS) });
  }

  /** One request to the API server: `code` is the HTTP status, or "<error>" when none came. */
  apiRequest(method: string, host: string, code: string, seconds: number): void {
    const m = oneOf(method.toUpperCase(), HTTP_METHODS);
    const c = /^[1-5]\d\d$/.test(code) ? code : '<error>';
    this.#restRequests.inc({ code: c, method: m, host });
    this.#restDuration.observe({ verb: m, host }, Math.max(0, seconds));
  }
}
