import { describe, expect, it } from 'vitest';
import { surgeNamespacesOf, sweepable } from './surge-sweep.ts';

const deps = {
  inScope: (ns: string) => ns === 'team-a',
  reloaded: (ns: string, name: string) => `${ns}/${name}` === 'team-old/web',
};

describe('the surge-pod sweep', () => {
  it('takes an in-scope surge pod whose Deployment has no pending reload', () => {
    expect(sweepable({ namespace: 'team-a', owner: 'u1', ownerName: undefined }, deps, new Set())).toBe(true);
    expect(sweepable({ namespace: 'team-a', owner: 'u1', ownerName: 'web' }, deps, new Set(['u1']))).toBe(
      false,
    );
    expect(sweepable({ namespace: 'team-a', owner: undefined, ownerName: 'web' }, deps, new Set())).toBe(
      false,
    );
  });

  it('takes a surge pod out of scope only when this release reloaded its Deployment', () => {
    expect(sweepable({ namespace: 'team-old', owner: 'u2', ownerName: 'web' }, deps, new Set())).toBe(true);
    // Another release's surge pod (or a hand-made one) in a namespace we never reloaded stays.
    expect(sweepable({ namespace: 'team-old', owner: 'u3', ownerName: 'api' }, deps, new Set())).toBe(false);
    expect(sweepable({ namespace: 'team-b', owner: 'u4', ownerName: 'web' }, deps, new Set())).toBe(false);
    expect(sweepable({ namespace: 'team-old', owner: 'u2', ownerName: undefined }, deps, new Set())).toBe(
      false,
    );
  });

  it('finds the namespaces of the Deployments in the ledger', () => {
    expect(
      surgeNamespacesOf(['Deployment/b/web', 'StatefulSet/c/db', 'Deployment/a/api', 'Deployment/b/x']),
    ).toEqual(['a', 'b']);
  });
});
