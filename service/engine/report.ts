// How the reconciler names a workload and a config in its logs and Events.

import { KEYS } from '../core/annotations.ts';
import { REQUEST } from '../core/plan.ts';
import { type ConfigRecord, compareResourceVersions } from '../core/records.ts';
import { apiVersionOf, type EventReason } from '../kube/events.ts';
import type { ClusterState, TrackedWorkload } from '../state.ts';
import type { EventSink, ReconcilerDeps } from './deps.ts';

export function fields(t: TrackedWorkload) {
  return { workload: `${t.rec.ref.kind}/${t.rec.ref.name}`, namespace: t.rec.ref.namespace };
}

/** "ConfigMap/ns/app" → "ConfigMap/app": Events sit on the workload, so the namespace is implied. */
export function display(id: string): string {
  if (id === REQUEST) return KEYS.reloadRequestedAt;
  const [kind, , ...name] = id.split('/');
  return name.length > 0 ? `${kind}/${name.join('/')}` : id;
}

/** An Event on the workload itself. */
export function emitOn(events: EventSink) {
  return async (
    t: TrackedWorkload,
    reason: EventReason,
    message: string,
    type: 'Normal' | 'Warning' = 'Normal',
  ) => {
    const r = t.rec.ref;
    await events.emit(
      { apiVersion: apiVersionOf(r.kind), kind: r.kind, namespace: r.namespace, name: r.name, uid: r.uid },
      reason,
      message,
      type,
    );
  };
}

/** Says once what the workload's reload annotations mean, or why they are not acted on. */
export function reportPolicy(
  d: Pick<ReconcilerDeps, 'log' | 'events'>,
  t: TrackedWorkload,
  old?: TrackedWorkload,
): void {
  const { problems, warnings, notes } = t.parsed;
  const event = emitOn(d.events);
  if (notes.length > 0 && notes.join() !== old?.parsed.notes.join()) {
    d.log.info({ ...fields(t), notes }, 'Reloader annotation read with our meaning');
    void event(t, 'ReloadAnnotationMapped', notes.join('; '));
  }
  if (problems.length > 0 && problems.join() !== old?.parsed.problems.join()) {
    d.log.warn({ ...fields(t), problems }, 'invalid reload annotations; workload skipped');
    void event(t, 'ReloadConfigInvalid', `skipped: ${problems.join('; ')}`, 'Warning');
  }
  if (warnings.length > 0 && warnings.join() !== old?.parsed.warnings.join()) {
    d.log.warn({ ...fields(t), warnings }, 'reload annotations not acted on');
    void event(t, 'ReloadSkipped', `annotations not acted on: ${warnings.join('; ')}`, 'Warning');
  }
}

/**
 * Reloader's reconcile metric for one config event: call the result with how handling it ended.
 * Reloader's resource names: a SecretProviderClass changes through its pod statuses.
 */
export function reconciledTimer(
  d: Pick<ReconcilerDeps, 'metrics'>,
  old: ConfigRecord | undefined,
  now: ConfigRecord | undefined,
): (result: 'success' | 'skipped' | 'error') => void {
  const rec = (now ?? old) as ConfigRecord;
  const eventType = !old ? 'add' : !now ? 'delete' : 'update';
  const resource = {
    ConfigMap: 'configmaps',
    Secret: 'secrets',
    SecretProviderClass: 'secretproviderclasspodstatuses',
  }[rec.ref.kind];
  const started = performance.now();
  return (result) =>
    d.metrics?.reloader.reconciled(eventType, resource, result, (performance.now() - started) / 1000);
}

/** The newest resourceVersion among these configs (deleted ones and pseudo-configs have none). */
export function changeRV(state: Pick<ClusterState, 'configs'>, ids: string[]): string {
  let max = '0';
  for (const id of ids) {
    const rv = state.configs.get(id)?.resourceVersion;
    if (rv && (compareResourceVersions(rv, max) ?? 0) > 0) max = rv;
  }
  return max;
}

/**
 * The resourceVersion of each of these configs as the cache holds it now: what a decision about a
 * batch judged, so a log line names the changes it decided about. Deleted configs and pseudo-configs
 * (a reload request, a new workload) have none.
 */
export function versionsOf(
  state: Pick<ClusterState, 'configs'>,
  ids: readonly string[],
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const id of ids) {
    const rv = state.configs.get(id)?.resourceVersion;
    if (rv) out[id] = rv;
  }
  return out;
}
