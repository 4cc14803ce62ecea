import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { customAnswers as api, forbidden } from '../../test/support/custom-answers.ts';
import { parseRepoURL } from '../core/repo-url.ts';
import { GitSourceError } from '../gitops/application.ts';
import {
  authorizedFluxGitSource,
  branchOf,
  fluxClaim,
  fluxGitSourceOf,
  inventoryLists,
  repoPathOf,
} from './git-source.ts';

const workload = { group: 'apps', kind: 'Deployment', namespace: 'shop', name: 'web' };
const ks = { namespace: 'flux-system', name: 'apps' };

const REVISION = 'main@sha1:0123456789abcdef0123456789abcdef01234567';

const kustomization = (
  o: {
    path?: string;
    sourceRef?: Record<string, string>;
    ids?: string[];
    generation?: number;
    observedGeneration?: number;
    ready?: string;
    lastAppliedRevision?: string;
    targetNamespace?: string;
  } = {},
) => ({
  metadata: { name: 'apps', namespace: 'flux-system', generation: o.generation ?? 3 },
  spec: {
    path: o.path ?? './apps/shop',
    sourceRef: o.sourceRef ?? { kind: 'GitRepository', name: 'fleet' },
    ...(o.targetNamespace !== undefined ? { targetNamespace: o.targetNamespace } : {}),
  },
  status: {
    observedGeneration: o.observedGeneration ?? 3,
    lastAppliedRevision: o.lastAppliedRevision ?? REVISION,
    conditions: [{ type: 'Ready', status: o.ready ?? 'True', reason: 'ReconciliationSucceeded' }],
    inventory: {
      entries: (o.ids ?? ['shop_web_apps_Deployment', 'shop_web-config__ConfigMap']).map((id) => ({
        id,
        v: 'v1',
      })),
    },
  },
});

const gitRepository = (spec: Record<string, unknown> = {}, revision = REVISION) => ({
  metadata: { name: 'fleet', namespace: 'flux-system' },
  spec: { url: 'https://git.example.com/fleet.git', ref: { branch: 'main' }, ...spec },
  status: { artifact: { revision } },
});

describe('fluxClaim', () => {
  it('reads the Kustomization both kustomize-controller labels name, and nothing from one label alone', () => {
    expect(
      fluxClaim({
        'kustomize.toolkit.fluxcd.io/name': 'apps',
        'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
      }),
    ).toEqual(ks);
    expect(fluxClaim({ 'kustomize.toolkit.fluxcd.io/name': 'apps' })).toBeUndefined();
    expect(fluxClaim({})).toBeUndefined();
  });
});

describe('inventoryLists', () => {
  it('matches the exact inventory id of the workload (namespace, name, group and kind)', () => {
    expect(inventoryLists(kustomization(), workload)).toBe(true);
    expect(inventoryLists(kustomization(), { ...workload, name: 'api' })).toBe(false);
    expect(inventoryLists(kustomization(), { ...workload, namespace: 'other' })).toBe(false);
    expect(inventoryLists(kustomization(), { ...workload, kind: 'StatefulSet' })).toBe(false);
    expect(inventoryLists(kustomization({ ids: ['shop_web__Deployment'] }), workload)).toBe(false);
    expect(inventoryLists({ status: {} }, workload)).toBe(false);
    expect(inventoryLists(undefined, workload)).toBe(false);
  });
});

describe('branchOf', () => {
  it.each([
    [{ branch: 'main' }, 'main'],
    [{}, 'master'],
    [undefined, 'master'],
    [{ name: 'refs/heads/release/1.x' }, 'release/1.x'],
    [{ name: 'refs/heads/prod', branch: 'main' }, 'prod'],
  ])('ref %j follows branch %s', (ref, branch) => {
    expect(branchOf({ spec: { ref } }, 'it')).toBe(branch);
  });

  it.each([
    [{ tag: 'v1.0.0', branch: 'main' }, /the tag v1\.0\.0/],
    [{ semver: '>=1.0.0' }, /semver range/],
    [{ commit: 'abc123', branch: 'main' }, /commit abc123/],
    [{ name: 'refs/tags/v1' }, /reference refs\/tags\/v1/],
    [{ name: 'refs/pull/420/head' }, /reference refs\/pull/],
  ])('refuses ref %j: a commit to a branch would never be reconciled', (ref, why) => {
    expect(() => branchOf({ spec: { ref } }, 'it')).toThrow(GitSourceError);
    expect(() => branchOf({ spec: { ref } }, 'it')).toThrow(why);
  });
});

