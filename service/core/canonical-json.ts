// JSON with object keys in sorted order, so equal values give equal text whatever order a writer
// put the keys in. The API server keeps a custom resource's keys in the order its last writer sent
// them (an Argo CD apply of an unchanged Rollout reorders them), so a hash of plain JSON.stringify
// would see a template "change" where there is none.

export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}
