// Hub mode's warm standbys and Lease sightings (ADR 0043): which clusters a replica keeps an engine
// for without leading them, and who leads a cluster as this replica has seen its Lease.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeaseSightings } from './lease-sightings.ts';
import { readWeights, standbyPicks } from './shares.ts';

const replicas = fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/), { minLength: 1, maxLength: 5 });
const fleet = fc.uniqueArray(fc.stringMatching(/^[a-z0-9]{1,12}$/), { maxLength: 60 });

describe('warm standbys', () => {
  it('give each cluster one standby replica, never its leader, and a replica at most its limit', () => {
    fc.assert(
      fc.property(replicas, fleet, fc.nat(70), fc.infiniteStream(fc.nat()), (live, ids, limit, picks) => {
        const it = picks[Symbol.iterator]();
        // Each cluster led by one of the live replicas, or by nobody.
        const clusters = ids.map((id) => {
          const k = (it.next().value as number) % (live.length + 1);
          return { id, leader: live[k] };
        });
        const chosen = new Map<string, string[]>();
        for (const self of live) {
          const mine = standbyPicks({ clusters, live, self, limit });
          expect(mine.length).toBeLessThanOrEqual(limit);
          for (const id of mine) {
            expect(clusters.find((c) => c.id === id)?.leader).not.toBe(self);
            chosen.set(id, [...(chosen.get(id) ?? []), self]);
          }
        }
        // No cluster is kept warm twice: a spoke sees at most its leader's and one standby's watches.
        for (const holders of chosen.values()) expect(holders).toHaveLength(1);
        // Unbounded, every cluster with another live replica than its leader has its standby.
        if (limit >= ids.length) {
          const coverable = clusters.filter((c) => live.some((r) => r !== c.leader));
          expect(chosen.size).toBe(coverable.length);
        }
      }),
    );
  });

  it('none when the limit is 0', () => {
    expect(
      standbyPicks({ clusters: [{ id: 'a', leader: 'x' }], live: ['x', 'y'], self: 'y', limit: 0 }),
    ).toEqual([]);
  });
});

describe('Lease sightings', () => {
  let now = 0;
  const record = (holder: string, renew: string) => ({
    holderIdentity: holder,
    leaseDurationSeconds: 4,
    renewTime: renew,
  });

  it("say who leads, by the replica of the seat's identity, until the Lease is unrenewed for its duration", () => {
    const s = new LeaseSightings(15_000, () => now);
    now = 1000;
    s.saw('rel-c1-leader', record('pod-a/c1', 't1'));
    expect(s.leader('rel-c1-leader')).toBe('pod-a');
    now = 4900;
    s.saw('rel-c1-leader', record('pod-a/c1', 't1')); // read again unchanged: no renewal
    expect(s.seen('rel-c1-leader')?.changedAt).toBe(1000);
    expect(s.leader('rel-c1-leader')).toBe('pod-a');
    now = 5000;
    expect(s.leader('rel-c1-leader')).toBeUndefined();
    s.saw('rel-c1-leader', record('pod-a/c1', 't2')); // renewed
    expect(s.leader('rel-c1-leader')).toBe('pod-a');
  });

  it('say nobody leads a released or unknown Lease', () => {
    const s = new LeaseSightings(15_000, () => now);
    s.saw('rel-c2-leader', record('', 't1'));
    expect(s.leader('rel-c2-leader')).toBeUndefined();
    expect(s.leader('rel-none-leader')).toBeUndefined();
    s.saw('rel-c3-leader', record('pod-b/c3', 't1'));
    s.gone('rel-c3-leader');
    expect(s.leader('rel-c3-leader')).toBeUndefined();
  });
});

describe('published weights', () => {
  it('are read once from the roster annotation: positive integers by cluster id, anything else dropped', () => {
    expect([...readWeights('{"a":3,"b":0,"c":-1,"d":1.5,"e":"7","f":12}')]).toEqual([
      ['a', 3],
      ['f', 12],
    ]);
    expect(readWeights(undefined).size).toBe(0);
    expect(readWeights('not json').size).toBe(0);
    expect(readWeights('[1,2]').size).toBe(0);
  });
});
