// Progressive reloads (docs/progressive-reloads.md): one config change that concerns many workloads reloads
// them in waves, so a bad value stops at the first wave instead of taking every workload that reads it
// to its availability floor at once. A change is one config at one digest; the workloads whose reloads
// carry it form its progression. Pure: the engine (engine/progressive.ts) keeps the timers, reads the
// pods' health and reports.
//
// The waves: the first holds `firstWave` workloads; each next one twice the one before. The second
// wave opens when every workload of the first has completed its reload and its pods stayed healthy for
// the settle time; every later wave opens when the one before it has completed (its settle still runs,
// and a failure there halts what has not started). So a good change waits one settle time in all.
// A failure halts the change: nothing more starts for it, in any workload, until a newer change of the
// config supersedes it.

export interface WavesPolicy {
  /** Workloads in the first wave (≥ 1). */
  firstWave: number;
  /**
   * How long a new change gathers its workloads before the first wave is chosen, in ms, at most: the
   * gathering ends as soon as every workload expected to carry the change has been offered.
   */
  gatherMs: number;
}

/** A config at one digest: what groups workloads into one progression. `config` is `ns/Kind/name`. */
export interface ChangeKey {
  config: string;
  digest: string;
}

export interface Candidate {
  workload: string;
  /** The changes its reload carries (the configs it changed, at the digests it would record). */
  changes: readonly ChangeKey[];
  /** The reload's cutoff: an action older than a change's progression carries a superseded digest. */
  cutoffMs: number;
  /**
   * How many workloads a config's change may concern (the engine's index of who reads it). Once that
   * many were offered, the change has gathered them all and need not wait for `gatherMs`. A count too
   * high only makes it wait; one too low lets a late workload join a later wave. Asked only while a
   * change gathers: a re-offer of every parked reload must not count the readers again each time.
   */
  expected?: (config: string) => number;
  /**
   * Why its pods cannot be judged for this change (its own rollout runs, or pods were already not
   * Ready when the change came): admitted, it is `exempt`. It takes no place in its wave, holds none,
   * and its pods halt nothing.
   */
  notJudged?: string;
}

/** A workload excused at admission (Candidate.notJudged), for the status. */
export interface Excused {
  config: string;
  workload: string;
  why: string;
  atMs: number;
}

export interface Halt {
  config: string;
  digest: string;
  wave: number;
  workload: string;
  why: string;
  atMs: number;
  /**
   * The failing workload's pods that were not Ready or restarted, when the failure was judged (for the
   * status). Not in the ledger: a halt restored after a restart has none.
   */
  pods?: readonly string[];
  /**
   * The other changes the failed reload carried, halted with this one: which of them failed cannot be
   * told. A newer change (or the deletion) of any of them ends this halt too: the failure no longer
   * says anything of this change, which is judged again by its waves (docs/adr/0045).
   */
  with?: readonly ChangeKey[];
}

export type Offer =
  | { kind: 'run' }
  /** Not yet: its wave has not opened. `until`: the earliest time to offer again by the clock (gathering). */
  | { kind: 'wait'; until?: number }
  /** A change it carries was halted. */
  | { kind: 'halted'; halt: Halt }
  /** It carries a digest older than a newer change of the same config: drop it. */
  | { kind: 'stale'; config: string };

/**
 * `excused`: its reload made no progress while its pods stayed healthy (a PodDisruptionBudget, a
 * node that will not take the pods): not the config's fault, so it holds no wave, and the next
 * workload takes its place. Its reload goes on; once it completes, it settles and is judged as any.
 */
type MemberState = 'running' | 'excused' | 'exempt' | 'settling' | 'passed' | 'failed';

/** States that hold no wave: the next one may open over them. */
const CLEARED: ReadonlySet<MemberState> = new Set(['passed', 'excused', 'exempt']);

class Progression {
  readonly members = new Map<string, { state: MemberState; wave: number; why?: string; atMs?: number }>();
  /** Workloads offered and told to wait: the change is not done while any waits. */
  readonly waiting = new Set<string>();
  /** Every workload offered so far, and how many are expected (Candidate.expected). */
  readonly seen = new Set<string>();
  expected = 0;
  /** The highest wave opened so far (0: none), and how many workloads it admitted. */
  wave = 0;
  inWave = 0;
  halt: Halt | undefined;
  readonly key: ChangeKey;
  /** When it was first offered (its gathering ends `gatherMs` later), and the cutoff it was opened with. */
  readonly openedMs: number;
  readonly cutoffMs: number;
  /**
   * The earliest cutoff of a reload offered for it: a reload with a cutoff from then on covers the
   * change (a reload's cutoff is the latest of its changes', so the earliest is the nearest to this one's).
   */
  earliestMs: number;
  /** When the gathering ends: `gatherMs` after it opened, or sooner, when every expected workload came. */
  gatheredAt: number;

