// The cutoff T of the restart rule "replace every pod created before T", made safe against the
// 1-second precision of creationTimestamp and against clock skew between us and the API server.
//
// Why whole seconds: the API server stamps creationTimestamp in RFC 3339 with whole seconds
// (floored). If T carried milliseconds, a replacement created in the same second as T, but after
// it, would be stamped earlier than T, look old, and be recycled again: a restart loop. With T on a
// whole second, `floor(created) < T` holds exactly when `created < T`, so the floored stamp
// compares the same way the true creation instant does.
//
// Clock-skew assumption: T is taken from OUR clock (when we observed the change) but compared with
// stamps from the API SERVER's clock. We assume the two differ by at most `skewMarginMs`
// (default 1 s; NTP keeps real clusters well inside that). The margin is applied twice:
//  - effectiveCutoff adds it to T, so pods the server created just before the change are still
//    "old" even if our clock lags the server's;
//  - waitBeforeActingMs adds it again before the first eviction, so that even if our clock leads
//    the server's, the replacement pods are stamped at or after T and never look old themselves.
// The price of a too-large margin is small: pods created within the margin after the change are
// restarted once more, and the first eviction waits about two margins after the observation.
// If the skew can exceed the margin, raise the margin; a smaller one risks missing pods or loops.

export const DEFAULT_SKEW_MARGIN_MS = 1000;

const SECOND = 1000;

function assertFinite(name: string, v: number): void {
  if (!Number.isFinite(v)) throw new RangeError(`${name} must be a finite number of ms, got ${v}`);
}

function assertMargin(skewMarginMs: number): void {
  assertFinite('skewMarginMs', skewMarginMs);
  if (skewMarginMs < 0) throw new RangeError(`skewMarginMs must not be negative, got ${skewMarginMs}`);
}

/**
 * The cutoff for a change observed at `observedAtMs` (epoch ms, our clock): observed time plus the
 * skew margin, rounded UP to a whole second. With the default 1 s margin that is the next whole
 * second after the observation, plus one second. The result is always a multiple of 1000.
 */
export function effectiveCutoff(observedAtMs: number, skewMarginMs: number = DEFAULT_SKEW_MARGIN_MS): number {
  assertFinite('observedAtMs', observedAtMs);
  assertMargin(skewMarginMs);
  // Rounding the sum (not just the observation) keeps T on a whole second for any margin.
  return Math.ceil((observedAtMs + skewMarginMs) / SECOND) * SECOND;
}

/**
 * Whether a pod created at `creationTimestamp` predates the cutoff and so must be replaced.
 * `cutoffMs` must come from effectiveCutoff (a whole second); anything else could loop, so it throws.
 */
export function isBeforeCutoff(creationTimestamp: string | Date, cutoffMs: number): boolean {
  assertFinite('cutoffMs', cutoffMs);
  if (cutoffMs % SECOND !== 0) {
    throw new RangeError(
      `cutoffMs must be a whole second (use effectiveCutoff), got ${cutoffMs}: a sub-second cutoff ` +
        'makes replacements created in the same second look old',
    );
  }
  const created =
    typeof creationTimestamp === 'string' ? Date.parse(creationTimestamp) : creationTimestamp.getTime();
  if (Number.isNaN(created)) {
    throw new TypeError(`invalid pod creationTimestamp: ${JSON.stringify(String(creationTimestamp))}`);
  }
  return created < cutoffMs;
}

/**
 * How long the executor must wait, from `nowMs` (our clock), before its first eviction for
 * `cutoffMs`: until the wall clock has passed the cutoff by the skew margin. Evicting earlier would
 * let the controller create replacements stamped before the cutoff, which the next step would
 * count as old and evict again. 0 means act now.
 */
export function waitBeforeActingMs(
  nowMs: number,
  cutoffMs: number,
  skewMarginMs: number = DEFAULT_SKEW_MARGIN_MS,
): number {
  assertFinite('nowMs', nowMs);
  assertFinite('cutoffMs', cutoffMs);
  assertMargin(skewMarginMs);
  return Math.max(0, cutoffMs + skewMarginMs - nowMs);
}

/**
 * What makes a pod "old" for one restart: membership in `targets` (the uids of the pods that existed
 * when the restart began, persisted with the pending reload) when given, else the cutoff rule.
 * A target set needs no wait at all: a pod created after the snapshot has a uid outside it, so a
 * replacement can never look old, whatever its whole-second creationTimestamp says.
 */
export type OldPodRule =
  | { targets: ReadonlySet<string> }
  | { cutoffMs: number; nowMs: number; skewMarginMs?: number };

/** How long to wait before acting under `rule` (0: act now). */
export function waitUnderRule(rule: OldPodRule): number {
  if ('targets' in rule) return 0;
  return waitBeforeActingMs(rule.nowMs, rule.cutoffMs, rule.skewMarginMs ?? DEFAULT_SKEW_MARGIN_MS);
}

/** Whether the pod must be replaced under `rule`. */
export function isOldUnderRule(p: { uid: string; createdAt: string }, rule: OldPodRule): boolean {
  return 'targets' in rule ? rule.targets.has(p.uid) : isBeforeCutoff(p.createdAt, rule.cutoffMs);
}