describe('repoPathOf', () => {
  it.each([
    ['./apps/shop', 'apps/shop'],
    ['apps/shop/', 'apps/shop'],
    ['/apps/shop', 'apps/shop'],
    ['./', ''],
    ['', ''],
    [undefined, ''],
    ['./apps/./shop', 'apps/shop'],
  ])('reads the path %j as %j', (path, want) => {
    expect(repoPathOf({ spec: { path } }, 'it')).toBe(want);
  });

  it.each(['../other', './apps/../../other', 'apps\\..\\x'])('refuses the path %j', (path) => {
    expect(() => repoPathOf({ spec: { path } }, 'it')).toThrow(GitSourceError);
  });
});

describe('fluxGitSourceOf', () => {
  it('gives the canonical repository, the branch and the path', () => {
    expect(fluxGitSourceOf(kustomization(), gitRepository(), ks)).toEqual({
      syncedBy: 'Flux',
      app: ks,
      project: '',
      repo: parseRepoURL('https://git.example.com/fleet.git'),
      repoURL: 'https://git.example.com/fleet.git',
      targetRevision: 'main',
      path: 'apps/shop',
      namespaceRequired: true,
    });
    // With targetNamespace, Flux puts every object there: a manifest needs no namespace of its own.
    expect(
      fluxGitSourceOf(kustomization({ targetNamespace: 'shop' }), gitRepository(), ks),
    ).not.toHaveProperty('namespaceRequired');
  });

  it.each([
    'https://git.example/team-a/../team-b/repo',
    'https://git.example/team-a/%2e%2e/team-b/repo',
    'ssh://git@git.example/team-a/..\\team-b',
    'https://bot:token@git.example/team-a/repo',
  ])('refuses the repository URL %s with rule repo-url, without repeating it', (url) => {
    let err: unknown;
    try {
      fluxGitSourceOf(kustomization(), gitRepository({ url }), ks);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ name: 'GitRefused', rule: 'repo-url' });
    expect((err as Error).message).not.toContain(url);
    expect((err as Error).message).not.toContain('token');
  });

  it('refuses a GitRepository without url', () => {
    expect(() => fluxGitSourceOf(kustomization(), { spec: {} }, ks)).toThrow(/has no url/);
  });
});

