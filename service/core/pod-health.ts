// Whether a workload's pods are healthy after its reload: what a progressive reload's wave waits for
// before the next one starts (core/waves.ts). Pure: the pods are read by the strategies' adapter.

export interface PodHealthFacts {
  name: string;
  createdMs: number;
  ready: boolean;
  /** The sum of its containers' restart counts. */
  restarts: number;
  terminating: boolean;
  /**
   * Its containers all run (a pod still pulling its image or unscheduled has not started: whether it
   * becomes Ready says nothing yet). Absent: unknown, taken as started.
   */
  started?: boolean;
}

/** Why a workload's pods are not healthy, and which pods (the names, at most MAX_UNHEALTHY_PODS). */
export interface Unhealthy {
  why: string;
  pods: string[];
  /** A replacement restarted a container: it crashed, which no wait mends (not Ready may be a slow start). */
  restarted: boolean;
}

/** The pods an Unhealthy names at most: a status line stays short for a large workload. */
export const MAX_UNHEALTHY_PODS = 20;

/**
 * Why the pods are not healthy, or undefined when they are: every pod that is not being deleted is
 * Ready, and no pod created since `sinceMs` (a replacement) has restarted a container (a crash loop
 * can be Ready between its crashes).
 */
export function unhealthy(pods: readonly PodHealthFacts[], sinceMs: number): Unhealthy | undefined {
  const live = pods.filter((p) => !p.terminating);
  const notReady = live.filter((p) => !p.ready).map((p) => p.name);
  const restarted = live.filter((p) => p.createdMs >= sinceMs && p.restarts > 0);
  const why: string[] = [];
  if (notReady.length > 0) why.push(`not Ready: ${names(notReady)}`);
  if (restarted.length > 0)
    why.push(`restarted: ${names(restarted.map((p) => `${p.name} (${p.restarts}×)`))}`);
  if (why.length === 0) return undefined;
  const failing = [...new Set([...notReady, ...restarted.map((p) => p.name)])].sort();
  return {
    why: why.join('; '),
    pods: failing.slice(0, MAX_UNHEALTHY_PODS),
    restarted: restarted.length > 0,
  };
}

/** What a running reload's new pods say so far (see replacementsFailed). */
export interface ReplacementsVerdict {
  failed?: Unhealthy;
  /** When to look again, by the clock: the earliest a started pod not Ready reaches its grace. */
  againAt?: number;
}

/**
 * Whether the pods a running reload created (since `sinceMs`) already failed: one restarted a
 * container, or one has run for `graceMs` (the settle time) without becoming Ready. Only the reload's
 * own pods count: pods that were there before it say nothing of the change (docs/progressive-reloads.md,
 * "What is the config's fault"). A pod that has not started (an image pull, a node to find) is not
 * judged here; the reload's deadline judges it.
 */
export function replacementsFailed(
  pods: readonly PodHealthFacts[],
  sinceMs: number,
  nowMs: number,
  graceMs: number,
): ReplacementsVerdict {
  const since = Math.floor(sinceMs / 1_000) * 1_000; // creation times are whole seconds
  const mine = pods.filter((p) => !p.terminating && p.createdMs >= since);
  const restarted = mine.filter((p) => p.restarts > 0);
  const waiting = mine.filter((p) => !p.ready && p.started !== false && p.restarts === 0);
  // A creationTimestamp names its second: a pod counts from that second's end, never longer than it ran.
  const late = waiting.filter((p) => nowMs - (p.createdMs + 1_000) >= graceMs);
  const failing = [...restarted, ...late];
  if (failing.length > 0) {
    const why: string[] = [];
    if (late.length > 0) why.push(`not Ready: ${names(late.map((p) => p.name))}`);
    if (restarted.length > 0)
      why.push(`restarted: ${names(restarted.map((p) => `${p.name} (${p.restarts}×)`))}`);
    return {
      failed: {
        why: why.join('; '),
        pods: failing
          .map((p) => p.name)
          .sort()
          .slice(0, MAX_UNHEALTHY_PODS),
        restarted: restarted.length > 0,
      },
    };
  }
  const next = Math.min(...waiting.map((p) => p.createdMs + 1_000 + graceMs));
  return Number.isFinite(next) ? { againAt: next } : {};
}

/** What a workload's own status says of it before a change reaches it (see notJudgedAtAdmission). */
export interface AdmissionStatus {
  kind: string;
  generation: number;
  /** spec.replicas (undefined for kinds without). */
  replicas?: number;
  status: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    readyReplicas?: number;
    currentRevision?: string;
    updateRevision?: string;
  };
}

/**
 * Why a workload's pods, as its status shows them when a change reaches it, cannot be judged for that
 * change: its own rollout is under way, or some of its pods are already not Ready (a crash loop, an
 * image that does not pull). Then a pod not Ready after its reload is not the config's fault: the
 * member is excused at admission, and its place in the wave goes to the next workload. Undefined when
 * the baseline is healthy (every pod Ready, no rollout), so that any pod not Ready later is the
 * change's. Deployments and StatefulSets only: other kinds keep being judged as before.
 */
export function notJudgedAtAdmission(w: AdmissionStatus): string | undefined {
  if (w.kind !== 'Deployment' && w.kind !== 'StatefulSet') return undefined;
  const s = w.status;
  const desired = w.replicas ?? 1;
  if (desired === 0) return undefined;
  if ((s.observedGeneration ?? 0) < w.generation)
    return 'its own rollout was under way when the change came (a new spec not yet observed)';
  const rolling =
    w.kind === 'StatefulSet'
      ? s.updateRevision !== undefined && s.currentRevision !== s.updateRevision
      : (s.updatedReplicas ?? 0) < desired || (s.replicas ?? 0) > (s.updatedReplicas ?? 0);
  if (rolling)
    return `its own rollout was under way when the change came (${s.updatedReplicas ?? 0} of ${desired} pods updated)`;
  const ready = s.readyReplicas ?? 0;
  if (ready < desired)
    return `${desired - ready} of ${desired} pods were not Ready before the change reached it`;
  return undefined;
}

/** At most three names, and how many more: an Event message stays short for a large workload. */
function names(xs: readonly string[]): string {
  const more = xs.length - 3;
  return xs.slice(0, 3).join(', ') + (more > 0 ? ` and ${more} more` : '');
}
