// When a rollout of a Deployment counts as finished, for ours and the native controller alike:
// every pod not being deleted is new (not one of the pods that ran before the trigger), Ready and
// not one of our surge pods, and there are `replicas` of them. Old pods are then all going (they
// have a deletionTimestamp), which is the moment the workload runs the new configuration only.
import type { PodRecord } from './pods.ts';

/** `live`: the workload's pods without a deletionTimestamp; `old`: uids of its pods before the trigger. */
export function replacedAndReady(
  live: readonly PodRecord[],
  old: ReadonlySet<string>,
  replicas: number,
): boolean {
  return live.length === replicas && live.every((p) => p.ready && !p.surge && !old.has(p.uid));
}
