import { describe, expect, it } from 'vitest';
import type { ArgoCdEndpoints } from './argocd.ts';
import { missingParts } from './control-plane.ts';

const argocd = { namespace: 'argocd' } as ArgoCdEndpoints;

describe('cluster up on a running environment', () => {
  it('starts Argo CD when the running environment has none (started with --no-argocd)', () => {
    expect(missingParts({}, {})).toEqual(['argocd']);
    expect(missingParts({}, { argocd: true })).toEqual(['argocd']);
  });

  it('starts nothing when every asked-for part runs, or when less is asked than runs', () => {
    expect(missingParts({ argocd }, {})).toEqual([]);
    expect(missingParts({ argocd }, { argocd: false })).toEqual([]);
    expect(missingParts({}, { argocd: false })).toEqual([]);
  });
});
