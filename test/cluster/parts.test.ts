import { describe, expect, it } from 'vitest';
import type { ArgoCdEndpoints } from './argocd.ts';
import { missingParts } from './control-plane.ts';
import type { FluxEndpoints } from './flux.ts';

const argocd = { namespace: 'argocd' } as ArgoCdEndpoints;
const flux = { namespace: 'flux-system' } as FluxEndpoints;

describe('cluster up on a running environment', () => {
  it('starts Argo CD and then Flux when the running environment has neither (started with --no-argocd)', () => {
    expect(missingParts({}, {})).toEqual(['argocd', 'flux']);
    expect(missingParts({}, { argocd: true })).toEqual(['argocd', 'flux']);
    expect(missingParts({}, { flux: false })).toEqual(['argocd']);
  });

  it('starts Flux alone next to a running Argo CD that came up without it', () => {
    expect(missingParts({ argocd }, {})).toEqual(['flux']);
  });

  it('starts nothing when every asked-for part runs, or when less is asked than runs', () => {
    expect(missingParts({ argocd, flux }, {})).toEqual([]);
    expect(missingParts({ argocd }, { flux: false })).toEqual([]);
    expect(missingParts({ argocd }, { argocd: false })).toEqual([]);
    expect(missingParts({}, { argocd: false })).toEqual([]);
  });
});
