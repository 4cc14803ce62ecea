// The drift-free restart of an Argo Rollout: set spec.restartAt, the Rollout's own restart. The
// Argo Rollouts controller then evicts, one at a time, every pod created before that time, without
// running the canary or blue-green steps, and records status.restartedAt when done. spec.restartAt
// is the only field we write; the pod template is never touched.
import type { RawObject } from '../kube/watch-logic.ts';
import type { ReloadRequest, StrategyContext, StrategyResult } from './types.ts';

const ATTEMPTS = 5;

interface RolloutObject {
  metadata?: { uid?: string; resourceVersion?: string };
  spec?: { restartAt?: string };
}

/** RFC 3339 in whole seconds, as metav1.Time serialises (and as `kubectl argo rollouts restart` writes). */
export function rfc3339Seconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/**
 * The restartAt to write for a change with cutoff T at `nowMs`, or undefined when the current value
 * already covers it. Every pod created before restartAt is restarted, so a value ≥ T covers the
 * change (a value in the future, too: the controller restarts the pods when that time comes).
 * Otherwise T or now, whichever is later, in whole seconds. Pure.
 */
export function restartAtFor(
  current: string | undefined,
  cutoffMs: number,
  nowMs: number,
): string | undefined {
  const at = current === undefined ? Number.NaN : Date.parse(current);
  if (!Number.isNaN(at) && at >= cutoffMs) return undefined;
  return rfc3339Seconds(Math.max(cutoffMs, nowMs));
}

export async function restartRollout(ctx: StrategyContext, req: ReloadRequest): Promise<StrategyResult> {
  const { namespace, name } = req.workload.ref;
  const coordinates = { group: 'argoproj.io', version: 'v1alpha1', namespace, plural: 'rollouts', name };
  const controllerNote =
    'the Argo Rollouts controller restarts every pod created before it, one at a time, without the canary or blue-green steps';
  for (let attempt = 1; ; attempt++) {
    ctx.signal.throwIfAborted();
    const ro = (await ctx.custom.getNamespacedCustomObject(coordinates)) as RolloutObject;
    if (ro.metadata?.uid !== req.workload.ref.uid)
      throw new Error(`Rollout ${namespace}/${name} was replaced`);
    if (await req.templateChangedSince(ro as unknown as RawObject)) {
      // The template changed after the config: the Rollout's own update starts new pods, which read
      // the new config. A restartAt now would restart those new pods a second time.
      return {
        replaced: 0,
        notNeeded: true,
        summary: "the pod template changed after the config: the Rollout's own update replaces the pods",
      };
    }
    const current = ro.spec?.restartAt;
    const restartAt = restartAtFor(current, req.cutoffMs, Date.now());
    if (restartAt === undefined) {
      return {
        replaced: 0,
        summary: `spec.restartAt is already ${current}, which covers this change; ${controllerNote}`,
      };
    }
    try {
      // resourceVersion makes the patch conditional: a concurrent writer of restartAt is re-read, not overwritten.
      await ctx.custom.patchNamespacedCustomObject({
        ...coordinates,
        body: { metadata: { resourceVersion: ro.metadata?.resourceVersion }, spec: { restartAt } },
      });
    } catch (err) {
      if ((err as { code?: number }).code === 409 && attempt < ATTEMPTS) continue;
      throw new Error(`setting spec.restartAt on Rollout ${namespace}/${name}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    ctx.log.debug({ workload: `Rollout/${name}`, namespace, restartAt }, 'spec.restartAt set');
    return { replaced: 0, summary: `set spec.restartAt=${restartAt}; ${controllerNote}` };
  }
}
