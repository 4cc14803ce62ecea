// Git mode in a shared cluster, tried as a hostile tenant would: a team that holds rights only in its
// own namespace names other teams' Applications, repositories and hosts on its own workloads, and
// must not get the service to clone, push or send a credential anywhere on its behalf. The service
// runs as a child process against the real control plane; the repositories sit on real git servers
// (git http-backend on loopback) that record every request and its headers. Each attack ends with no
// request to the repository or host it aimed at, no credential sent, and a ReloadFailed Event that
// names the rule without naming another team's repository, project or Secret.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { CoreV1Event } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import {
  createManagedApplication,
  createProject,
  ensureAppProjectCrd,
  IN_CLUSTER,
} from '../support/app-project.ts';
import { type GitServer, inspect, startGitServer } from '../support/git-server.ts';
import {
  changeConfig,
  gitModeDeployment,
  credentialsDir as makeCredentialsDir,
  manifest,
  startGitModeService,
} from '../support/git-tenant.ts';
import { adminKubeConfig, it } from '../support/kube.ts';
import { waitForEvent } from '../support/observe.ts';
import { killAll } from '../support/service.ts';
import { configMap } from '../support/workloads.ts';

const APP_PATH = 'apps';

/** The team's own git server, and one on another loopback host that someone else controls. */
let server: GitServer;
let attacker: GitServer;
let scratch: string;
beforeAll(async () => {
  server = await startGitServer();
  // It asks for nothing and takes whatever it is sent.
  attacker = await startGitServer({ host: '127.0.0.2', open: true });
  scratch = await mkdtemp(path.join(tmpdir(), 'tenancy-'));
  await ensureAppProjectCrd(adminKubeConfig());
});
afterEach(async () => {
  await killAll();
  server.redirectTo = undefined;
});
afterAll(async () => {
  await server?.close();
  await attacker?.close();
  await rm(scratch, { recursive: true, force: true });
});

const base = (s: GitServer) => s.url('x').replace(/x\.git$/, '');
const bare = (s: GitServer, repo: string) => path.join(s.root, `${repo}.git`);
const requestsFor = (s: GitServer, repo: string) => s.requests.filter((r) => r.repo === repo);

const deployment = gitModeDeployment;
const start = startGitModeService;
const credentialsDir = (token: string) => makeCredentialsDir(scratch, server.username, token);

/** Everything an Event must not carry: another team's repository, project or Secret. */
function expectNoneOf(ev: CoreV1Event, secrets: string[]): void {
  for (const s of secrets) expect(ev.message).not.toContain(s);
}

