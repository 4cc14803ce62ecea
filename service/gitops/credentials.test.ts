import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseRepoURL } from '../core/repo-url.ts';
import {
  allowedByList,
  boundTo,
  credentialsFromDir,
  credentialsFromSecret,
  matchRepoSecret,
  type RepoSecret,
} from './credentials.ts';

const r = parseRepoURL;

const secret = (name: string, type: string, data: Record<string, string>): RepoSecret => ({
  namespace: 'argocd',
  name,
  type,
  data,
});

describe("Argo CD's repository Secrets, over canonical identities", () => {
  it('matches a repository Secret whose url is another spelling of the same repository', () => {
    const secrets = [
      secret('repo', 'repository', { url: 'ssh://git@github.com:22/org/repo', password: 'p' }),
    ];
    expect(matchRepoSecret(secrets, r('git@github.com:org/repo.git'), 'default')?.name).toBe('repo');
    expect(matchRepoSecret(secrets, r('https://github.com/org/repo'), 'default')).toBeUndefined();
  });

  it("counts the path's case (Argo CD does not): a case-sensitive server holds two repositories", () => {
    const secrets = [secret('repo', 'repository', { url: 'https://GitHub.com/Org/Repo.git', password: 'p' })];
    expect(matchRepoSecret(secrets, r('https://github.com/Org/Repo'), 'default')?.name).toBe('repo');
    expect(matchRepoSecret(secrets, r('https://github.com/org/repo'), 'default')).toBeUndefined();
  });
});

describe('matchRepoSecret', () => {
  const url = 'https://git.example.com/team/shop.git';

  it('prefers the repository Secret of the same URL over any credential template', () => {
    const secrets = [
      secret('creds', 'repo-creds', { url: 'https://git.example.com/team', password: 'p1' }),
      secret('repo', 'repository', { url: 'https://git.example.com/team/shop', password: 'p2' }),
    ];
    expect(matchRepoSecret(secrets, r(url), 'default')?.name).toBe('repo');
  });

  it("prefers a repository Secret scoped to the Application's project, then one without a project", () => {
    const secrets = [
      secret('global', 'repository', { url, password: 'p' }),
      secret('other-project', 'repository', { url, password: 'p', project: 'team-b' }),
      secret('mine', 'repository', { url, password: 'p', project: 'team-a' }),
    ];
    expect(matchRepoSecret(secrets, r(url), 'team-a')?.name).toBe('mine');
    expect(matchRepoSecret(secrets, r(url), 'team-c')?.name).toBe('global');
  });

  it('takes the credential template with the longest matching URL prefix, case-insensitively', () => {
    const secrets = [
      secret('host', 'repo-creds', { url: 'https://git.example.com', password: 'p' }),
      secret('team', 'repo-creds', { url: 'https://GIT.example.com/team/', password: 'p' }),
      secret('elsewhere', 'repo-creds', { url: 'https://git.example.org/team', password: 'p' }),
    ];
    expect(matchRepoSecret(secrets, r(url), 'default')?.name).toBe('team');
    expect(matchRepoSecret(secrets, r('https://git.example.com/ops/infra'), 'default')?.name).toBe('host');
    expect(matchRepoSecret(secrets, r('https://other.example.com/x'), 'default')).toBeUndefined();
  });

  it('falls back to a template when the repository Secret holds no credentials (a public repo entry)', () => {
    const secrets = [
      secret('repo', 'repository', { url }),
      secret('creds', 'repo-creds', { url: 'https://git.example.com/', username: 'bot', password: 'p' }),
    ];
    expect(matchRepoSecret(secrets, r(url), 'default')?.name).toBe('creds');
  });

  it("tries Argo CD's write credentials before its read credentials", () => {
    const secrets = [
      secret('read', 'repository', { url, password: 'read-only' }),
      secret('write', 'repo-write-creds', { url: 'https://git.example.com/', password: 'can-push' }),
    ];
    expect(matchRepoSecret(secrets, r(url), 'default')?.name).toBe('write');
  });

  it('matches scp-like SSH URLs by prefix as Argo CD does', () => {
    const secrets = [secret('ssh', 'repo-creds', { url: 'git@git.example.com:team', sshPrivateKey: 'k' })];
    expect(matchRepoSecret(secrets, r('git@git.example.com:team/shop.git'), 'default')?.name).toBe('ssh');
  });
});

