// Repository URLs that cross a tenant boundary, tried on the real control plane (issue 21). A tenant
// whose AppProject allows only its own team's repositories (`team-a/*`, or `team-a/**`) points its
// Application at team B's repository through a URL that one parser reads as team-a and another as
// team-b: `..` with backslashes, `..`, `%2e%2e`, and the same in scp-like SSH form. The repositories
// sit on an https git server on loopback with its own CA, which the service trusts through
// --git-ca-file, the setting an operator uses. Each attempt ends in a ReloadFailed Event naming the
// refused URL rule, and team B's repository receives no request at all, with and without credentials.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
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
  credentialsDir,
  gitModeDeployment,
  manifest,
  startGitModeService,
} from '../support/git-tenant.ts';
import { adminKubeConfig, it, type Kube } from '../support/kube.ts';
import { waitForEvent } from '../support/observe.ts';
import { killAll } from '../support/service.ts';
import { configMap } from '../support/workloads.ts';

const APP_PATH = 'apps';

let server: GitServer;
let scratch: string;
beforeAll(async () => {
  server = await startGitServer({ tls: true });
  scratch = await mkdtemp(path.join(tmpdir(), 'repo-url-'));
  await ensureAppProjectCrd(adminKubeConfig());
});
afterEach(async () => {
  await killAll();
});
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

/** `https://127.0.0.1:PORT` */
const origin = () => server.url('x').replace(/\/x\.git$/, '');
const host = () => new URL(origin()).hostname;

/**
 * The attacks: the issue's three rows over https, and their scp-like SSH forms, each under a project
 * that allows `team-a/*` and one that allows `team-a/**`.
 */
function attacks(ns: string): Array<{ name: string; repoURL: string; project: string }> {
  const https = `${origin()}/${ns}`;
  const scp = `git@${host()}:${ns}`;
  const rows = {
    backslash: '/team-a/..\\team-b\\repo',
    dotdot: '/team-a/../team-b/repo',
    encoded: '/team-a/%2e%2e/team-b/repo',
  };
  return Object.entries(rows).flatMap(([row, p]) => [
    { name: `h-${row}`, repoURL: `${https}${p}`, project: 'star' },
    { name: `hg-${row}`, repoURL: `${https}${p}`, project: 'globstar' },
    { name: `s-${row}`, repoURL: `${scp}${p}`, project: 'star' },
    { name: `sg-${row}`, repoURL: `${scp}${p}`, project: 'globstar' },
  ]);
}

/** Repositories team-a and team-b (the latter holds every attacked workload, so a push would land), projects, Applications. */
async function tenant(kube: Kube, ns: string): Promise<string[]> {
  const hostile = attacks(ns);
  const all = ['own', ...hostile.map((a) => a.name)];
  const files = Object.fromEntries(all.map((n) => [`${APP_PATH}/${n}.yaml`, manifest(n)]));
  await server.createRepo(`${ns}/team-a/repo`, files);
  await server.createRepo(`${ns}/team-b/repo`, files);
  const scp = `git@${host()}:${ns}`;
  for (const [name, glob] of [
    ['star', '*'],
    ['globstar', '**'],
  ] as const) {
    await createProject(kube.custom, ns, name, {
      sourceRepos: [`${origin()}/${ns}/team-a/${glob}`, `${scp}/team-a/${glob}`],
      destinations: [{ server: IN_CLUSTER, namespace: ns }],
    });
  }
  const apps = [{ name: 'own', repoURL: server.url(`${ns}/team-a/repo`), project: 'star' }, ...hostile];
  for (const a of apps) {
    await createManagedApplication(kube.custom, {
      namespace: ns,
      name: a.name,
      project: a.project,
      repoURL: a.repoURL,
      path: APP_PATH,
      destinationNamespace: ns,
      manages: [{ kind: 'Deployment', namespace: ns, name: a.name }],
    });
  }
  await kube.core.createNamespacedConfigMap({ namespace: ns, body: configMap('shared', { v: '1' }) });
  for (const a of apps) await gitModeDeployment(kube, ns, a.name, a.name);
  return hostile.map((a) => a.name);
}

/** Every request of this test's namespace that names team-b in any spelling (as sent, or as the server read it). */
const teamB = (ns: string) =>
  server.requests.filter((r) => r.url.includes(ns) && (/team-b/i.test(r.url) || r.repo.includes('team-b')));

async function expectRefused(kube: Kube, ns: string, names: readonly string[]): Promise<void> {
  // The first verdict on each workload: refused, or (as before the fix) reloaded by a commit.
  const verdicts = [];
  for (const name of names) verdicts.push(await waitForEvent(kube, ns, ['ReloadFailed', 'Reloaded'], name));
  // Counted at the server: team B's repository was never asked for anything.
  expect(teamB(ns).map((r) => `${r.method} ${r.url}`)).toEqual([]);
  expect(await inspect.log(path.join(server.root, `${ns}/team-b/repo.git`))).toHaveLength(1);
  for (const [i, ev] of verdicts.entries()) {
    const name = names[i];
    expect(`${ev.reason}: ${ev.message}`, name).toMatch(
      /^ReloadFailed: git write refused for Application .*: its repository URL is refused because .*; nothing was sent to it/,
    );
    expect(ev.type, name).toBe('Warning');
  }
}

describe('repository URLs across a tenant boundary, on the real control plane', () => {
  it('with credentials for team-a: every table URL, SSH and ** variant is refused and team-b gets zero requests', async ({
    kube,
    namespace,
  }) => {
    const hostile = await tenant(kube, namespace);
    await startGitModeService(namespace, [
      `--git-ca-file=${server.caFile}`,
      `--git-credentials-dir=${await credentialsDir(scratch, server.username, server.password)}`,
      `--git-credentials-urls=${origin()}/${namespace}/team-a,git@${host()}:${namespace}/team-a`,
    ]);
    await changeConfig(kube, namespace, '2');

    // The control: the tenant's own repository, over https with the server's private CA.
    const ok = await waitForEvent(kube, namespace, 'Reloaded', 'own');
    expect(ok.message).toContain('committed');
    expect(await inspect.log(path.join(server.root, `${namespace}/team-a/repo.git`))).toHaveLength(2);
    await expectRefused(kube, namespace, hostile);
    expect(server.requests.every((r) => r.repo === `${namespace}/team-a/repo`)).toBe(true);
  });

  it('without credentials: the same URLs are refused for what they are, and team-b gets zero requests', async ({
    kube,
    namespace,
  }) => {
    const hostile = await tenant(kube, namespace);
    await startGitModeService(namespace, [`--git-ca-file=${server.caFile}`]);
    await changeConfig(kube, namespace, '2');
    await expectRefused(kube, namespace, hostile);
  });
});
