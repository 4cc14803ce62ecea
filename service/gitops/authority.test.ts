import { describe, expect, it } from 'vitest';
import { parseRepoURL } from '../core/repo-url.ts';
import {
  appManages,
  appNamespaceAllowed,
  destinationPermitted,
  globMatches,
  namespacePatternMatches,
  projectAllows,
  sourcePermitted,
} from './authority.ts';

const web = { group: 'apps', kind: 'Deployment', namespace: 'team-a', name: 'web' };
const app = (resources: unknown[], destination: Record<string, string> = {}) => ({
  spec: {
    destination: { server: 'https://kubernetes.default.svc', namespace: 'team-a', ...destination },
  },
  status: { resources },
});

const r = parseRepoURL;

describe('appNamespaceAllowed', () => {
  it('allows an Application only in one of --argocd-namespaces', () => {
    expect(appNamespaceAllowed('argocd', ['argocd', 'apps'])).toEqual({ ok: true });
    expect(appNamespaceAllowed('team-b', ['argocd'])).toMatchObject({ ok: false, rule: 'app-namespace' });
  });
});

describe('appManages', () => {
  it('holds when status.resources list the exact workload', () => {
    expect(appManages(app([{ version: 'v1', ...web }]), web)).toEqual({ ok: true });
  });

  it('refuses an Application that lists another workload, or the same name in another namespace or kind', () => {
    for (const r of [
      { ...web, name: 'api' },
      { ...web, namespace: 'team-b' },
      { ...web, kind: 'StatefulSet' },
      { ...web, group: '' },
    ]) {
      expect(appManages(app([r]), web)).toMatchObject({ ok: false, rule: 'not-managed' });
    }
    expect(appManages({ spec: app([]).spec }, web)).toMatchObject({ ok: false, rule: 'not-managed' });
  });

  it('reads the destination server canonically, and refuses one that is not a plain cluster URL', () => {
    for (const server of ['https://Kubernetes.default.svc:443/', 'https://kubernetes.default.svc']) {
      expect(appManages(app([web], { server }), web), server).toEqual({ ok: true });
    }
    for (const server of [
      'https://kubernetes.default.svc/..',
      'https://kubernetes.default.svc/%2e%2e/x',
      'https://user@kubernetes.default.svc',
      'https://kubernetes.default.svc\\@evil.example',
    ]) {
      expect(appManages(app([web], { server }), web), server).toMatchObject({ rule: 'destination-cluster' });
    }
  });

  it('refuses an Application that deploys to another cluster, even if a resource name matches', () => {
    const remote = app([web], { server: 'https://other.example.com' });
    expect(appManages(remote, web)).toMatchObject({ ok: false, rule: 'destination-cluster' });
    expect(appManages(app([web], { server: '', name: 'in-cluster' }), web)).toEqual({ ok: true });
  });

  it("names the rule but not the other Application's repository", () => {
    const r = appManages({ spec: { source: { repoURL: 'https://git.example.com/secret-repo' } } }, web);
    expect(r.ok).toBe(false);
    expect(JSON.stringify(r)).not.toContain('secret-repo');
  });
});