describe('git mode with hostile annotations', () => {
  it('uses an Application only when it provably manages the workload: no clone, no push, a ReloadFailed naming the rule', async ({
    kube,
    namespace,
  }) => {
    const team = `${namespace}-team`;
    const victim = `${namespace}-payments`;
    const outside = `${namespace}-x`;
    const victimNs = `${namespace}-pay`;
    const attackers = ['w-ns', 'w-unlisted', 'w-project', 'w-repo'];
    await server.createRepo(team, { [`${APP_PATH}/own.yaml`]: manifest('own') });
    // The victim's repository holds workloads of the names the tenant picked, so a push would land.
    await server.createRepo(
      victim,
      Object.fromEntries(attackers.map((n) => [`${APP_PATH}/${n}.yaml`, manifest(n)])),
    );
    for (const ns of [outside, victimNs])
      await kube.core.createNamespace({ body: { metadata: { name: ns } } });
    try {
      await createProject(kube.custom, namespace, 'team', {
        sourceRepos: [server.url(team)],
        destinations: [{ server: IN_CLUSTER, namespace }],
      });
      await createProject(kube.custom, namespace, 'payments-project', {
        sourceRepos: [server.url(victim)],
        destinations: [{ server: IN_CLUSTER, namespace: victimNs }],
        sourceNamespaces: [outside],
      });
      const victimApp = { project: 'payments-project', repoURL: server.url(victim), path: APP_PATH };
      const at = (name: string) => [{ kind: 'Deployment', namespace, name }];
      // The control: the team's own Application, which manages `own`.
      await createManagedApplication(kube.custom, {
        namespace,
        name: 'team-app',
        project: 'team',
        repoURL: server.url(team),
        path: APP_PATH,
        destinationNamespace: namespace,
        manages: at('own'),
      });
      // An Application in a namespace Argo CD does not serve apps from (even one claiming the workload).
      await createManagedApplication(kube.custom, {
        namespace: outside,
        name: 'payments',
        ...victimApp,
        destinationNamespace: namespace,
        manages: at('w-ns'),
      });
      // Another team's Application that does not list the workload.
      await createManagedApplication(kube.custom, {
        namespace,
        name: 'payments',
        ...victimApp,
        destinationNamespace: victimNs,
        manages: [{ kind: 'Deployment', namespace: victimNs, name: 'w-unlisted' }],
      });
      // An Application of another project whose status lists the workload (status is writable by
      // whoever can update the Application), but whose project does not allow this namespace.
      await createManagedApplication(kube.custom, {
        namespace,
        name: 'payments-claims',
        ...victimApp,
        destinationNamespace: namespace,
        manages: at('w-project'),
      });
      // The team's own project, pointed at a repository the project does not allow.
      await createManagedApplication(kube.custom, {
        namespace,
        name: 'team-borrowed-repo',
        project: 'team',
        repoURL: server.url(victim),
        path: APP_PATH,
        destinationNamespace: namespace,
        manages: at('w-repo'),
      });

      await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
      await deployment(kube, namespace, 'own', 'team-app');
      await deployment(kube, namespace, 'w-ns', `${outside}_payments`);
      await deployment(kube, namespace, 'w-unlisted', 'payments');
      await deployment(kube, namespace, 'w-project', 'payments-claims');
      await deployment(kube, namespace, 'w-repo', 'team-borrowed-repo');
      const token = server.password;
      await start(namespace, [
        `--git-credentials-dir=${await credentialsDir(token)}`,
        `--git-credentials-urls=${base(server)}`,
        '--git-allow-insecure-http',
      ]);

      await changeConfig(kube, namespace, '2');
      const ok = await waitForEvent(kube, namespace, 'Reloaded', 'own');
      expect(ok.message).toContain('committed');
      expect(await inspect.log(bare(server, team))).toHaveLength(2);

      const rules: Record<string, RegExp> = {
        'w-ns': /Application .*payments.* is in namespace .*, which is not one of --argocd-namespaces/,
        'w-unlisted': /status\.resources do not list Deployment .*\/w-unlisted/,
        'w-project': /project does not allow namespace .* as a destination/,
        'w-repo': /project does not allow its source repository/,
      };
      for (const [name, rule] of Object.entries(rules)) {
        const ev = await waitForEvent(kube, namespace, 'ReloadFailed', name);
        expect(ev.type).toBe('Warning');
        expect(ev.message).toMatch(/^git write refused/);
        expect(ev.message).toMatch(rule);
        expectNoneOf(ev, [server.url(victim), 'payments-project', victimNs]);
      }
      // Nothing reached the victim's repository: no clone, no push, no credential.
      expect(requestsFor(server, victim)).toEqual([]);
      expect(await inspect.log(bare(server, victim))).toHaveLength(1);
    } finally {
      for (const ns of [outside, victimNs])
        await kube.core.deleteNamespace({ name: ns }).catch(() => undefined);
    }
  });

  it('never sends the credentials directory to a host outside --git-credentials-urls', async ({
    kube,
    namespace,
  }) => {
    // The team's own project allows any repository, and its Application points at a host someone
    // else controls: the service's token must not go there.
    const repo = `${namespace}-exfil`;
    await attacker.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    await createProject(kube.custom, namespace, 'team', {
      sourceRepos: ['*'],
      destinations: [{ server: IN_CLUSTER, namespace }],
    });
    await createManagedApplication(kube.custom, {
      namespace,
      name: 'team-app',
      project: 'team',
      repoURL: attacker.url(repo),
      path: APP_PATH,
      destinationNamespace: namespace,
      manages: [{ kind: 'Deployment', namespace, name: 'web' }],
    });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    await deployment(kube, namespace, 'web', 'team-app');
    await start(namespace, [
      `--git-credentials-dir=${await credentialsDir(server.password)}`,
      `--git-credentials-urls=${base(server)}`,
      '--git-allow-insecure-http',
    ]);

    await changeConfig(kube, namespace, '2');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toMatch(/no credentials are bound to .*; nothing was sent to it/);
    expect(requestsFor(attacker, repo)).toEqual([]);
    expect(attacker.authorized()).toEqual([]);
  });

  it('binds an Argo CD credential template on a path boundary: creds for /org never reach /org-evil', async ({
    kube,
    namespace,
  }) => {
    const repo = `${namespace}-org-evil`;
    const org = `${base(server)}${namespace}-org`;
    await server.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    await kube.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'org-creds', labels: { 'argocd.argoproj.io/secret-type': 'repo-creds' } },
        stringData: { url: org, username: server.username, password: server.password },
      },
    });
    await createProject(kube.custom, namespace, 'team', {
      sourceRepos: ['*'],
      destinations: [{ server: IN_CLUSTER, namespace }],
    });
    await createManagedApplication(kube.custom, {
      namespace,
      name: 'team-app',
      project: 'team',
      repoURL: server.url(repo),
      path: APP_PATH,
      destinationNamespace: namespace,
      manages: [{ kind: 'Deployment', namespace, name: 'web' }],
    });
    expect(server.url(repo).startsWith(org)).toBe(true);
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    await deployment(kube, namespace, 'web', 'team-app');
    await start(namespace, ['--git-argocd-credentials', '--git-allow-insecure-http']);

    await changeConfig(kube, namespace, '2');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toMatch(/no credentials are bound/);
    expectNoneOf(ev, ['org-creds']);
    expect(requestsFor(server, repo)).toEqual([]);
    expect(await inspect.log(bare(server, repo))).toHaveLength(1);
  });

  it('refuses a plain http:// repository unless --git-allow-insecure-http is set', async ({
    kube,
    namespace,
  }) => {
    const repo = `${namespace}-plain`;
    await server.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    await kube.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'repo', labels: { 'argocd.argoproj.io/secret-type': 'repository' } },
        stringData: { url: server.url(repo), username: server.username, password: server.password },
      },
    });
    await createProject(kube.custom, namespace, 'team', {
      sourceRepos: [server.url(repo)],
      destinations: [{ server: IN_CLUSTER, namespace }],
    });
    await createManagedApplication(kube.custom, {
      namespace,
      name: 'team-app',
      project: 'team',
      repoURL: server.url(repo),
      path: APP_PATH,
      destinationNamespace: namespace,
      manages: [{ kind: 'Deployment', namespace, name: 'web' }],
    });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    await deployment(kube, namespace, 'web', 'team-app');
    await start(namespace, ['--git-argocd-credentials']);

    await changeConfig(kube, namespace, '2');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toMatch(/plain http:\/\/.*--git-allow-insecure-http/);
    expect(requestsFor(server, repo)).toEqual([]);
    expect(await inspect.log(bare(server, repo))).toHaveLength(1);
  });

  it('follows no redirect: a server that redirects to another host gets nothing sent there', async ({
    kube,
    namespace,
  }) => {
    const repo = `${namespace}-moved`;
    await server.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    // The same repository at the other end, so a followed redirect would clone and push there.
    await attacker.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    server.redirectTo = base(attacker);
    await createProject(kube.custom, namespace, 'team', {
      sourceRepos: [server.url(repo)],
      destinations: [{ server: IN_CLUSTER, namespace }],
    });
    await createManagedApplication(kube.custom, {
      namespace,
      name: 'team-app',
      project: 'team',
      repoURL: server.url(repo),
      path: APP_PATH,
      destinationNamespace: namespace,
      manages: [{ kind: 'Deployment', namespace, name: 'web' }],
    });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    await deployment(kube, namespace, 'web', 'team-app');
    await start(namespace, [
      `--git-credentials-dir=${await credentialsDir(server.password)}`,
      `--git-credentials-urls=${base(server)}`,
      '--git-allow-insecure-http',
    ]);

    await changeConfig(kube, namespace, '2');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toMatch(/git write-back failed/);
    // The bound server saw the request (with its own credential) and answered with a redirect …
    expect(requestsFor(server, repo).map((r) => r.status)).toContain(302);
    // … and nothing followed it.
    expect(requestsFor(attacker, repo)).toEqual([]);
    expect(attacker.authorized()).toEqual([]);
    expect(await inspect.log(bare(attacker, repo))).toHaveLength(1);
  });

  it("names no Argo CD Secret in the workload's Events when its credentials are refused", async ({
    kube,
    namespace,
  }) => {
    const repo = `${namespace}-shop`;
    await server.createRepo(repo, { [`${APP_PATH}/web.yaml`]: manifest('web') });
    await kube.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'platform-git-token', labels: { 'argocd.argoproj.io/secret-type': 'repository' } },
        stringData: { url: server.url(repo), username: server.username, password: 'expired-token' },
      },
    });
    await createProject(kube.custom, namespace, 'team', {
      sourceRepos: [server.url(repo)],
      destinations: [{ server: IN_CLUSTER, namespace }],
    });
    await createManagedApplication(kube.custom, {
      namespace,
      name: 'team-app',
      project: 'team',
      repoURL: server.url(repo),
      path: APP_PATH,
      destinationNamespace: namespace,
      manages: [{ kind: 'Deployment', namespace, name: 'web' }],
    });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    await deployment(kube, namespace, 'web', 'team-app');
    const svc = await start(namespace, ['--git-argocd-credentials', '--git-allow-insecure-http']);

    await changeConfig(kube, namespace, '2');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toMatch(/git write-back failed \(auth\)/);
    expect(ev.message).toContain('[credentials: an Argo CD repository Secret]');
    expectNoneOf(ev, ['platform-git-token', 'expired-token']);
    // The operator's log names it.
    const failed = await svc.waitForLog('git write-back failed', (l) => l.msg === 'git write-back failed');
    expect(failed.credentials).toBe(`Argo CD Secret ${namespace}/platform-git-token (repository)`);
  });
});