  constructor(key: ChangeKey, openedMs: number, cutoffMs: number, gatherMs = 0) {
    this.key = key;
    this.openedMs = openedMs;
    this.cutoffMs = cutoffMs;
    this.earliestMs = cutoffMs;
    this.gatheredAt = openedMs + gatherMs;
  }

  /** The workload was offered. True when that ended the gathering: every expected workload came. */
  see(workload: string, expected: ((config: string) => number) | undefined, now: number): boolean {
    if (now >= this.gatheredAt) return false;
    this.seen.add(workload);
    this.expected = Math.max(this.expected, expected?.(this.key.config) ?? 0);
    if (this.expected === 0 || this.seen.size < this.expected) return false;
    this.gatheredAt = now;
    return true;
  }

  size(policy: WavesPolicy, wave: number): number {
    return policy.firstWave * 2 ** (wave - 1);
  }

  /** Whether the next wave may open: the first wave passed, and the current one completed. */
  nextMayOpen(): boolean {
    for (const m of this.members.values()) {
      if (m.wave === 1 && !CLEARED.has(m.state)) return false;
      if (m.wave === this.wave && m.state === 'running') return false;
    }
    return true;
  }

  verdict(workload: string, now: number, policy: WavesPolicy): Offer {
    if (this.halt) return { kind: 'halted', halt: this.halt };
    if (this.members.has(workload)) return { kind: 'run' };
    if (now < this.gatheredAt) return { kind: 'wait', until: this.gatheredAt };
    if (this.wave > 0 && this.inWave < this.size(policy, this.wave)) return { kind: 'run' };
    return this.nextMayOpen() ? { kind: 'run' } : { kind: 'wait' };
  }

  admit(workload: string, policy: WavesPolicy, notJudged?: string, now = 0): void {
    this.waiting.delete(workload);
    if (this.members.has(workload)) return;
    if (notJudged !== undefined) {
      // Not judged, so it takes no place: the next workload in line takes it.
      this.members.set(workload, {
        state: 'exempt',
        wave: Math.max(1, this.wave),
        why: notJudged,
        atMs: now,
      });
      return;
    }
    if (this.wave === 0 || this.inWave >= this.size(policy, this.wave)) {
      this.wave += 1;
      this.inWave = 0;
    }
    this.inWave += 1;
    this.members.set(workload, { state: 'running', wave: this.wave, atMs: now });
  }

  done(): boolean {
    return (
      !this.halt &&
      this.waiting.size === 0 &&
      [...this.members.values()].every((m) => m.state === 'passed' || m.state === 'exempt')
    );
  }
}

const keyOf = (c: ChangeKey) => c.config;

/** Every change's progression, and the one place that says whether a workload's reload may start. */
export class Waves {
  readonly #policy: WavesPolicy;
  /** Per config: the progression of its newest change. */
  readonly #byConfig = new Map<string, Progression>();

  constructor(policy: WavesPolicy) {
    if (!(policy.firstWave >= 1)) throw new Error('the first wave needs at least one workload');
    this.#policy = policy;
  }