describe('credentials bound to their URL', () => {
  it('binds a template only on a path-segment boundary, with the same scheme and host', () => {
    const org = 'https://github.com/org';
    expect(boundTo(r('https://github.com/org/app.git'), org)).toBe(true);
    expect(boundTo(r('https://github.com/org'), org)).toBe(true);
    expect(boundTo(r('https://github.com/org/app'), `${org}/`)).toBe(true);
    // Argo CD's strings.HasPrefix matches all of these; a credential must not.
    expect(boundTo(r('https://github.com/org-evil/app'), org)).toBe(false);
    expect(boundTo(r('https://github.com.attacker.net/org/app'), 'https://github.com')).toBe(false);
    expect(boundTo(r('https://github.com:4430/org/app'), 'https://github.com')).toBe(false);
    expect(boundTo(r('https://github.com@attacker.net/org/app'), 'https://github.com')).toBe(false);
    expect(boundTo(r('http://github.com/org/app'), org)).toBe(false);
    expect(boundTo(r('git@github.com:org/app'), 'git@github.com:org')).toBe(true);
    expect(boundTo(r('git@github.com:org-evil/app'), 'git@github.com:org')).toBe(false);
  });

  it('never matches a prefix-colliding credential template', () => {
    const secrets = [secret('org', 'repo-creds', { url: 'https://github.com/org', password: 'p' })];
    expect(matchRepoSecret(secrets, r('https://github.com/org-evil/x'), 'default')).toBeUndefined();
    expect(matchRepoSecret(secrets, r('https://github.com.attacker.net/org/x'), 'default')).toBeUndefined();
    expect(matchRepoSecret(secrets, r('https://github.com/org/x'), 'default')?.name).toBe('org');
  });

  it('reads --git-credentials-urls entries as URL prefixes or bare hosts', () => {
    const list = ['git.example.com', 'https://code.example.org/team-a'];
    expect(allowedByList(r('https://git.example.com/any/repo'), list)).toBe(true);
    expect(allowedByList(r('git@git.example.com:any/repo.git'), list)).toBe(true);
    expect(allowedByList(r('ssh://git@git.example.com/any/repo'), list)).toBe(true);
    expect(allowedByList(r('http://git.example.com/any/repo'), list)).toBe(false);
    expect(allowedByList(r('https://git.example.com.attacker.net/x'), list)).toBe(false);
    expect(allowedByList(r('https://code.example.org/team-a/app'), list)).toBe(true);
    expect(allowedByList(r('https://code.example.org/team-b/app'), list)).toBe(false);
    expect(allowedByList(r('https://evil.example/x'), list)).toBe(false);
    expect(allowedByList(r('https://git.example.com/x'), [])).toBe(false);
  });
});

describe('credentials for the writer', () => {
  let dir: string;
  let tmp: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'gr-creds-'));
    tmp = await mkdtemp(path.join(tmpdir(), 'gr-creds-tmp-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(tmp, { recursive: true, force: true });
  });

  it('reads an HTTPS token from a mounted Secret dir, without the trailing newline', async () => {
    await writeFile(path.join(dir, 'username'), 'bot\n');
    await writeFile(path.join(dir, 'token'), 'tok3n\n');
    const c = await credentialsFromDir(dir, r('https://git.example.com/r.git'), ['git.example.com'], tmp);
    expect(c.credentials).toEqual({ username: 'bot', token: 'tok3n' });
    expect(c.source).toBe('--git-credentials-dir');
  });

  it('accepts kubernetes.io/basic-auth keys (password)', async () => {
    await writeFile(path.join(dir, 'password'), 'pw');
    const c = await credentialsFromDir(dir, r('https://git.example.com/r.git'), ['git.example.com'], tmp);
    expect(c.credentials).toEqual({ token: 'pw' });
  });

  it('copies an SSH key to a private temp file for ssh, and removes it afterwards', async () => {
    await writeFile(path.join(dir, 'ssh-privatekey'), 'KEY');
    await writeFile(path.join(dir, 'known_hosts'), 'git.example.com ssh-ed25519 AAAA\n');
    const c = await credentialsFromDir(dir, r('git@git.example.com:team/shop.git'), ['git.example.com'], tmp);
    const creds = c.credentials as { sshKeyPath: string; knownHostsPath: string };
    expect(await readFile(creds.sshKeyPath, 'utf8')).toBe('KEY\n');
    expect((await stat(creds.sshKeyPath)).mode & 0o777).toBe(0o600);
    expect((await stat(path.dirname(creds.sshKeyPath))).mode & 0o777).toBe(0o700);
    expect(await readFile(creds.knownHostsPath, 'utf8')).toContain('ssh-ed25519');
    await c.cleanup();
    expect(await readdir(tmp)).toEqual([]);
  });

  it('reads nothing for a repository outside --git-credentials-urls', async () => {
    await writeFile(path.join(dir, 'token'), 'tok');
    const c = await credentialsFromDir(dir, r('https://attacker.example/r.git'), ['git.example.com'], tmp);
    expect(c.credentials).toBeUndefined();
  });

  it('gives no credentials when the dir has none for the URL scheme', async () => {
    await writeFile(path.join(dir, 'token'), 'tok');
    const c = await credentialsFromDir(dir, r('git@git.example.com:team/shop.git'), ['git.example.com'], tmp);
    expect(c.credentials).toBeUndefined();
  });

  it('turns an Argo CD Secret into a token, and says which Secret it was', async () => {
    const c = await credentialsFromSecret(
      secret('repo-1', 'repository', { url: 'https://g/r', username: 'u', password: 'p' }),
      r('https://g/r'),
      undefined,
      tmp,
    );
    expect(c?.credentials).toEqual({ username: 'u', token: 'p' });
    expect(c?.source).toBe('Argo CD Secret argocd/repo-1 (repository)');
    expect(c?.kind).toBe('an Argo CD repository Secret');
  });

  it('declines an Argo CD Secret whose only credential the writer cannot use (a GitHub App)', async () => {
    const s = secret('app', 'repo-creds', { url: 'https://github.com/org', githubAppPrivateKey: 'k' });
    expect(await credentialsFromSecret(s, r('https://github.com/org/r'), undefined, tmp)).toBeUndefined();
  });
});
