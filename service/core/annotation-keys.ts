// Stakater Reloader's custom annotation-key flags (--auto-annotation, --configmap-annotation, …): a
// Reloader install may read its annotations under other keys. They are translated once, where an
// object becomes a record: the custom key's value is read as Reloader's default key, and the default
// key itself is no longer read (Reloader reads only the key it was configured with). Our own
// gitops-reloader.io keys are read as always.

/** Reloader's default key → the custom key an install configured instead. */
export type AnnotationAliases = Readonly<Record<string, string>>;

/** The annotation map as the policy reads it: custom keys renamed to Reloader's defaults. */
export function withDefaultKeys(
  map: Readonly<Record<string, string>> | undefined | null,
  aliases: AnnotationAliases | undefined,
): Readonly<Record<string, string>> | undefined | null {
  if (!map || !aliases) return map;
  const entries = Object.entries(aliases);
  if (entries.length === 0) return map;
  const out: Record<string, string> = { ...map };
  for (const [def, custom] of entries) {
    delete out[def];
    const v = map[custom];
    if (v !== undefined) out[def] = v;
  }
  return out;
}

// A qualified name as Kubernetes validates annotation keys: an optional DNS-subdomain prefix and "/",
// then 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric.
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const PREFIX = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `key` is not an annotation key, or undefined. */
export function annotationKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !PREFIX.test(prefix)))
    return `its prefix "${prefix}" is not a DNS subdomain`;
  if (!NAME.test(name))
    return `"${name}" is not 1-63 characters of [A-Za-z0-9._-] starting and ending alphanumeric`;
  return undefined;
}
