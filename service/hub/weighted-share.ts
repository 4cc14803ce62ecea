// Hub mode's weighted fair share (issue 36, ADR 0043): a cluster weighs what its engine carries, its
// workloads plus its configs (at least 1), and a replica's load is the weight of the clusters it leads.
// Consistent hashing with bounded loads: each cluster goes to the first replica in its own rendezvous
// order (shares.ts rank) whose load stays within (1 + ε) × the fair load (total ÷ replicas), so a
// replica joining or leaving moves few clusters, and no replica carries much more than its part. Pure.
import { rank } from './shares.ts';

/** How far above the fair load a replica may go: (1 + ε) × total ÷ replicas. */
export const LOAD_EPSILON = 0.25;

export interface Weighed {
  id: string;
  weight: number;
}

/** A cluster's weight from what its engine knows: workloads + configs, at least 1. */
export const weightOf = (workloads: number, configs: number): number => Math.max(1, workloads + configs);

/** The most load a replica takes: (1 + ε) × the fair load, and never less than the heaviest cluster. */
export function loadCap(clusters: readonly Weighed[], replicas: number, epsilon = LOAD_EPSILON): number {
  const total = clusters.reduce((n, c) => n + c.weight, 0);
  const heaviest = clusters.reduce((m, c) => Math.max(m, c.weight), 0);
  return Math.max(heaviest, ((1 + epsilon) * total) / Math.max(1, replicas));
}

/**
 * The replica for each cluster (consistent hashing with bounded loads, in weight and
 * in number: at most ⌈clusters ÷ replicas⌉ each). A cluster stays with the live
 * replica that leads it (`current`) while that replica's load stays under loadCap(), heaviest kept
 * first; every other cluster goes to the first replica in its own rendezvous order with room, or, when
 * none has room (a cluster heavier than what is left anywhere), to the least loaded. So a replica
 * that dies moves only its own clusters, and one that joins takes only what the others carry beyond
 * the cap. Every replica computes the same from the same input.
 */
export function assign(
  clusters: readonly Weighed[],
  replicas: readonly string[],
  current: ReadonlyMap<string, string | undefined> = new Map(),
  epsilon = LOAD_EPSILON,
): Map<string, string> {
  const out = new Map<string, string>();
  if (replicas.length === 0) return out;
  const cap = loadCap(clusters, replicas.length, epsilon);
  // And in number, as before weights: at most ⌈clusters ÷ replicas⌉ each (each is an engine).
  const most = Math.ceil(clusters.length / replicas.length);
  const load = new Map(replicas.map((r) => [r, 0]));
  const count = new Map(replicas.map((r) => [r, 0]));
  const live = new Set(replicas);
  const put = (id: string, to: string, weight: number) => {
    out.set(id, to);
    load.set(to, (load.get(to) as number) + weight);
    count.set(to, (count.get(to) as number) + 1);
  };
  const room = (r: string, weight: number, within = cap) =>
    (load.get(r) as number) + weight <= within && (count.get(r) as number) < most;
  // A cluster stays where it is led up to the bound a placement itself may reach (the fair load plus the
  // heaviest cluster, when no replica had room for it): what was placed is never moved for lack of
  // room while its replica lives. When no cluster outweighs ε × the fair load, this is the cap itself.
  const total = clusters.reduce((n, c) => n + c.weight, 0);
  const heaviest = clusters.reduce((m, c) => Math.max(m, c.weight), 0);
  const keepCap = Math.max(cap, total / replicas.length + heaviest);
  const byWeight = [...clusters].sort((a, b) => b.weight - a.weight || a.id.localeCompare(b.id));
  const rest: Weighed[] = [];
  for (const c of byWeight) {
    const at = current.get(c.id);
    if (at !== undefined && live.has(at) && room(at, c.weight, keepCap)) put(c.id, at, c.weight);
    else rest.push(c);
  }
  for (const c of rest) {
    const prefs = [...replicas].sort((a, b) => {
      const ra = rank(c.id, a);
      const rb = rank(c.id, b);
      return ra === rb ? a.localeCompare(b) : ra > rb ? -1 : 1;
    });
    const open = prefs.filter((r) => (count.get(r) as number) < most);
    const to =
      prefs.find((r) => room(r, c.weight)) ??
      open.reduce((best, r) => ((load.get(r) as number) < (load.get(best) as number) ? r : best));
    put(c.id, to, c.weight);
  }
  return out;
}
