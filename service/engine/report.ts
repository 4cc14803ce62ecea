// How the reconciler names a workload and a config in its logs and Events.

import { KEYS } from '../core/annotations.ts';
import { REQUEST } from '../core/plan.ts';
import { apiVersionOf, type EventReason } from '../kube/events.ts';
import type { TrackedWorkload } from '../state.ts';
import type { EventSink } from './deps.ts';

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