  /**
   * Whether the candidate's reload may start now. When it may, it is admitted into the current wave
   * of every change it carries (so call this only when the reload will then start).
   */
  offer(c: Candidate, now: number): Offer {
    const progressions: Progression[] = [];
    for (const change of c.changes) {
      let p = this.#byConfig.get(keyOf(change));
      if (p && p.key.digest !== change.digest) {
        // A different digest: the newer change supersedes the older one's progression (and its halt).
        if (c.cutoffMs < p.cutoffMs) return { kind: 'stale', config: change.config };
        p = undefined;
      }
      if (!p) {
        p = new Progression(change, now, c.cutoffMs, this.#policy.gatherMs);
        this.#byConfig.set(keyOf(change), p);
      }
      p.earliestMs = Math.min(p.earliestMs, c.cutoffMs);
      progressions.push(p);
    }
    // The last expected workload came: the first wave is chosen now, in wave order among all who
    // came (the engine offers them again at once), not by who came last.
    let gathered = false;
    for (const p of progressions) {
      if (p.see(c.workload, c.expected, now) && p.waiting.size > 0) gathered = true;
    }
    let waiting = gathered;
    let until: number | undefined = gathered ? now : undefined;
    for (const p of progressions) {
      const v = p.verdict(c.workload, now, this.#policy);
      if (v.kind === 'halted') return v;
      if (v.kind === 'wait') {
        waiting = true;
        if (v.until !== undefined) until = Math.max(until ?? v.until, v.until);
      }
    }
    if (waiting) {
      for (const p of progressions) if (!p.members.has(c.workload)) p.waiting.add(c.workload);
      return until !== undefined ? { kind: 'wait', until } : { kind: 'wait' };
    }
    for (const p of progressions) p.admit(c.workload, this.#policy, c.notJudged, now);
    return { kind: 'run' };
  }

  /**
   * The workload's reload with this cutoff completed: its pods now settle, in every change it covers.
   * True when it is in such a progression.
   */
  completed(workload: string, cutoffMs: number): boolean {
    const excused = this.#move(workload, 'excused', 'settling', cutoffMs);
    const running = this.#move(workload, 'running', 'settling', cutoffMs);
    // Already settling for an older change it covers: its settle starts again over this reload's pods
    // (a reload that was not judged for its own change, its workload excused at admission, still
    // completes the older one's settle: execution simulation seed 421 with --progressive-reloads).
    return running || excused || this.#move(workload, 'settling', 'settling', cutoffMs);
  }

  /**
   * Its reload made no progress, but its pods are healthy: it holds no wave (MemberState `excused`),
   * and its place in the current wave goes to the next workload. True when it was running in one.
   */
  excuse(workload: string): boolean {
    let found = false;
    for (const p of this.#byConfig.values()) {
      const m = p.members.get(workload);
      if (m?.state !== 'running') continue;
      m.state = 'excused';
      if (m.wave === p.wave) p.inWave -= 1;
      found = true;
    }
    return found;
  }

  /**
   * Its pods, replaced by a reload with this cutoff, stayed healthy for the settle time. Returns the
   * changes that this completed: every workload of theirs passed, or was not judged.
   */
  passed(workload: string, cutoffMs: number): ChangeKey[] {
    this.#move(workload, 'settling', 'passed', cutoffMs);
    const done: ChangeKey[] = [];
    for (const [config, p] of this.#byConfig) {
      if (!p.done()) continue;
      this.#byConfig.delete(config);
      done.push(p.key);
    }
    return done;
  }

  /**
   * Its reload failed, or its pods did not stay healthy: halts the changes that reload carried, at the
   * content it carried (a newer change of a config is never halted by a reload of older content).
   * A member excused at admission halts nothing. Returns the new halts.
   */
  failed(
    workload: string,
    changes: readonly ChangeKey[],
    why: string,
    now: number,
    pods?: readonly string[],
  ): Halt[] {
    const halted: Progression[] = [];
    for (const p of this.#byConfig.values()) {
      if (!changes.some((c) => c.config === p.key.config && c.digest === p.key.digest)) continue;
      const m = p.members.get(workload);
      if (!m || m.state === 'passed' || m.state === 'failed' || m.state === 'exempt') continue;
      m.state = 'failed';
      if (p.halt) continue;
      p.halt = { ...p.key, wave: m.wave, workload, why, atMs: now, ...(pods ? { pods } : {}) };
      halted.push(p);
    }
    // Halted together: each names the others, whose newer change ends it too.
    for (const p of halted) {
      const others = halted.filter((q) => q !== p).map((q) => q.key);
      if (others.length > 0 && p.halt) p.halt = { ...p.halt, with: others };
    }
    return halted.map((p) => p.halt as Halt);
  }

  /** Its reload will not complete for this change (dropped, held, gone): it leaves the waves. */
  forget(workload: string): void {
    for (const [config, p] of this.#byConfig) {
      p.waiting.delete(workload);
      if (p.members.get(workload)?.state !== 'failed') p.members.delete(workload);
      if (p.members.size === 0 && p.waiting.size === 0 && !p.halt) this.#byConfig.delete(config);
    }
  }

  /**
   * Moves the workload from one state to another in the progressions its reload covers: those of
   * changes made before the reload's cutoff (its new pods read them), whichever configs its action
   * named. A reload for an older content says nothing of a newer change (execution simulation seed
   * 127: it moved the newer change's member, whose own completion then found nothing to move, and
   * its waves never went on); a reload whose action no longer names a config still covers that
   * config's earlier change (engine simulation seed 583 with --progressive-reloads).
   */
  #move(workload: string, from: MemberState, to: MemberState, cutoffMs: number): boolean {
    let found = false;
    for (const p of this.#byConfig.values()) {
      if (p.earliestMs > cutoffMs) continue;
      const m = p.members.get(workload);
      if (m?.state !== from) continue;
      m.state = to;
      found = true;
    }
    return found;
  }

  /**
   * The config's content is now `digest` (undefined: deleted): a progression of other content is over,
   * its halt included (a revert to the content the workloads run needs no reload). Returns the halt lifted.
   */
  supersede(
    config: string,
    digest: string | undefined,
    now = 0,
  ): { halt?: Halt; running: string[]; settling: string[]; alsoLifted: Halt[] } {
    // The halts of changes halted with the superseded one (the same failed reload) end too.
    const alsoLifted = this.liftHaltedWith(config, digest, now);
    const p = this.#byConfig.get(config);
    if (!p || p.key.digest === digest) return { running: [], settling: [], alsoLifted };
    this.#byConfig.delete(config);
    // Its reloads still under way are for content no longer current: the engine stops them.
    const running = [...p.members].filter(([, m]) => m.state === 'running' || m.state === 'excused');
    // Its workloads still settling run pods that read the superseded content: what they show says
    // nothing of the other changes their reload carried (Waves.unsettle).
    const settling = [...p.members].filter(([, m]) => m.state === 'settling');
    return {
      ...(p.halt ? { halt: p.halt } : {}),
      running: running.map(([w]) => w),
      settling: settling.map(([w]) => w),
      alsoLifted,
    };
  }

  /**
   * Ends the halts that were halted together with a change of `config` other than `digest` (now
   * superseded, or deleted: undefined): their failure may have been that change's. Each change goes on
   * in its waves: the workloads that failed it are not judged for it (MemberState `exempt`: their pods
   * read the other change too), and the next workloads in line are. Returns the halts ended.
   */
  liftHaltedWith(config: string, digest: string | undefined, now = 0): Halt[] {
    const lifted: Halt[] = [];
    for (const q of this.#byConfig.values()) {
      const h = q.halt;
      if (!h?.with?.some((c) => c.config === config && c.digest !== digest)) continue;
      q.halt = undefined;
      const why = `its failure was judged with a change of ${config}, which a newer one replaced`;
      for (const [w, m] of q.members) {
        if (m.state !== 'failed') continue;
        if (m.wave === q.wave) q.inWave -= 1;
        q.members.set(w, { state: 'exempt', wave: m.wave, why, atMs: now });
      }
      lifted.push(h);
    }
    return lifted;
  }

  /**
   * When the workload was first admitted for these changes, while its reload is still under way and
   * judged: a member's deadline counts from there, across its retries. Undefined otherwise.
   */
  admittedAt(workload: string, changes: readonly ChangeKey[]): number | undefined {
    let at: number | undefined;
    for (const c of changes) {
      const p = this.#byConfig.get(keyOf(c));
      const m = p?.key.digest === c.digest ? p.members.get(workload) : undefined;
      if ((m?.state === 'running' || m?.state === 'excused') && m.atMs !== undefined)
        at = Math.min(at ?? m.atMs, m.atMs);
    }
    return at;
  }

  /**
   * The workload's reload was stopped because a config it reads changed again: the pods it created
   * read the older content, so its memberships still under way count their new pods (and their
   * deadline) from `now`, when its next reload of the newer content begins.
   */
  rejudgeFrom(workload: string, now: number): void {
    for (const p of this.#byConfig.values()) {
      const m = p.members.get(workload);
      if (m?.state === 'running' || m?.state === 'excused') m.atMs = now;
    }
  }

  /** Whether the workload's reload of these changes is under way and judged (not excused at admission). */
  judging(workload: string, changes: readonly ChangeKey[]): boolean {
    return changes.some((c) => {
      const p = this.#byConfig.get(keyOf(c));
      const m = p?.key.digest === c.digest ? p.members.get(workload) : undefined;
      return m?.state === 'running' || m?.state === 'excused';
    });
  }

  /** The workloads excused at admission, per change under way (for the status). */
  excused(): Excused[] {
    return [...this.#byConfig.values()].flatMap((p) =>
      [...p.members]
        .filter(([, m]) => m.state === 'exempt')
        .map(([workload, m]) => ({ config: p.key.config, workload, why: m.why ?? '', atMs: m.atMs ?? 0 })),
    );
  }

  /**
   * Continues a halted change of the config: the workloads that failed it take their places in their
   * wave again, and the waves go on. Returns the halt lifted, if there was one.
   */
  resume(config: string): Halt | undefined {
    const p = this.#byConfig.get(config);
    const halt = p?.halt;
    if (!p || !halt) return undefined;
    p.halt = undefined;
    // The workloads that failed keep their places, running again: their own retries (parked, or
    // still backing off) run next, not the next workloads in line.
    for (const m of p.members.values()) if (m.state === 'failed') m.state = 'running';
    return halt;
  }

  /** A halt recorded before (by another term): the change stays halted until a newer one. */
  restore(h: Halt, cutoffMs: number): void {
    const p = this.#byConfig.get(h.config);
    if (p && (p.key.digest !== h.digest || p.halt)) return;
    const restored = new Progression({ config: h.config, digest: h.digest }, h.atMs, cutoffMs);
    restored.halt = h;
    this.#byConfig.set(h.config, restored);
  }

  /**
   * A reload of the workload for other changes starts while its pods settle for these: the pods it
   * replaces can no longer be judged for them (their failure would be the other change's, their
   * health proves nothing of these). Each such membership is not judged (MemberState `exempt`,
   * with `why`), so the next wave may open. Returns the configs whose settle was given up.
   */
  unsettle(workload: string, carried: readonly ChangeKey[], why: string, now: number): string[] {
    const out: string[] = [];
    for (const p of this.#byConfig.values()) {
      if (carried.some((c) => keyOf(c) === keyOf(p.key) && c.digest === p.key.digest)) continue;
      const m = p.members.get(workload);
      if (m?.state !== 'settling') continue;
      p.members.set(workload, { state: 'exempt', wave: m.wave, why, atMs: now });
      out.push(p.key.config);
    }
    return out.sort();
  }

  /**
   * Its reload for the changes it was admitted for is held by another change's halt (a newer action
   * of it carries that change too): not judged for them (MemberState `exempt`, with `why`), and its
   * place in their waves goes to the next workload. Returns the configs of those changes.
   */
  exempt(workload: string, why: string, now: number): string[] {
    const out: string[] = [];
    for (const p of this.#byConfig.values()) {
      const m = p.members.get(workload);
      if (m?.state !== 'running' && m?.state !== 'excused') continue;
      if (m.wave === p.wave) p.inWave -= 1;
      p.members.set(workload, { state: 'exempt', wave: m.wave, why, atMs: now });
      out.push(p.key.config);
    }
    return out.sort();
  }

  /** The workloads admitted for any of these changes (at their digests), in every member state. */
  membersOf(changes: readonly ChangeKey[]): string[] {
    const out = new Set<string>();
    for (const c of changes) {
      const p = this.#byConfig.get(keyOf(c));
      if (p?.key.digest === c.digest) for (const w of p.members.keys()) out.add(w);
    }
    return [...out].sort();
  }

  /** The halt in force over any of these changes, if one is. */
  haltOf(changes: readonly ChangeKey[]): Halt | undefined {
    for (const c of changes) {
      const p = this.#byConfig.get(keyOf(c));
      if (p?.halt && p.key.digest === c.digest) return p.halt;
    }
    return undefined;
  }

  /** The halts in force. */
  halts(): Halt[] {
    return [...this.#byConfig.values()].flatMap((p) => (p.halt ? [p.halt] : []));
  }
}

/**
 * The order in which waiting workloads take the places of a wave: a higher priority first (the
 * `gitops-reloader.io/reload-priority` annotation, default 0), then namespace, then name.
 */
export function waveOrder(
  a: { priority: number; workload: string },
  b: { priority: number; workload: string },
): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  const [, an = '', aname = ''] = a.workload.split('/');
  const [, bn = '', bname = ''] = b.workload.split('/');
  return an !== bn ? (an < bn ? -1 : 1) : aname < bname ? -1 : aname > bname ? 1 : 0;
}
