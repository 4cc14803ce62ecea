import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  apiRequestURL,
  canonicalRepoPattern,
  canonicalServerURL,
  contactURL,
  parseRepoPrefix,
  parseRepoURL,
  RepoURLError,
  repoWithin,
  tryParseRepoURL,
} from './repo-url.ts';

const refused = (raw: string) => () => parseRepoURL(raw);

describe('parseRepoURL: one canonical identity', () => {
  it.each([
    ['https://GIT.example:443/team-a//repo.git/', 'https://git.example/team-a/repo'],
    ['https://git.example/team-a/repo', 'https://git.example/team-a/repo'],
    ['git@git.example:team-a/repo.git', 'ssh://git@git.example/team-a/repo'],
    ['ssh://git@Git.Example:22/team-a/repo', 'ssh://git@git.example/team-a/repo'],
    ['ssh://git@git.example:2222/team-a/repo', 'ssh://git@git.example:2222/team-a/repo'],
    ['http://127.0.0.1:80/team-a/repo.git', 'http://127.0.0.1/team-a/repo'],
    ['https://git.example/Team-A/Repo', 'https://git.example/Team-A/Repo'],
    ['https://dev.example/org/My%20Project/_git/r%7e%2D', 'https://dev.example/org/My%20Project/_git/r~-'],
    ['https://git.example/org/a%3ab', 'https://git.example/org/a%3Ab'],
    ['file:///srv/git/team-a/repo.git', 'file:///srv/git/team-a/repo'],
    ['  https://git.example/r  ', 'https://git.example/r'],
  ])('%s is %s', (raw, canonical) => {
    expect(parseRepoURL(raw).canonical).toBe(canonical);
  });

  it('gives git the canonical spelling, keeping scp form and .git as written', () => {
    expect(contactURL(parseRepoURL('git@git.example:team-a//repo.git'))).toBe(
      'git@git.example:team-a/repo.git',
    );
    // An absolute scp path is absolute in ssh:// too (a relative one would be the home directory's).
    expect(contactURL(parseRepoURL('git@git.example:/srv/repo'))).toBe('ssh://git@git.example/srv/repo');
    expect(contactURL(parseRepoURL('https://bot@GIT.example/team-a/repo/'))).toBe(
      'https://git.example/team-a/repo',
    );
    expect(parseRepoURL('https://bot@git.example/team-a/repo').user).toBe('bot');
  });

  it.each([
    ['https://git.example/team-a/..\\team-b\\repo', /backslash/],
    ['https://git.example/team-a/../team-b/repo', /\. or \.\. segment/],
    ['https://git.example/team-a/./repo', /\. or \.\. segment/],
    ['https://git.example/team-a/..;/team-b/repo', /\. or \.\. segment/],
    ['https://git.example/team-a/..;x=1/team-b/repo', /\. or \.\. segment/],
    ['https://git.example/team-a/%2e%2e/team-b/repo', /percent-encoded/],
    ['https://git.example/team-a/%2E./team-b/repo', /percent-encoded/],
    ['https://git.example/team-a%2fteam-b/repo', /percent-encoded/],
    ['https://git.example/team-a%5Cteam-b/repo', /percent-encoded/],
    ['https://git.example/team-a/%252e%252e/team-b/repo', /percent-encoded/],
    ['https://git.example/team-a/%00/repo', /control/],
    ['https://git.example/team-a/%zz/repo', /not a percent-encoded byte/],
    ['https://git.example/team-a/\u0000repo', /control/],
    ['https://git.example/team-a/\trepo', /control/],
    ['https://git.example/team-a/\uff0e\uff0e/repo', /non-ASCII/],
    ['https://bot:token@git.example/team-a/repo', /password/],
    ['https://bot:@git.example/team-a/repo', /password/],
    ['https://a@b@git.example/team-a/repo', /more than one @/],
    ['https://git.example/team-a/repo?x=1', /query or fragment/],
    ['https://git.example/team-a/repo#x', /query or fragment/],
    ['https://git.example/team-a/../repo.git', /\. or \.\. segment/],
    ['https://git.example/team-a/...git', /\. or \.\. segment/],
    ['https://git.example', /no repository path/],
    ['https://git.example:99999/r', /port/],
    ['https://git_example..com/r', /host/],
    ['ftp://git.example/r', /scheme ftp/],
    ['git@git.example:team-a/../team-b/repo', /\. or \.\. segment/],
    ['git@git.example:team-a/%2e%2e/team-b/repo', /percent-encoded/],
    ['git@git.example:team-a/..\\team-b\\repo', /backslash/],
    ['file://host/x', /names no host/],
    ['', /empty/],
  ])('refuses %j', (raw, why) => {
    expect(refused(raw)).toThrow(RepoURLError);
    expect(refused(raw)).toThrow(why);
    expect(tryParseRepoURL(raw)).toBeUndefined();
  });

  it('never repeats the URL (or a password in it) in its message', () => {
    expect(refused('https://bot:hunter2@git.example/r')).not.toThrow(/hunter2/);
  });
});

