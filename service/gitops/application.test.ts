import { describe, expect, it } from 'vitest';
import { GitSourceError, gitSourceOf } from './application.ts';

const app = { namespace: 'argocd', name: 'shop' };
const application = (spec: Record<string, unknown>) => ({
  apiVersion: 'argoproj.io/v1alpha1',
  kind: 'Application',
  metadata: app,
  spec: { project: 'team-a', destination: { namespace: 'shop' }, ...spec },
});

describe('gitSourceOf', () => {
  it('reads repoURL, targetRevision, path and project of a single git source', () => {
    expect(
      gitSourceOf(
        application({
          source: { repoURL: 'https://git.example.com/shop.git', targetRevision: 'prod', path: 'apps/shop' },
        }),
        app,
      ),
    ).toEqual({
      app,
      project: 'team-a',
      repoURL: 'https://git.example.com/shop.git',
      targetRevision: 'prod',
      path: 'apps/shop',
    });
  });

  it("defaults the revision to HEAD (the remote's default branch) and '.' to the root", () => {
    const s = gitSourceOf(application({ source: { repoURL: 'https://g/r', path: '.' } }), app);
    expect(s.targetRevision).toBe('HEAD');
    expect(s.path).toBe('');
  });

  it('takes the last Helm values file, the one whose values win', () => {
    const s = gitSourceOf(
      application({
        source: {
          repoURL: 'https://g/r',
          path: 'charts/web',
          helm: { valueFiles: ['values.yaml', 'values-prod.yaml'] },
        },
      }),
      app,
    );
    expect(s.valuesFile).toBe('values-prod.yaml');
  });

  it('uses spec.sources over spec.source and skips Helm-repository charts and ref-only sources', () => {
    const s = gitSourceOf(
      application({
        source: { repoURL: 'https://ignored/r', path: 'x' },
        sources: [
          { repoURL: 'https://charts.example.com', chart: 'redis', targetRevision: '18.0.0' },
          { repoURL: 'https://g/values', ref: 'values' },
          { repoURL: 'https://g/manifests', path: 'apps/shop', targetRevision: 'main' },
        ],
      }),
      app,
    );
    expect(s).toMatchObject({ repoURL: 'https://g/manifests', path: 'apps/shop', targetRevision: 'main' });
  });

  it.each([
    [
      'a Helm-repository chart',
      { source: { repoURL: 'https://charts.example.com', chart: 'web', targetRevision: '1.0.0' } },
      /the chart web from the Helm repository/,
    ],
    ['an OCI source', { source: { repoURL: 'oci://registry/app', path: '.' } }, /OCI artifact/],
    [
      'two git sources',
      {
        sources: [
          { repoURL: 'https://g/a', path: 'a' },
          { repoURL: 'https://g/b', path: 'b' },
        ],
      },
      /has 2 git sources/,
    ],
    [
      'values from another source',
      { source: { repoURL: 'https://g/r', path: 'c', helm: { valueFiles: ['$values/prod.yaml'] } } },
      /not in the source's own repository path/,
    ],
    ['no source', {}, /has no source/],
  ])('refuses %s with a reason', (_what, spec, reason) => {
    expect(() => gitSourceOf(application(spec), app)).toThrow(GitSourceError);
    expect(() => gitSourceOf(application(spec), app)).toThrow(reason);
  });
});
