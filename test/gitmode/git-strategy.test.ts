// Git-commit mode end to end: gitops-reloader runs as a child process against the real control plane,
// the Deployment's Application points at a repository on a real git server (git http-backend behind
// basic auth on loopback), and a ConfigMap change becomes a commit of the checksum annotation, not a
// restart. What a user would check: the commits and their diffs, Events, pods, generations, logs.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { V1Deployment } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest';
import { parse } from 'yaml';
import { hashConfig, namespaceKey, setDigest } from '../../service/core/config-hash.ts';
import { configId } from '../../service/core/types.ts';
import {
  createManagedApplication,
  createProject,
  ensureAppProjectCrd,
  IN_CLUSTER,
} from '../support/app-project.ts';
import { changeOf, decidedNoReload, idle } from '../support/decisions.ts';
import { type GitServer, inspect, startGitServer } from '../support/git-server.ts';
import { adminKubeConfig, it, type Kube } from '../support/kube.ts';
import { events, livePods, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap } from '../support/workloads.ts';

const APP = 'shop';
const APP_PATH = 'apps/shop';
const CONFIG_HASH = 'gitops-reloader.io/config-hash';

/** A Deployment as people write it in git: comments, flow maps, mixed quoting. */
const manifest = (name: string, config: string) => `# The shop's ${name}.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  labels: {app: ${name}}
  annotations:
    gitops-reloader.io/strategy: git      # roll from git, never in place
    reloader.stakater.com/auto: "true"
spec:
  replicas: 1
  selector:
    matchLabels:
      app: ${name}
  template:
    metadata:
      labels:
        app: ${name}
      annotations:
        prometheus.io/scrape: 'true'
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
          envFrom:
            - configMapRef: {name: ${config}}
`;

let server: GitServer;
let scratch: string;
beforeAll(async () => {
  server = await startGitServer();
  scratch = await mkdtemp(path.join(tmpdir(), 'gitmode-'));
  await ensureAppProjectCrd(adminKubeConfig());
});
afterEach(killAll);
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

const bare = (repo: string) => path.join(server.root, `${repo}.git`);

/** The repository, the Application tracking it, and the Deployments applied as Argo CD would. */
async function setUp(
  kube: Kube,
  namespace: string,
  deployments: Array<{ name: string; config: string }>,
): Promise<string> {
  const repo = namespace;
  await server.createRepo(
    repo,
    Object.fromEntries(deployments.map((d) => [`${APP_PATH}/${d.name}.yaml`, manifest(d.name, d.config)])),
  );
  // The Application manages the Deployments (status.resources), and its project allows them.
  await createProject(kube.custom, namespace, 'default', {
    sourceRepos: [server.url(repo)],
    destinations: [{ server: IN_CLUSTER, namespace }],
  });
  await createManagedApplication(kube.custom, {
    namespace,
    name: APP,
    project: 'default',
    repoURL: server.url(repo),
    path: APP_PATH,
    destinationNamespace: namespace,
    manages: deployments.map((d) => ({ kind: 'Deployment', namespace, name: d.name })),
  });
  for (const d of deployments) {
    const body = parse(manifest(d.name, d.config)) as V1Deployment;
    body.metadata = {
      ...body.metadata,
      namespace,
      annotations: {
        ...body.metadata?.annotations,
        // Argo CD's own namespace is the test namespace here, so the app is named bare.
        'argocd.argoproj.io/tracking-id': `${APP}:apps/Deployment:${namespace}/${d.name}`,
      },
    };
    await kube.apps.createNamespacedDeployment({ namespace, body });
  }
  for (const d of deployments) await waitReadyPods(kube, namespace, d.name, 1);
  return repo;
}

async function credentialsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(scratch, 'creds-'));
  for (const [name, text] of Object.entries(files))
    await writeFile(path.join(dir, name), text, { mode: 0o600 });
  return dir;
}

