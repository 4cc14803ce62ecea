import { describe, expect, it } from 'vitest';
import { type Candidate, Waves, waveOrder } from './waves.ts';

const CM = 'ns/ConfigMap/shared';
const cand = (workload: string, digest = 'd1', cutoffMs = 1_000): Candidate => ({
  workload,
  changes: [{ config: CM, digest }],
  cutoffMs,
});
const GATHER = 500;
const D1 = [{ config: CM, digest: 'd1' }];

/** Offers every name in order at `now`; returns those admitted. */
function offerAll(w: Waves, names: string[], now: number, digest = 'd1'): string[] {
  return names.filter((n) => w.offer(cand(n, digest), now).kind === 'run');
}

describe('Waves', () => {
  it('gathers a new change before its first wave, then admits the first wave only', () => {
    const w = new Waves({ firstWave: 1, gatherMs: GATHER });
    expect(w.offer(cand('Deployment/ns/a'), 0)).toEqual({ kind: 'wait', until: GATHER });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b', 'Deployment/ns/c'], GATHER)).toEqual([
      'Deployment/ns/a',
    ]);
  });

  it('ends the gathering once every expected workload came, and chooses the first wave in order, not by who came last', () => {
    const w = new Waves({ firstWave: 1, gatherMs: GATHER });
    const expected = () => 3;
    const offer = (n: string, now: number) => w.offer({ ...cand(n), expected }, now);
    expect(offer('Deployment/ns/c', 0)).toEqual({ kind: 'wait', until: GATHER });
    expect(offer('Deployment/ns/b', 1)).toEqual({ kind: 'wait', until: GATHER });
    // The last one: the gathering ends now, and everyone is offered again in wave order.
    expect(offer('Deployment/ns/a', 2)).toEqual({ kind: 'wait', until: 2 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b', 'Deployment/ns/c'], 2)).toEqual([
      'Deployment/ns/a',
    ]);
    // A workload alone needs no gathering at all.
    const alone = new Waves({ firstWave: 1, gatherMs: GATHER });
    expect(alone.offer({ ...cand('Deployment/ns/a', 'd2'), expected: () => 1 }, 0)).toEqual({
      kind: 'run',
    });
    // Without a count (or one too high), the gathering takes its whole time.
    const unknown = new Waves({ firstWave: 1, gatherMs: GATHER });
    expect(unknown.offer({ ...cand('Deployment/ns/a'), expected: () => 2 }, 0)).toEqual({
      kind: 'wait',
      until: GATHER,
    });
  });

  it('counts a change’s readers only while it gathers, not on every later offer', () => {
    const w = new Waves({ firstWave: 1, gatherMs: GATHER });
    let asked = 0;
    const expected = () => {
      asked += 1;
      return 2;
    };
    w.offer({ ...cand('Deployment/ns/a'), expected }, 0);
    w.offer({ ...cand('Deployment/ns/b'), expected }, 1);
    expect(asked).toBe(2);
    for (let i = 0; i < 10; i++) w.offer({ ...cand('Deployment/ns/b'), expected }, GATHER + i);
    expect(asked).toBe(2);
  });

  it('a member whose reload is held while its pods stay healthy holds no wave: the next takes its place, and it is judged once it completes', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    const all = ['a', 'b', 'c', 'd'].map((n) => `Deployment/ns/${n}`);
    expect(offerAll(w, all, 0)).toEqual([all[0]]);
    expect(w.excuse(all[0] as string)).toBe(true);
    // b takes a's place in the first wave: it alone, and it must pass before the second opens.
    expect(offerAll(w, all.slice(1), 1)).toEqual([all[1]]);
    expect(w.offer(cand(all[0] as string), 2).kind).toBe('run'); // a's own retry goes on
    w.completed(all[1] as string, 1_000);
    w.passed(all[1] as string, 1_000);
    expect(offerAll(w, all.slice(2), 3)).toEqual(all.slice(2, 4));
    // a completes later: it settles like any member, and a failure then halts the change.
    expect(w.completed(all[0] as string, 1_000)).toBe(true);
    expect(w.failed(all[0] as string, D1, 'not Ready', 4)).toHaveLength(1);
    expect(w.excuse(all[0] as string)).toBe(false);
  });

  it('a reload completes the changes made before its cutoff, whichever configs its action names (simulation seeds 127, 583, 1108)', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0, 'd1')).toEqual(['Deployment/ns/a']);
    // A newer change while a's reload for d1 runs: a is its first wave too.
    expect(w.offer(cand('Deployment/ns/a', 'd2', 2_000), 1).kind).toBe('run');
    // The d1 reload's completion says nothing of d2: b must wait for a's reload of d2.
    expect(w.completed('Deployment/ns/a', 1_000)).toBe(false);
    expect(w.offer(cand('Deployment/ns/b', 'd2', 2_000), 2).kind).toBe('wait');
    // A reload with a later cutoff covers d2, whatever configs its action names.
    expect(w.completed('Deployment/ns/a', 3_000)).toBe(true);
    w.passed('Deployment/ns/a', 3_000);
    expect(w.offer(cand('Deployment/ns/b', 'd2', 2_000), 3).kind).toBe('run');
  });

  it('a resume gives the failed workload its place again: its retry runs next, not the next in line', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0)).toEqual(['Deployment/ns/a']);
    w.failed('Deployment/ns/a', D1, 'not Ready', 1);
    expect(w.resume(CM)?.workload).toBe('Deployment/ns/a');
    // a's retry is still backing off: b is offered first, and waits.
    expect(w.offer(cand('Deployment/ns/b'), 2).kind).toBe('wait');
    expect(w.offer(cand('Deployment/ns/a'), 3).kind).toBe('run');
  });

  it('opens the second wave only after the first passed its settle, and doubles each wave', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    const all = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'].map((n) => `Deployment/ns/${n}`);
    expect(offerAll(w, all, 0)).toEqual([all[0]]);
    expect(w.completed(all[0] as string, 1_000)).toBe(true);
    expect(offerAll(w, all.slice(1), 1)).toEqual([]); // settling: not passed yet
    w.passed(all[0] as string, 1_000);
    expect(offerAll(w, all.slice(1), 2)).toEqual(all.slice(1, 3)); // wave 2: two
    // Wave 3 opens when wave 2 completed (its settle still runs), not before.
    w.completed(all[1] as string, 1_000);
    expect(offerAll(w, all.slice(3), 3)).toEqual([]);
    w.completed(all[2] as string, 1_000);
    expect(offerAll(w, all.slice(3), 4)).toEqual(all.slice(3, 7)); // wave 3: four
  });

  it('a failure halts the change: nothing more is admitted for it, a re-offer of the failed one included', () => {
    const w = new Waves({ firstWave: 2, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b', 'Deployment/ns/c'], 0)).toEqual([
      'Deployment/ns/a',
      'Deployment/ns/b',
    ]);
    const halts = w.failed('Deployment/ns/a', D1, 'no progress', 5);
    expect(halts).toEqual([
      { config: CM, digest: 'd1', wave: 1, workload: 'Deployment/ns/a', why: 'no progress', atMs: 5 },
    ]);
    w.completed('Deployment/ns/b', 1_000);
    w.passed('Deployment/ns/b', 1_000);
    expect(w.offer(cand('Deployment/ns/c'), 6).kind).toBe('halted');
    expect(w.offer(cand('Deployment/ns/a'), 6).kind).toBe('halted');
    // A second failure of the same change is not a second halt.
    expect(w.failed('Deployment/ns/a', D1, 'again', 7)).toEqual([]);
    expect(w.halts()).toHaveLength(1);
  });

  it('a newer change of the config supersedes a halted one and starts again from the first wave', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0);
    w.failed('Deployment/ns/a', D1, 'not Ready', 1);
    expect(w.offer({ ...cand('Deployment/ns/b', 'd2', 2_000) }, 2)).toEqual({ kind: 'run' });
    expect(w.offer({ ...cand('Deployment/ns/a', 'd2', 2_000) }, 2)).toEqual({ kind: 'wait' });
    expect(w.halts()).toEqual([]);
    // The halted change's old action, retried, is stale now.
    expect(w.offer(cand('Deployment/ns/a', 'd1', 1_000), 3)).toEqual({ kind: 'stale', config: CM });
  });

  it('a workload that leaves (dropped, held, gone) does not hold its wave', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0)).toEqual(['Deployment/ns/a']);
    w.forget('Deployment/ns/a');
    expect(offerAll(w, ['Deployment/ns/b'], 1)).toEqual(['Deployment/ns/b']);
  });

  it('a reload carrying two changes starts only when both admit it', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    const other = 'ns/Secret/tls';
    expect(w.offer(cand('Deployment/ns/a'), 0).kind).toBe('run');
    const both: Candidate = {
      workload: 'Deployment/ns/b',
      changes: [
        { config: CM, digest: 'd1' },
        { config: other, digest: 's1' },
      ],
      cutoffMs: 1_000,
    };
    // The Secret's change would admit it, the ConfigMap's first wave is full: it waits, admitted to neither.
    expect(w.offer(both, 1)).toEqual({ kind: 'wait' });
    expect(
      w.offer(
        { workload: 'Deployment/ns/c', changes: [{ config: other, digest: 's1' }], cutoffMs: 1_000 },
        1,
      ),
    ).toEqual({ kind: 'run' });
  });

  it('a completed change is forgotten, so its memory is bounded by the configs that change', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    w.offer(cand('Deployment/ns/a'), 0);
    w.completed('Deployment/ns/a', 1_000);
    w.passed('Deployment/ns/a', 1_000);
    // A late workload of the same change starts a fresh progression, at once.
    expect(w.offer(cand('Deployment/ns/z'), 1).kind).toBe('run');
  });

  it('a restored halt holds its change at once, and a newer change still supersedes it', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 500 });
    const halt = {
      config: CM,
      digest: 'd1',
      wave: 1,
      workload: 'Deployment/ns/a',
      why: 'not Ready',
      atMs: 10,
    };
    w.restore(halt, 1_000);
    expect(w.offer(cand('Deployment/ns/b'), 20)).toEqual({ kind: 'halted', halt });
    expect(w.offer(cand('Deployment/ns/a', 'd0', 500), 20)).toEqual({ kind: 'stale', config: CM });
    expect(w.offer(cand('Deployment/ns/b', 'd2', 2_000), 20).kind).toBe('wait');
    expect(w.halts()).toEqual([]);
  });

  it('a resumed change continues: the failed workload takes its place in its wave again, then the waves go on', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b', 'Deployment/ns/c'], 0);
    w.failed('Deployment/ns/a', D1, 'not Ready', 1);
    expect(w.resume('ns/ConfigMap/other')).toBeUndefined();
    expect(w.resume(CM)?.workload).toBe('Deployment/ns/a');
    expect(w.halts()).toEqual([]);
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b', 'Deployment/ns/c'], 2)).toEqual([
      'Deployment/ns/a',
    ]);
    w.completed('Deployment/ns/a', 1_000);
    w.passed('Deployment/ns/a', 1_000);
    expect(offerAll(w, ['Deployment/ns/b', 'Deployment/ns/c'], 3)).toEqual([
      'Deployment/ns/b',
      'Deployment/ns/c',
    ]);
  });

  it('a member not judged at admission (its pods already unhealthy) takes no place: the next one runs, and it halts nothing', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    const stuck = { ...cand('Deployment/ns/a'), notJudged: '2 of 2 pods were not Ready before the change' };
    expect(w.offer(stuck, 0)).toEqual({ kind: 'run' });
    expect(offerAll(w, ['Deployment/ns/b', 'Deployment/ns/c'], 1)).toEqual(['Deployment/ns/b']);
    expect(w.excused()).toEqual([
      {
        config: CM,
        workload: 'Deployment/ns/a',
        why: '2 of 2 pods were not Ready before the change',
        atMs: 0,
      },
    ]);
    // Its reload completes and fails: neither settles it nor halts the change.
    expect(w.completed('Deployment/ns/a', 1_000)).toBe(false);
    expect(w.failed('Deployment/ns/a', D1, 'not Ready', 2)).toEqual([]);
    expect(w.judging('Deployment/ns/a', D1)).toBe(false);
    expect(w.judging('Deployment/ns/b', D1)).toBe(true);
    w.completed('Deployment/ns/b', 1_000);
    w.passed('Deployment/ns/b', 1_000);
    expect(offerAll(w, ['Deployment/ns/c'], 3)).toEqual(['Deployment/ns/c']);
    w.completed('Deployment/ns/c', 1_000);
    w.passed('Deployment/ns/c', 1_000);
    // The change is done: nothing is kept of it.
    expect(w.excused()).toEqual([]);
  });

  it('a reload not judged for its own change still completes the settle of an older change it covers (execution simulation seed 421)', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    const OTHER = 'ns/ConfigMap/other';
    const old = (n: string) => ({ workload: n, changes: [{ config: OTHER, digest: 'o1' }], cutoffMs: 1_000 });
    expect(w.offer(old('Deployment/ns/a'), 0).kind).toBe('run');
    expect(w.completed('Deployment/ns/a', 1_000)).toBe(true); // settling for `other`
    expect(w.offer(old('Deployment/ns/b'), 1).kind).toBe('wait');
    // A change of `shared` finds a mid-rollout: not judged for it.
    const mid = { ...cand('Deployment/ns/a', 'd1', 2_000), notJudged: 'its own rollout' };
    expect(w.offer(mid, 2).kind).toBe('run');
    // Its reload completes: the settle starts again over its pods, for `other`.
    expect(w.completed('Deployment/ns/a', 2_000)).toBe(true);
    w.passed('Deployment/ns/a', 2_000);
    expect(w.offer(old('Deployment/ns/b'), 3).kind).toBe('run');
  });

  it('a halt belongs to the content that failed: a reload of older content halts no newer change', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0, 'd1')).toEqual(['Deployment/ns/a']);
    // The fix, while a's reload of d1 still runs: that reload is for content no longer current.
    expect(w.supersede(CM, 'd2')).toEqual({ running: ['Deployment/ns/a'], settling: [], alsoLifted: [] });
    expect(w.offer(cand('Deployment/ns/a', 'd2', 2_000), 1).kind).toBe('run');
    // The old reload's failure, judged late, names d1: the fix is not halted.
    expect(w.failed('Deployment/ns/a', D1, 'not Ready', 2)).toEqual([]);
    expect(w.halts()).toEqual([]);
    expect(w.failed('Deployment/ns/a', [{ config: CM, digest: 'd2' }], 'not Ready', 3)).toHaveLength(1);
  });

  it('refuses an empty first wave', () => {
    expect(() => new Waves({ firstWave: 0, gatherMs: 0 })).toThrow(/at least one/);
  });
});

