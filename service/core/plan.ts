// Decides, for one workload, what it currently "sees" of its configs and whether that differs
// from what was last applied (the ledger). Pure: the caches and the ledger are passed in.
//
// A workload's watched set maps configId → usage digest for every config that, by its
// annotations, should reload it (plus the manual reload request, if any). Comparing that set
// with the ledger's gives level-triggered decisions: a restart misses nothing and repeats nothing.
import { createHash } from 'node:crypto';
import {
  type AnnotationGlobals,
  CONFIG_KINDS,
  decide,
  KEYS,
  type ParsedWorkloadPolicy,
  rulesFor,
} from './annotations.ts';
import { MISSING, UNSEEN, usageDigest } from './config-hash.ts';
import type { ConfigRecord, WorkloadRecord } from './records.ts';
import { type ConfigRef, type ConfigUse, configId, configRefOf } from './types.ts';

/** Pseudo-config carrying the value of gitops-reloader.io/reload-requested-at. */
export const REQUEST = 'request';

export interface ConfigLookup {
  get(ref: ConfigRef): ConfigRecord | undefined;
  /** Every config of a kind in a namespace (only consulted for workloads with named lists). */
  inNamespace(namespace: string, kind: ConfigRef['kind']): Iterable<ConfigRecord>;
}

export interface WatchedSet {
  digests: Record<string, string>;
  /** configId → why it is watched (the rule that matched), for plans and Events. */
  reasons: Record<string, string>;
  /** Referenced configs that do not reload this workload, with the reason. */
  skipped: Record<string, string>;
  /** Bad annotations on configs (reported as Events on the workload). */
  problems: string[];
  /** The configIds of `digests` watched only because a named list names them (the template does not use them). */
  unreferenced: string[];
}

/**
 * `applied` (the ledger's record, when there is one) lets a named config the template does not use be
 * seen as deleted: it is gone from the namespace, so only the record still names it. It then counts
 * as MISSING, like a deleted referenced config, and a deletion reloads only with --reload-on-delete
 * (as in Reloader, whose delete handler reloads every workload naming the config).
 */
export function watchedSet(
  w: WorkloadRecord,
  parsed: ParsedWorkloadPolicy,
  configs: ConfigLookup,
  globals: AnnotationGlobals,
  applied?: Readonly<Record<string, string>>,
): WatchedSet {
  const out: WatchedSet = { digests: {}, reasons: {}, skipped: {}, problems: [], unreferenced: [] };
  const consider = (use: ConfigUse, referenced: boolean) => {
    const rec = configs.get(use.config);
    // A SecretProviderClass has content only once a pod's mount reported object versions (and only
    // with --enable-csi-integration). Until then it is not watched: the first mount is not a change.
    if (use.config.kind === 'SecretProviderClass' && rec === undefined) return;
    const d = decide(parsed.policy, { ref: use.config, annotations: rec?.annotations, referenced }, globals);
    const id = configId(use.config);
    if (d.problem) out.problems.push(d.problem);
    if (d.reload) {
      out.digests[id] = usageDigest(use, rec?.digest);
      out.reasons[id] = d.reason;
    } else if (referenced) {
      out.skipped[id] = d.reason;
    }
  };
  const referenced = new Set<string>();
  for (const use of w.uses) {
    referenced.add(configId(use.config));
    consider(use, true);
  }
  // Named entries reload even configs the template does not reference (as Reloader does).
  for (const kind of CONFIG_KINDS) {
    const rules = rulesFor(parsed.policy, kind);
    if (rules.named.every((n) => n.list.entries.length === 0)) continue;
    for (const rec of configs.inNamespace(w.ref.namespace, kind)) {
      if (referenced.has(configId(rec.ref))) continue;
      consider({ config: rec.ref, keys: 'all', optional: true }, false);
      if (Object.hasOwn(out.digests, configId(rec.ref))) out.unreferenced.push(configId(rec.ref));
    }
  }
  // A named config deleted since it was recorded: MISSING once (a record of MISSING is not kept up).
  for (const [id, digest] of Object.entries(applied ?? {})) {
    if (id === REQUEST || digest === MISSING || referenced.has(id) || Object.hasOwn(out.digests, id))
      continue;
    const ref = configRefOf(id);
    if (ref.namespace !== w.ref.namespace || ref.kind === 'SecretProviderClass') continue;
    if (configs.get(ref) !== undefined) continue; // present, and not watched: no longer named
    const d = decide(parsed.policy, { ref, annotations: undefined, referenced: false }, globals);
    if (d.rule !== 'named') continue;
    out.digests[id] = MISSING;
    out.reasons[id] = `${d.reason}; deleted`;
    out.unreferenced.push(id);
  }
  const request = w.annotations[KEYS.reloadRequestedAt];
  if (request !== undefined && request !== '') {
    out.digests[REQUEST] = requestDigest(request);
    out.reasons[REQUEST] = `${KEYS.reloadRequestedAt}=${request}`;
  }
  return out;
}

