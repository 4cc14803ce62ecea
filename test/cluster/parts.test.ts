import { describe, expect, it } from 'vitest';
import type { ArgoCdEndpoints } from './argocd.ts';
import { modules } from './build.ts';
import { missingParts, modulesFor } from './control-plane.ts';
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

describe('what cluster up needs built', () => {
  it('builds the control plane alone for --no-argocd (npm run bench)', () => {
    expect(modulesFor({ argocd: false })).toEqual(['etcd', 'kubernetes', 'kwok']);
    expect(modulesFor({ argocd: false, flux: true })).toEqual(['etcd', 'kubernetes', 'kwok']);
  });

  it('builds Argo CD, Argo Rollouts and Redis but no Flux for the Argo CD demo ({ flux: false })', () => {
    expect(modulesFor({ flux: false })).toEqual([
      'etcd',
      'kubernetes',
      'kwok',
      'argocd',
      'rollouts',
      'redis',
    ]);
  });

  it("builds Flux too by default (the Flux demo, which reads from the Argo CD part's git server)", () => {
    expect(modulesFor({})).toEqual(['etcd', 'kubernetes', 'kwok', 'argocd', 'rollouts', 'redis', 'flux']);
    expect(modulesFor()).toEqual(modulesFor({ argocd: true, flux: true }));
  });

  it('names only modules build.ts builds, and leaves out only Helm and the Lua VM, which no process of up runs', () => {
    const all = modules();
    expect(all).toEqual(expect.arrayContaining(modulesFor()));
    expect(all.filter((m) => !modulesFor().includes(m)).sort()).toEqual(['helm', 'lua']);
  });
});