describe('prefixes, patterns and servers', () => {
  it('binds a prefix on segment boundaries, with the same scheme, user, host and port', () => {
    const p = parseRepoPrefix('https://git.example/team-a/') as NonNullable<
      ReturnType<typeof parseRepoPrefix>
    >;
    expect(repoWithin(parseRepoURL('https://git.example/team-a/x'), p)).toBe(true);
    expect(repoWithin(parseRepoURL('https://git.example/team-abc/x'), p)).toBe(false);
    expect(repoWithin(parseRepoURL('https://git.example:8443/team-a/x'), p)).toBe(false);
    // An https user name is who authenticates, not where: the same repository.
    expect(repoWithin(parseRepoURL('https://bot@git.example/team-a/x'), p)).toBe(true);
    const ssh = parseRepoPrefix('git@git.example:team-a');
    expect(ssh && repoWithin(parseRepoURL('admin@git.example:team-a/x'), ssh)).toBe(false);
    const host = parseRepoPrefix('https://GIT.example');
    expect(host && repoWithin(parseRepoURL('https://git.example/any/x'), host)).toBe(true);
    expect(parseRepoPrefix('git@git.example:team-a')?.canonical).toBe('ssh://git@git.example/team-a');
    expect(parseRepoPrefix('git@git.example')?.canonical).toBe('ssh://git@git.example/');
    expect(parseRepoPrefix('https://git.example/team-a/../team-b')).toBeUndefined();
  });

  it.each([
    ['git@git.example:team-a/*', 'ssh://git@git.example/team-a/*'],
    ['https://GIT.example:443/team-a/**', 'https://git.example/team-a/**'],
    ['https://git.example/team-a/repo.git', 'https://git.example/team-a/repo'],
    ['https://bot@git.example/team-a/*', 'https://git.example/team-a/*'],
    ['*', '*'],
  ])('spells the sourceRepos pattern %s as %s', (raw, canonical) => {
    expect(canonicalRepoPattern(raw)).toBe(canonicalRepoPattern(canonical));
    expect(canonicalRepoPattern(raw)).toBe(canonical);
  });

  it('reads a destination server canonically, and refuses one that is not a plain cluster URL', () => {
    expect(canonicalServerURL('https://Kubernetes.default.svc:443/')).toBe('https://kubernetes.default.svc');
    expect(canonicalServerURL('https://kubernetes.default.svc')).toBe('https://kubernetes.default.svc');
    expect(canonicalServerURL('https://k8s.example:6443/prefix/')).toBe('https://k8s.example:6443/prefix');
    for (const bad of [
      'https://kubernetes.default.svc/..',
      'https://kubernetes.default.svc/%2e%2e',
      'https://user@kubernetes.default.svc',
      'https://kubernetes.default.svc\\@evil.example',
      'ssh://kubernetes.default.svc',
      'kubernetes.default.svc',
    ]) {
      expect(canonicalServerURL(bad), bad).toBeUndefined();
    }
  });
});

describe('numeric hosts: one address, one identity (issue 35)', () => {
  it.each([
    'https://0x7f.1',
    'https://0x7f000001:6443',
    'https://2130706433',
    'https://127.000.0.1',
    'https://127.1',
    'https://0177.0.0.1',
    'https://256.0.0.1',
    'https://a.b.0x10',
  ])('refuses %s, which WHATWG URL reads as another spelling of an IPv4 address', (server) => {
    expect(canonicalServerURL(server)).toBeUndefined();
    expect(() => parseRepoURL(`${server}/org/repo`)).toThrow(/four decimal octets/);
  });

  it.each([
    ['https://127.0.0.1:6443', 'https://127.0.0.1:6443'],
    ['https://10.0.0.255', 'https://10.0.0.255'],
    ['https://k8s-1.example', 'https://k8s-1.example'],
    ['https://1password.example', 'https://1password.example'],
  ])('reads %s as %s', (server, canonical) => {
    expect(canonicalServerURL(server)).toBe(canonical);
  });

  it('apiRequestURL reaches the host the canonical parser reads, with the path prefix kept', () => {
    const u = apiRequestURL('https://Rancher.example/k8s/clusters/c-1/', '/api/v1/pods?watch=1');
    expect(u.host).toBe('rancher.example');
    expect(u.pathname + u.search).toBe('/k8s/clusters/c-1/api/v1/pods?watch=1');
    expect(apiRequestURL('https://127.0.0.1:6443', '/version').host).toBe('127.0.0.1:6443');
  });

  it('canonical servers and the HTTP client agree on the host (property)', () => {
    const label = fc.stringMatching(/^[a-z0-9x]{1,6}$/);
    fc.assert(
      fc.property(
        fc.array(label, { minLength: 1, maxLength: 4 }),
        fc.option(fc.integer({ min: 1, max: 65535 })),
        (labels, port) => {
          const server = `https://${labels.join('.')}${port ? `:${port}` : ''}`;
          const canonical = canonicalServerURL(server);
          if (canonical === undefined) return;
          expect(() => apiRequestURL(canonical, '/version')).not.toThrow();
        },
      ),
      { numRuns: 2000 },
    );
  });
});
