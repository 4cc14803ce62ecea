// The weighted fair share (issue 36, ADR 0043): bounded loads, and few moves when a replica comes or goes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assign, LOAD_EPSILON, loadCap, type Weighed, weightOf } from './weighted-share.ts';

/** Mostly small clusters, a few big ones (the fleet: most small, some of 1,000 configs). */
const fleet = (maxBig: number) =>
  fc
    .uniqueArray(
      fc.record({
        id: fc.stringMatching(/^[a-z0-9]{1,10}$/),
        weight: fc.oneof(
          { weight: 20, arbitrary: fc.integer({ min: 1, max: 60 }) },
          { weight: 1, arbitrary: fc.integer({ min: 100, max: maxBig }) },
        ),
      }),
      { minLength: 1, maxLength: 300, selector: (c) => c.id },
    )
    .map((cs) => cs as Weighed[]);
const replicaCount = fc.integer({ min: 1, max: 7 });
const names = (n: number) => Array.from({ length: n }, (_, i) => `replica-${i}`);

const loads = (clusters: readonly Weighed[], a: Map<string, string>) => {
  const out = new Map<string, number>();
  for (const c of clusters) out.set(a.get(c.id) as string, (out.get(a.get(c.id) as string) ?? 0) + c.weight);
  return out;
};
const total = (clusters: readonly Weighed[]) => clusters.reduce((n, c) => n + c.weight, 0);

describe('weighted fair share', () => {
  it('assigns every cluster to a live replica, the same for the same input', () => {
    fc.assert(
      fc.property(fleet(2000), replicaCount, (clusters, r) => {
        const a = assign(clusters, names(r));
        expect(a.size).toBe(clusters.length);
        for (const to of a.values()) expect(names(r)).toContain(to);
        expect(assign([...clusters].reverse(), [...names(r)].reverse())).toEqual(a);
      }),
    );
  });

  it('puts no replica above (1 + ε) × its fair load when no cluster outweighs ε × the fair load, and none above the fair load plus the heaviest cluster ever', () => {
    fc.assert(
      fc.property(fleet(2000), replicaCount, (clusters, r) => {
        const fair = total(clusters) / r;
        const heaviest = Math.max(...clusters.map((c) => c.weight));
        const most = Math.max(...loads(clusters, assign(clusters, names(r))).values());
        expect(most).toBeLessThanOrEqual(fair + heaviest);
        if (heaviest <= LOAD_EPSILON * fair)
          expect(most).toBeLessThanOrEqual((1 + LOAD_EPSILON) * fair + 1e-9);
      }),
    );
  });

  it('moves only the clusters of a replica that goes', () => {
    fc.assert(
      fc.property(fleet(2000), fc.integer({ min: 2, max: 7 }), fc.nat(), (clusters, r, k) => {
        const before = assign(clusters, names(r));
        const gone = names(r)[k % r] as string;
        const after = assign(
          clusters,
          names(r).filter((x) => x !== gone),
          before,
        );
        for (const c of clusters)
          if (before.get(c.id) !== gone) expect(after.get(c.id)).toBe(before.get(c.id));
      }),
    );
  });

  it('moves at most about twice the joining replica’s part when one joins', () => {
    fc.assert(
      fc.property(fleet(2000), replicaCount, (clusters, r) => {
        const before = assign(clusters, names(r));
        const after = assign(clusters, names(r + 1), before);
        const moved = clusters.filter((c) => before.get(c.id) !== after.get(c.id));
        const heaviest = Math.max(...clusters.map((c) => c.weight));
        expect(total(moved)).toBeLessThanOrEqual((2 * total(clusters)) / (r + 1) + heaviest);
      }),
    );
  });

  it('weighs a cluster by its workloads and configs, at least 1, and caps a load at the heaviest cluster at least', () => {
    expect(weightOf(0, 0)).toBe(1);
    expect(weightOf(200, 1000)).toBe(1200);
    expect(loadCap([{ id: 'a', weight: 10 }], 3)).toBe(10);
    expect(
      loadCap(
        [
          { id: 'a', weight: 10 },
          { id: 'b', weight: 10 },
        ],
        1,
      ),
    ).toBe(25);
  });
});
