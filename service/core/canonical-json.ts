// JSON of a value as its meaning, not its spelling: object keys sorted, and null values and empty
// objects left out. Writers of the same pod template spell it differently: the API server keeps a
// custom resource's keys in its last writer's order, and a controller that updates a Rollout
// through its Go types adds `resources: {}` and `creationTimestamp: null`, which the next Argo CD
// apply removes again. Hashing plain JSON.stringify saw those as template changes.

function prune(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(prune);
  if (v === null || typeof v !== 'object') return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    const p = prune(x);
    if (p === null || p === undefined) continue;
    if (typeof p === 'object' && !Array.isArray(p) && Object.keys(p).length === 0) continue;
    out[k] = p;
  }
  return out;
}

export function canonicalJson(value: unknown): string {
  return JSON.stringify(prune(value)) ?? 'null';
}
