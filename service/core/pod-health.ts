// Whether a workload's pods are healthy after its reload: what a progressive reload's wave waits for
// before the next one starts (core/waves.ts). Pure: the pods are read by the strategies' adapter.

export interface PodHealthFacts {
  name: string;
  createdMs: number;
  ready: boolean;
  /** The sum of its containers' restart counts. */
  restarts: number;
  terminating: boolean;
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

/** At most three names, and how many more: an Event message stays short for a large workload. */
function names(xs: readonly string[]): string {
  const more = xs.length - 3;
  return xs.slice(0, 3).join(', ') + (more > 0 ? ` and ${more} more` : '');
}