async function startGitMode(
  namespace: string,
  extra: string[],
): Promise<{ svc: RunningService; key: Buffer }> {
  const keyFile = await hashKeyFile();
  const svc = startService(
    serviceArgs(namespace, keyFile, [
      '--debounce=0s',
      `--argocd-namespaces=${namespace}`,
      // The test git server speaks plain http on loopback.
      '--git-allow-insecure-http',
      ...extra,
    ]),
  );
  await svc.waitForLog('ready', (l) => l.msg === 'ready');
  // As readHashKeyFile reads it: the file's text, trailing whitespace dropped.
  const key = Buffer.from((await readFile(keyFile, 'utf8')).replace(/\s+$/, ''), 'utf8');
  return { svc, key };
}

/**
 * The value the service must write: the set digest of what the workload sees (all of one ConfigMap),
 * under the namespace's key (ADR 0010).
 */
function expectedHash(key: Buffer, namespace: string, config: string, data: Record<string, string>): string {
  const id = configId({ kind: 'ConfigMap', namespace, name: config });
  return setDigest(
    { [id]: hashConfig({ data }, namespaceKey(key, namespace)).all },
    namespaceKey(key, namespace),
  );
}

async function setCm(kube: Kube, namespace: string, name: string, data: Record<string, string>, labels = {}) {
  const body = configMap(name, data);
  body.metadata = { ...body.metadata, labels };
  return kube.core.replaceNamespacedConfigMap({ name, namespace, body });
}

async function generationOf(kube: Kube, namespace: string, name: string) {
  return (await kube.apps.readNamespacedDeployment({ name, namespace })).metadata?.generation;
}

/** The +/- lines of a commit, without file headers. */
async function changedLines(repo: string, sha: string): Promise<string[]> {
  const diff = await inspect.diff(bare(repo), sha);
  return diff.split('\n').filter((l) => /^[+-]/.test(l) && !/^(\+\+\+|---) /.test(l));
}