describe('Waves, one workload under two changes (issue 34)', () => {
  const CM2 = 'ns/ConfigMap/other';
  const both = (workload: string): Candidate => ({
    workload,
    changes: [
      { config: CM, digest: 'd1' },
      { config: CM2, digest: 'e1' },
    ],
    cutoffMs: 1_000,
  });

  it('names the members of halted changes, whatever their state (membersOf)', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(w.offer(cand('Deployment/ns/a'), 0).kind).toBe('run');
    expect(w.offer(both('Deployment/ns/b'), 0).kind).toBe('wait');
    expect(w.membersOf(D1)).toEqual(['Deployment/ns/a']);
    // Another digest is another change: none of its members.
    expect(w.membersOf([{ config: CM, digest: 'd0' }])).toEqual([]);
    expect(w.membersOf([{ config: CM2, digest: 'e1' }])).toEqual([]);
  });

  it('takes a parked member out of the waves it was admitted for (exempt), so the next one takes its place', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0)).toEqual(['Deployment/ns/a']);
    expect(w.exempt('Deployment/ns/a', 'parked', 5)).toEqual([CM]);
    expect(w.offer(cand('Deployment/ns/b'), 6).kind).toBe('run');
    expect(w.excused()).toEqual([{ config: CM, workload: 'Deployment/ns/a', why: 'parked', atMs: 5 }]);
    // Nothing running: nothing to take out.
    expect(w.exempt('Deployment/ns/a', 'parked', 7)).toEqual([]);
  });

  it("gives up the settle of a change whose pods another change's reload replaces (unsettle), so the next wave opens", () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(offerAll(w, ['Deployment/ns/a', 'Deployment/ns/b'], 0)).toEqual(['Deployment/ns/a']);
    expect(w.completed('Deployment/ns/a', 1_000)).toBe(true);
    // Settling: the second wave waits for it.
    expect(w.offer(cand('Deployment/ns/b'), 1).kind).toBe('wait');
    // A reload of a carrying only another change starts: its settle for d1 is given up.
    const other = [{ config: CM2, digest: 'e1' }];
    expect(w.unsettle('Deployment/ns/a', other, 'replaced', 2)).toEqual([CM]);
    expect(w.offer(cand('Deployment/ns/b'), 3).kind).toBe('run');
    expect(w.excused()).toEqual([{ config: CM, workload: 'Deployment/ns/a', why: 'replaced', atMs: 2 }]);
    // A reload that carries the change itself keeps its settle (it is judged again by the new one).
    const v = new Waves({ firstWave: 1, gatherMs: 0 });
    offerAll(v, ['Deployment/ns/a'], 0);
    v.completed('Deployment/ns/a', 1_000);
    expect(v.unsettle('Deployment/ns/a', D1, 'replaced', 2)).toEqual([]);
  });
});