/** The longest reload request kept as it is in the ledger (a longer one is kept as its SHA-256). */
const MAX_REQUEST_CHARS = 256;

/**
 * What the ledger records of a reload request: the annotation's value as written (a time, usually),
 * or, for a value the ledger cannot hold as a line of text (control characters, very long), its
 * SHA-256. Only equality is ever asked of it.
 */
export function requestDigest(value: string): string {
  const printable = ![...value].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);
  if (printable && value.length <= MAX_REQUEST_CHARS) return value;
  return `sha256:${createHash('sha256').update(value, 'utf8').digest('hex')}`;
}

export type Verdict =
  | { kind: 'baseline' }
  | { kind: 'reload'; changed: string[] }
  | {
      kind: 'rebaseline';
      added: string[];
      removed: string[];
      /** What to record: the current set, but deleted configs keep their last applied digest. */
      record: Record<string, string>;
    }
  | { kind: 'none'; deleted: string[] };

export interface VerdictOptions {
  /**
   * --reload-on-delete: a config that was deleted is a change. Off (the default, as in Reloader): a
   * deletion changes nothing the pods run, so it neither reloads nor is recorded; the config's next
   * content is compared with the digest last applied.
   */
  reloadOnDelete?: boolean;
  /**
   * Configs whose first appearance in the set is a change, not a new baseline: named configs the
   * template does not use, just created, under --reload-on-create (Reloader's create handler).
   */
  created?: readonly string[];
}

/**
 * Compares what the workload sees now with what was last applied.
 * - never recorded → baseline (a fresh install or a new workload restarts nothing);
 * - a watched config's digest differs → reload (a deletion only with reloadOnDelete);
 * - a new reload request → reload;
 * - only the set changed (a config newly referenced or dropped, e.g. with a template change,
 *   which rolls the pods by itself) → record the new set without restarting.
 */
export function verdict(
  current: Record<string, string>,
  applied: Record<string, string> | undefined,
  opts: VerdictOptions = {},
): Verdict {
  if (applied === undefined) {
    // A workload not tracked until a config it names was created (it named only missing ones).
    const created = (opts.created ?? []).filter((id) => Object.hasOwn(current, id));
    return created.length > 0 ? { kind: 'reload', changed: [...created].sort() } : { kind: 'baseline' };
  }
  const changed: string[] = [];
  const added: string[] = [];
  const deleted: string[] = [];
  for (const [id, digest] of Object.entries(current)) {
    if (!Object.hasOwn(applied, id)) {
      if (id === REQUEST || opts.created?.includes(id)) changed.push(id);
      else added.push(id);
    } else if (applied[id] !== digest) {
      if (digest === MISSING && !opts.reloadOnDelete) deleted.push(id);
      else changed.push(id);
    }
  }
  const removed = Object.keys(applied).filter((id) => !Object.hasOwn(current, id));
  if (changed.length > 0) return { kind: 'reload', changed: changed.sort() };
  if (added.length > 0 || removed.length > 0) {
    return {
      kind: 'rebaseline',
      added: added.sort(),
      removed: removed.sort(),
      record: recordable(current, applied, opts),
    };
  }
  return { kind: 'none', deleted: deleted.sort() };
}

/**
 * What to record for a workload whose pods were not replaced: the current set, except that (unless
 * reloadOnDelete) a deleted config keeps the digest last applied, since the pods still run that.
 */
export function recordable(
  current: Record<string, string>,
  applied: Record<string, string> | undefined,
  opts: VerdictOptions = {},
): Record<string, string> {
  const record = { ...current };
  if (opts.reloadOnDelete || !applied) return record;
  for (const [id, digest] of Object.entries(current)) {
    if (digest === MISSING && Object.hasOwn(applied, id)) record[id] = applied[id] as string;
  }
  return record;
}

/** A workload takes part when something could reload it, or when the ledger already knows it. */
export function isTracked(set: WatchedSet): boolean {
  return Object.keys(set.digests).length > 0;
}

/**
 * The record of a workload that has no ledger entry yet, for a reload of `changed`: its current digests,
 * except that each changed config is UNSEEN (its pods have not read it), so the reload stays due for
 * a batch that comes before it completes (a workload created while the service was down).
 */
export function firstSeenRecord(
  set: Record<string, string>,
  changed: readonly string[],
): Record<string, string> {
  return { ...set, ...Object.fromEntries(changed.map((id) => [id, UNSEEN])) };
}