describe('git strategy', () => {
  it('commits the checksum to the Application source instead of restarting, once per change', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('web-config', { mode: 'a' }) });
    const repo = await setUp(kube, namespace, [{ name: 'web', config: 'web-config' }]);
    const dir = await credentialsDir({ username: server.username, token: `${server.password}\n` });
    const { svc, key } = await startGitMode(namespace, [
      `--git-credentials-dir=${dir}`,
      `--git-credentials-urls=${server.url('x').replace(/x\.git$/, '')}`,
      '--git-author-name=Reload Bot',
      '--git-author-email=bot@example.com',
    ]);
    const pods = await livePods(kube, namespace, 'web');
    const generation = await generationOf(kube, namespace, 'web');

    await setCm(kube, namespace, 'web-config', { mode: 'b' });
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    const log = await inspect.log(bare(repo));
    expect(log).toHaveLength(2);
    const commit = log[0] as { sha: string; subject: string; author: string };
    expect(commit).toMatchObject({
      subject: `chore(reload): ${namespace}/web config changed (ConfigMap/web-config)`,
      author: 'Reload Bot <bot@example.com>',
    });
    const value = expectedHash(key, namespace, 'web-config', { mode: 'b' });
    expect(await changedLines(repo, commit.sha)).toEqual([`+        ${CONFIG_HASH}: "${value}"`]);
    expect(ev.message).toContain(`committed ${commit.sha.slice(0, 12)}`);
    expect(ev.message).toContain(`${CONFIG_HASH}=${value}`);
    // The rollout is Argo CD's to make, from git: no pod replaced, the Deployment object untouched.
    await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
    );
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(pods.map((p) => p.uid));
    expect(await generationOf(kube, namespace, 'web')).toBe(generation);

    // The same content again (an update that leaves the data as it was): nothing to commit.
    const mark = svc.logs.length;
    const touched = await setCm(kube, namespace, 'web-config', { mode: 'b' }, { touched: 'yes' });
    // The service's decision about that update: no reload; and then nothing under way for web.
    await decidedNoReload(svc, changeOf('ConfigMap', touched), { from: mark });
    await idle(svc, `Deployment/${namespace}/web`);
    const n = (await inspect.log(bare(repo))).length;
    const reloaded = (await events(kube, namespace, 'Reloaded', 'web')).length;
    expect(`${n} commits and ${reloaded} Reloaded Events`).toBe('2 commits and 1 Reloaded Events');

    // CI already committed the value the next change produces: the service finds it and commits nothing.
    const next = expectedHash(key, namespace, 'web-config', { mode: 'c' });
    const current = await inspect.show(bare(repo), 'main', `${APP_PATH}/web.yaml`);
    const ci = await server.commitFiles(
      repo,
      { [`${APP_PATH}/web.yaml`]: current.replace(value, next) },
      'ci: gitops-reloader checksum --in-place',
    );
    await setCm(kube, namespace, 'web-config', { mode: 'c' });
    const second = await waitFor(
      async () => {
        const all = await events(kube, namespace, 'Reloaded', 'web');
        return (
          all.find((e) => e.message?.includes('nothing to commit')) ?? pending(all.map((e) => e.message))
        );
      },
      { describe: 'a Reloaded Event saying the value was already in git', timeout: 60_000 },
    );
    expect(second.message).toContain(`${CONFIG_HASH}=${next}`);
    expect((await inspect.log(bare(repo))).map((c) => c.sha)).toEqual([ci, commit.sha, log[1]?.sha]);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(pods.map((p) => p.uid));
    expect(await generationOf(kube, namespace, 'web')).toBe(generation);
  });

  it('commits a change that reloads two workloads of one repository as one commit, with Argo CD credentials', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { v: '1' }) });
    const repo = await setUp(kube, namespace, [
      { name: 'web', config: 'shared' },
      { name: 'worker', config: 'shared' },
    ]);
    // A credential template for every repository on the server, as Argo CD matches it (URL prefix).
    await kube.core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'git-server-creds', labels: { 'argocd.argoproj.io/secret-type': 'repo-creds' } },
        stringData: {
          url: server.url('x').replace(/x\.git$/, ''),
          username: server.username,
          password: server.password,
        },
      },
    });
    const { svc, key } = await startGitMode(namespace, ['--git-argocd-credentials']);

    await setCm(kube, namespace, 'shared', { v: '2' });
    await waitForEvent(kube, namespace, 'Reloaded', 'web');
    await waitForEvent(kube, namespace, 'Reloaded', 'worker');
    const log = await inspect.log(bare(repo));
    expect(log).toHaveLength(2);
    const value = expectedHash(key, namespace, 'shared', { v: '2' });
    expect(await changedLines(repo, log[0]?.sha as string)).toEqual([
      `+        ${CONFIG_HASH}: "${value}"`,
      `+        ${CONFIG_HASH}: "${value}"`,
    ]);
    expect(log[0]?.subject).toMatch(/ and 1 more$/);
    const committed = svc.logs.filter((l) => l.msg === 'git write-back committed');
    expect(committed).toHaveLength(1);
    expect(committed[0]?.credentials).toBe(`Argo CD Secret ${namespace}/git-server-creds (repo-creds)`);
  });

  it('reports refused credentials as ReloadFailed, commits nothing and never logs the token', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('web-config', { mode: 'a' }) });
    const repo = await setUp(kube, namespace, [{ name: 'web', config: 'web-config' }]);
    const token = 'Wr0ng-t0ken-that-must-never-be-logged';
    const dir = await credentialsDir({ username: server.username, token });
    const { svc } = await startGitMode(namespace, [
      `--git-credentials-dir=${dir}`,
      `--git-credentials-urls=${server.url(repo)}`,
    ]);
    const pods = await livePods(kube, namespace, 'web');

    await setCm(kube, namespace, 'web-config', { mode: 'b' });
    const failed = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(failed.type).toBe('Warning');
    expect(failed.message).toMatch(/git write-back failed \(auth\)/);
    expect(failed.message).toContain('[credentials: --git-credentials-dir]');
    await svc.waitForLog(
      'reload failed',
      (l) => l.msg === 'reload failed' && l.workload === 'Deployment/web',
    );

    expect(await inspect.log(bare(repo))).toHaveLength(1);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid)).toEqual(pods.map((p) => p.uid));
    const basic = Buffer.from(`${server.username}:${token}`).toString('base64');
    const everything = [
      JSON.stringify(svc.logs),
      svc.text.join(''),
      JSON.stringify((await kube.core.listNamespacedEvent({ namespace })).items.map((e) => e.message)),
    ].join('\n');
    for (const secret of [token, basic, encodeURIComponent(token)]) expect(everything).not.toContain(secret);
  });
});