describe('Waves, changes halted together (docs/adr/0045)', () => {
  const CM2 = 'ns/ConfigMap/other';
  const both = (workload: string, d2 = 'e1'): Candidate => ({
    workload,
    changes: [
      { config: CM, digest: 'd1' },
      { config: CM2, digest: d2 },
    ],
    cutoffMs: 1_000,
  });
  const only2 = (workload: string): Candidate => ({
    workload,
    changes: [{ config: CM2, digest: 'e1' }],
    cutoffMs: 1_000,
  });

  it('halts every change a failed reload carried, each naming the others', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(w.offer(both('Deployment/ns/a'), 0).kind).toBe('run');
    const halts = w.failed('Deployment/ns/a', both('x').changes, 'not Ready', 5);
    expect(halts.map((h) => [h.config, h.with])).toEqual([
      [CM, [{ config: CM2, digest: 'e1' }]],
      [CM2, [{ config: CM, digest: 'd1' }]],
    ]);
    expect(w.offer(only2('Deployment/ns/b'), 6).kind).toBe('halted');
  });

  it('a newer change of one of them ends the halt of the others: the next workload is judged for them', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(w.offer(both('Deployment/ns/a'), 0).kind).toBe('run');
    w.failed('Deployment/ns/a', both('x').changes, 'not Ready', 5);
    // The fix of CM: its own halt is superseded, and CM2's, halted with it, ends too.
    const s = w.supersede(CM, 'd2', 10);
    expect(s.halt?.config).toBe(CM);
    expect(s.alsoLifted.map((h) => h.config)).toEqual([CM2]);
    // The workload that failed is not judged for CM2 (its pods read CM's bad content): b takes its place.
    expect(w.offer(only2('Deployment/ns/b'), 11).kind).toBe('run');
    expect(w.excused()).toEqual([
      {
        config: CM2,
        workload: 'Deployment/ns/a',
        why: `its failure was judged with a change of ${CM}, which a newer one replaced`,
        atMs: 10,
      },
    ]);
    // A halt of one change alone names none, and ends only by its own config.
    const v = new Waves({ firstWave: 1, gatherMs: 0 });
    v.offer(cand('Deployment/ns/a'), 0);
    expect(v.failed('Deployment/ns/a', D1, 'not Ready', 5)[0]?.with).toBeUndefined();
    expect(v.supersede(CM2, 'e2', 6).alsoLifted).toEqual([]);
    expect(v.offer(cand('Deployment/ns/b'), 7).kind).toBe('halted');
  });

  it('a superseded change names the workloads still settling after a reload that carried it', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(w.offer(both('Deployment/ns/a'), 0).kind).toBe('run');
    expect(w.completed('Deployment/ns/a', 1_000)).toBe(true);
    expect(w.supersede(CM, 'd2', 5)).toEqual({ running: [], settling: ['Deployment/ns/a'], alsoLifted: [] });
    // Its settle for CM2 is then given up (the engine calls unsettle): the next workload runs.
    expect(w.unsettle('Deployment/ns/a', [], 'read an older CM', 5)).toEqual([CM2]);
    expect(w.offer(only2('Deployment/ns/b'), 6).kind).toBe('run');
  });

  it('a reload stopped for a newer content counts its new pods from then (rejudgeFrom)', () => {
    const w = new Waves({ firstWave: 1, gatherMs: 0 });
    expect(w.offer(both('Deployment/ns/a'), 0).kind).toBe('run');
    expect(w.admittedAt('Deployment/ns/a', [{ config: CM2, digest: 'e1' }])).toBe(0);
    w.rejudgeFrom('Deployment/ns/a', 7);
    expect(w.admittedAt('Deployment/ns/a', [{ config: CM2, digest: 'e1' }])).toBe(7);
  });
});

describe('waveOrder', () => {
  it('orders by priority (higher first), then namespace, then name', () => {
    const xs = [
      { priority: 0, workload: 'Deployment/b/x' },
      { priority: 0, workload: 'Deployment/a/z' },
      { priority: 5, workload: 'Deployment/z/canary' },
      { priority: 0, workload: 'StatefulSet/a/y' },
    ];
    expect(xs.sort(waveOrder).map((x) => x.workload)).toEqual([
      'Deployment/z/canary',
      'StatefulSet/a/y',
      'Deployment/a/z',
      'Deployment/b/x',
    ]);
  });
});
