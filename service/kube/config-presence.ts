// Whether the configs a workload's pods need exist now (core/needed-configs.ts decides which those
// are). The watch caches answer when they hold every config of the kind; with
// --resource-label-selector they hold only the labelled ones, so a config missing from the cache is
// looked up once by name before a reload is held for it. A kind not watched at all
// (--ignore-resources) is not judged: the service may have no right to read it.
import { missingNeeded } from '../core/needed-configs.ts';
import type { ConfigKind, ConfigRef, ConfigUse } from '../core/types.ts';
import type { ClusterAccess } from './access.ts';
import { CONFIG_RESOURCES, collectionPath } from './resources.ts';
import { getJson } from './watch-http.ts';

export interface PresenceOptions {
  kc: ClusterAccess;
  /** Is this config in the watch cache? */
  cached(config: ConfigRef): boolean;
  /** --ignore-resources: config kinds (by plural) not watched at all. */
  ignoreResources: readonly string[];
  /** True when the caches hold only some configs (--resource-label-selector). */
  partialCache: boolean;
  signal: AbortSignal;
}

/** The needed configs that do not exist. Throws when a lookup by name fails. */
export async function missingNeededConfigs(
  uses: readonly ConfigUse[],
  o: PresenceOptions,
): Promise<ConfigRef[]> {
  const unwatched = CONFIG_RESOURCES.filter((r) => o.ignoreResources.includes(r.plural)).map((r) => r.kind);
  const suspects = missingNeeded(uses, (c) => (unwatched as ConfigKind[]).includes(c.kind) || o.cached(c));
  if (!o.partialCache) return suspects;
  const missing: ConfigRef[] = [];
  for (const c of suspects) if (!(await existsByName(o.kc, c, o.signal))) missing.push(c);
  return missing;
}

/** One LIST by name (list is the right the service has on configs; get may not be granted). */
async function existsByName(kc: ClusterAccess, c: ConfigRef, signal: AbortSignal): Promise<boolean> {
  const resource = CONFIG_RESOURCES.find((r) => r.kind === c.kind);
  if (!resource) return true;
  const q = new URLSearchParams({ fieldSelector: `metadata.name=${c.name}`, limit: '1' });
  const list = (await getJson(kc, `${collectionPath(resource, c.namespace)}?${q}`, signal, 10_000)) as {
    items?: unknown[];
  };
  return (list.items?.length ?? 0) > 0;
}