describe('authorizedFluxGitSource', () => {
  const denied = forbidden();
  const o = { fluxNamespaces: ['flux-system'] };

  it('returns the source of a Kustomization whose inventory lists the workload', async () => {
    const custom = api({ kustomizations: kustomization(), gitrepositories: gitRepository() });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).resolves.toMatchObject({
      syncedBy: 'Flux',
      repoURL: 'https://git.example.com/fleet.git',
      targetRevision: 'main',
      path: 'apps/shop',
    });
    expect(custom.reads).toEqual(['kustomizations/flux-system/apps', 'gitrepositories/flux-system/fleet']);
  });

  it('does not even read a Kustomization outside --flux-namespaces', async () => {
    const custom = api({ kustomizations: kustomization(), gitrepositories: gitRepository() });
    await expect(
      authorizedFluxGitSource(custom, { namespace: 'shop', name: 'apps' }, workload, o),
    ).rejects.toMatchObject({ rule: 'app-namespace' });
    expect(custom.reads).toEqual([]);
  });

  it('refuses a Kustomization whose inventory does not list the workload (a forged label), before reading its source', async () => {
    const custom = api({
      kustomizations: kustomization({ ids: ['other_web_apps_Deployment'] }),
      gitrepositories: gitRepository(),
    });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).rejects.toMatchObject({
      rule: 'not-managed',
    });
    expect(custom.reads).toEqual(['kustomizations/flux-system/apps']);
  });

  it('refuses a GitRepository in another namespace (a cross-namespace sourceRef), even one of --flux-namespaces, before reading it', async () => {
    for (const namespace of ['team-b', 'flux-other']) {
      const custom = api({
        kustomizations: kustomization({ sourceRef: { kind: 'GitRepository', name: 'x', namespace } }),
        gitrepositories: gitRepository(),
      });
      await expect(
        authorizedFluxGitSource(custom, ks, workload, { fluxNamespaces: ['flux-system', 'flux-other'] }),
      ).rejects.toMatchObject({ rule: 'source-namespace' });
      expect(custom.reads).toEqual(['kustomizations/flux-system/apps']);
    }
  });

  it.each([
    [
      'its current spec not yet applied (a repointed sourceRef or path)',
      { generation: 4, observedGeneration: 3 },
    ],
    ['not Ready', { ready: 'False' }],
    ['Ready unknown (reconciling)', { ready: 'Unknown' }],
    ['its last applied revision not its source artifact', { lastAppliedRevision: 'main@sha1:ffff' }],
  ])('refuses a Kustomization whose inventory may not come from its source: %s', async (_, fields) => {
    const custom = api({ kustomizations: kustomization(fields), gitrepositories: gitRepository() });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).rejects.toMatchObject({
      rule: 'not-applied',
    });
  });

  it('refuses a GitRepository without an artifact yet', async () => {
    const custom = api({
      kustomizations: kustomization(),
      gitrepositories: { ...gitRepository(), status: {} },
    });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).rejects.toMatchObject({
      rule: 'not-applied',
    });
  });

  it("refuses a Kustomization whose targetNamespace is not the workload's", async () => {
    const custom = api({
      kustomizations: kustomization({ targetNamespace: 'team-b' }),
      gitrepositories: gitRepository(),
    });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).rejects.toMatchObject({
      rule: 'not-managed',
    });
    const same = api({
      kustomizations: kustomization({ targetNamespace: 'shop' }),
      gitrepositories: gitRepository(),
    });
    await expect(authorizedFluxGitSource(same, ks, workload, o)).resolves.toMatchObject({
      path: 'apps/shop',
    });
  });

  it('accepts only a Kustomization Ready at its source artifact with its spec observed (property)', async () => {
    const gen = fc.record({
      generation: fc.integer({ min: 1, max: 3 }),
      observedGeneration: fc.integer({ min: 1, max: 3 }),
      ready: fc.constantFrom('True', 'False', 'Unknown'),
      lastAppliedRevision: fc.constantFrom(REVISION, 'main@sha1:other', ''),
      artifact: fc.constantFrom(REVISION, 'main@sha1:other'),
      targetNamespace: fc.constantFrom(undefined, 'shop', 'team-b'),
    });
    await fc.assert(
      fc.asyncProperty(gen, async (k) => {
        const custom = api({
          kustomizations: kustomization(k),
          gitrepositories: gitRepository({}, k.artifact),
        });
        const ok = await authorizedFluxGitSource(custom, ks, workload, o).then(
          () => true,
          () => false,
        );
        expect(ok).toBe(
          k.generation === k.observedGeneration &&
            k.ready === 'True' &&
            k.lastAppliedRevision === k.artifact &&
            k.targetNamespace !== 'team-b',
        );
      }),
      { numRuns: 300 },
    );
  });

  it('says a Kustomization that reads an OCIRepository or a Bucket has no git source', async () => {
    const custom = api({
      kustomizations: kustomization({ sourceRef: { kind: 'OCIRepository', name: 'x' } }),
    });
    await expect(authorizedFluxGitSource(custom, ks, workload, o)).rejects.toThrow(
      /reads a OCIRepository, not a GitRepository/,
    );
  });

  it('refuses, saying how to grant it, when the Kustomization or its GitRepository cannot be read', async () => {
    await expect(
      authorizedFluxGitSource(api({ kustomizations: denied }), ks, workload, o),
    ).rejects.toMatchObject({ rule: 'app-unreadable', message: expect.stringMatching(/forbidden.*grant/) });
    await expect(
      authorizedFluxGitSource(
        api({ kustomizations: kustomization(), gitrepositories: denied }),
        ks,
        workload,
        o,
      ),
    ).rejects.toMatchObject({
      rule: 'app-unreadable',
      message: expect.stringMatching(/GitRepository \(forbidden/),
    });
  });
});