describe('projectAllows', () => {
  const base = {
    appNamespace: 'argocd',
    controlNamespace: 'argocd',
    app: app([web]),
    workloadNamespace: 'team-a',
    repo: r('https://git.example.com/team-a/apps.git'),
  };
  const project = (spec: Record<string, unknown>) => ({
    spec: {
      sourceRepos: ['https://git.example.com/team-a/*'],
      destinations: [{ server: 'https://kubernetes.default.svc', namespace: 'team-a' }],
      ...spec,
    },
  });

  it('allows what the project allows, as Argo CD matches it', () => {
    expect(projectAllows(project({}), base)).toEqual({ ok: true });
  });

  it('matches an in-cluster destination by server or by name, whichever the project lists', () => {
    const byName = { ...base, app: app([web], { server: '', name: 'in-cluster' }) };
    expect(projectAllows(project({}), byName)).toEqual({ ok: true });
    const named = project({ destinations: [{ name: 'in-cluster', namespace: 'team-a' }] });
    expect(projectAllows(named, base)).toEqual({ ok: true });
    const remote = project({ destinations: [{ name: 'prod-eu', namespace: 'team-a' }] });
    expect(projectAllows(remote, base)).toMatchObject({ ok: false, rule: 'project-destination' });
  });

  it('refuses a workload namespace the project does not allow as a destination', () => {
    expect(projectAllows(project({}), { ...base, workloadNamespace: 'team-b' })).toMatchObject({
      ok: false,
      rule: 'project-destination',
    });
  });

  it('refuses a repository the project does not allow as a source', () => {
    expect(
      projectAllows(project({}), { ...base, repo: r('https://git.example.com/team-b/apps.git') }),
    ).toMatchObject({ ok: false, rule: 'project-source-repo' });
  });

  it("refuses an Application outside Argo CD's namespace unless the project lists its namespace", () => {
    const outside = { ...base, appNamespace: 'team-a-apps' };
    expect(projectAllows(project({}), outside)).toMatchObject({
      ok: false,
      rule: 'project-source-namespace',
    });
    expect(projectAllows(project({ sourceNamespaces: ['team-a-*'] }), outside)).toEqual({ ok: true });
  });
});

describe('sourcePermitted', () => {
  it('matches normalised URLs with globs that stop at /', () => {
    expect(sourcePermitted(['https://git.example.com/org/*'], r('https://GIT.example.com/org/app.git'))).toBe(
      true,
    );
    expect(sourcePermitted(['https://git.example.com/org/*'], r('https://git.example.com/org/a/b'))).toBe(
      false,
    );
    expect(sourcePermitted(['https://git.example.com/org/**'], r('https://git.example.com/org/a/b'))).toBe(
      true,
    );
    expect(sourcePermitted(['*'], r('https://anything.example/x'))).toBe(true);
    expect(sourcePermitted([], r('https://git.example.com/org/app'))).toBe(false);
  });

  it('a deny pattern that matches wins over any allow', () => {
    const repos = ['*', '!https://git.example.com/org/secret'];
    expect(sourcePermitted(repos, r('https://git.example.com/org/secret.git'))).toBe(false);
    expect(sourcePermitted(repos, r('https://git.example.com/org/public'))).toBe(true);
  });
});

describe('destinationPermitted', () => {
  const server = 'https://kubernetes.default.svc';
  it('matches server or name, and namespace, with deny patterns', () => {
    expect(destinationPermitted([{ server, namespace: 'team-*' }], server, '', 'team-a')).toBe(true);
    expect(
      destinationPermitted([{ name: 'in-cluster', namespace: 'team-a' }], '', 'in-cluster', 'team-a'),
    ).toBe(true);
    expect(destinationPermitted([{ server, namespace: 'team-a' }], server, '', 'team-b')).toBe(false);
    expect(
      destinationPermitted(
        [
          { server: '*', namespace: '*' },
          { server: '*', namespace: '!kube-system' },
        ],
        server,
        '',
        'kube-system',
      ),
    ).toBe(false);
  });
});

describe('globs', () => {
  it('reads the pattern subset AppProjects use and fails closed on a broken one', () => {
    expect(globMatches('team-{a,b}', 'team-b')).toBe(true);
    expect(globMatches('team-?', 'team-c')).toBe(true);
    expect(globMatches('team-[a-c]', 'team-d')).toBe(false);
    expect(globMatches('team-[!a]', 'team-a')).toBe(false);
    expect(globMatches('a.b', 'axb')).toBe(false);
    expect(globMatches('team-[a', 'team-[a')).toBe(false);
    expect(globMatches('team-{a', 'team-{a')).toBe(false);
    expect(namespacePatternMatches('/team-(a|b)/', 'team-a')).toBe(true);
    expect(namespacePatternMatches('/team-(a|b)/', 'xteam-a')).toBe(false);
  });
});
