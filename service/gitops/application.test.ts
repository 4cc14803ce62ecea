import { describe, expect, it } from 'vitest';
import { customAnswers as api, forbidden } from '../../test/support/custom-answers.ts';
import { parseRepoURL } from '../core/repo-url.ts';
import { authorizedGitSource, GitSourceError, gitSourceOf } from './application.ts';
import { GitRefused } from './refusal.ts';

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
      syncedBy: 'Argo CD',
      app,
      project: 'team-a',
      repo: parseRepoURL('https://git.example.com/shop.git'),
      repoURL: 'https://git.example.com/shop.git',
      targetRevision: 'prod',
      path: 'apps/shop',
    });
  });

  it.each([
    'https://git.example/team-a/..\\team-b\\repo',
    'https://git.example/team-a/../team-b/repo',
    'https://git.example/team-a/%2e%2e/team-b/repo',
    'git@git.example:team-a/../team-b/repo',
    'https://bot:token@git.example/team-a/repo',
  ])('refuses the repository URL %s with rule repo-url, without repeating it', (repoURL) => {
    let err: unknown;
    try {
      gitSourceOf(application({ source: { repoURL, path: 'apps' } }), app);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GitRefused);
    expect(err).toMatchObject({ rule: 'repo-url', message: expect.stringMatching(/^git write refused/) });
    expect((err as Error).message).not.toContain('team-b');
    expect((err as Error).message).not.toContain('token');
  });

  it('gives the writer the canonical spelling, not the raw string', () => {
    const s = gitSourceOf(
      application({ source: { repoURL: ' https://GIT.example:443/team-a//repo.git/ ', path: 'apps' } }),
      app,
    );
    expect(s.repoURL).toBe('https://git.example/team-a/repo.git');
    expect(s.repo.canonical).toBe('https://git.example/team-a/repo');
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

describe('authorizedGitSource', () => {
  const workload = { group: 'apps', kind: 'Deployment', namespace: 'shop', name: 'web' };
  const managed = {
    ...application({ source: { repoURL: 'https://git.example.com/shop.git', path: 'apps/shop' } }),
    spec: {
      project: 'team-a',
      source: { repoURL: 'https://git.example.com/shop.git', path: 'apps/shop' },
      destination: { server: 'https://kubernetes.default.svc', namespace: 'shop' },
    },
    status: { resources: [workload] },
  };
  const project = {
    spec: {
      sourceRepos: ['https://git.example.com/*'],
      destinations: [{ server: 'https://kubernetes.default.svc', namespace: 'shop' }],
    },
  };
  const denied = forbidden();
  const o = { argocdNamespaces: ['argocd'] };

  it('returns the source of an Application that manages the workload and whose project allows it', async () => {
    const custom = api({ applications: managed, appprojects: project });
    await expect(authorizedGitSource(custom, app, workload, o)).resolves.toMatchObject({
      repoURL: 'https://git.example.com/shop.git',
      path: 'apps/shop',
    });
    expect(custom.reads).toEqual(['applications/argocd/shop', 'appprojects/argocd/team-a']);
  });

  it('does not even read an Application outside --argocd-namespaces', async () => {
    const custom = api({ applications: managed, appprojects: project });
    await expect(
      authorizedGitSource(custom, { namespace: 'team-b', name: 'shop' }, workload, o),
    ).rejects.toMatchObject({ rule: 'app-namespace' });
    expect(custom.reads).toEqual([]);
  });

  it('refuses git mode, saying how to grant it, when the Application or its project cannot be read', async () => {
    await expect(authorizedGitSource(api({ applications: denied }), app, workload, o)).rejects.toMatchObject({
      rule: 'app-unreadable',
      message: expect.stringMatching(/forbidden.*grant/),
    });
    await expect(
      authorizedGitSource(api({ applications: managed, appprojects: denied }), app, workload, o),
    ).rejects.toMatchObject({ rule: 'project-unreadable' });
  });
});
