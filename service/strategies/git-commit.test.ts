// The git strategy against a real git server (git http-backend on loopback): a batch of reloads of
// one repository lands as one commit, a value already in git is not committed again, and failures
// are reported without credentials. The Application and its credentials are given directly.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitWriter } from '../../git/writer.ts';
import { type GitServer, inspect, startGitServer } from '../../test/support/git-server.ts';
import { KEYS, parseWorkloadPolicy } from '../core/annotations.ts';
import type { WorkloadRecord } from '../core/records.ts';
import { contactURL, parseRepoURL } from '../core/repo-url.ts';
import type { GitSource } from '../gitops/application.ts';
import type { ResolvedCredentials } from '../gitops/credentials.ts';
import { GitRefused } from '../gitops/refusal.ts';
import { silentLogger } from '../log.ts';
import { Metrics } from '../metrics.ts';
import { GitCommitter, type GitCommitterOptions, NO_WORKLOADS } from './git-commit.ts';

let server: GitServer;
let scratch: string;
beforeAll(async () => {
  server = await startGitServer();
  scratch = await mkdtemp(path.join(tmpdir(), 'git-commit-'));
});
afterAll(async () => {
  await server?.close();
  await rm(scratch, { recursive: true, force: true });
});

const manifest = (name: string) => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}   # keep this comment
spec:
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata:
      labels: {app: ${name}}
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
`;

function workload(name: string, app = 'shop'): WorkloadRecord {
  return {
    ref: { kind: 'Deployment', namespace: 'shop', name, uid: `uid-${name}` },
    resourceVersion: '1',
    generation: 1,
    annotations: { 'argocd.argoproj.io/tracking-id': `${app}:apps/Deployment:shop/${name}` },
    templateAnnotations: {},
    labels: {},
    uses: [],
    templateHash: 't',
    status: {},
  };
}

const hash = (seed: string) => Buffer.from(seed.padEnd(16, '.')).toString('hex').slice(0, 32);

function committer(repo: string, o: Partial<GitCommitterOptions> & { token?: string } = {}) {
  const metrics = new Metrics({ defaultMetrics: false });
  const source = async (app: { namespace: string; name: string }): Promise<GitSource> => ({
    syncedBy: 'Argo CD',
    app,
    project: 'default',
    repo: parseRepoURL(server.url(repo)),
    repoURL: server.url(repo),
    targetRevision: 'main',
    path: 'apps/shop',
  });
  const credentials = async (): Promise<ResolvedCredentials> => ({
    credentials: { username: server.username, token: o.token ?? server.password },
    source: 'test credentials',
    kind: 'test credentials',
    cleanup: async () => {},
  });
  const c = new GitCommitter({
    writer: new GitWriter({ tmpDir: scratch, allowInsecureHttp: true }),
    source,
    credentials,
    tracking: { method: 'annotation', labelKey: 'app.kubernetes.io/instance', controlNamespace: 'argocd' },
    author: { name: 'Reload Bot', email: 'bot@example.com' },
    log: silentLogger,
    metrics,
    allowInsecureHttp: true,
    gatherQuietMs: 100,
    ...o,
  });
  return { c, metrics };
}

async function counter(metrics: Metrics, result: string): Promise<number> {
  const m = new RegExp(`^gitops_reloader_git_commits_total\\{result="${result}"\\} (\\d+)$`, 'm').exec(
    await metrics.text(),
  );
  return Number(m?.[1] ?? Number.NaN);
}

const request = (w: WorkloadRecord, configHash: string) => ({
  workload: w,
  cutoffMs: Date.now(),
  configHash,
  templateChangedSince: async () => false,
});

describe('git strategy', () => {
  it('commits the reloads of one repository that arrive together as one commit', async () => {
    await server.createRepo('batch', {
      'apps/shop/web.yaml': manifest('web'),
      'apps/shop/worker.yaml': manifest('worker'),
    });
    const { c, metrics } = committer('batch');
    const signal = new AbortController().signal;
    const [web, worker] = await Promise.all([
      c.reload({ signal }, request(workload('web'), hash('web-1')), ['ConfigMap/shared']),
      // A little later, as a second concurrent reload would be.
      new Promise((r) => setTimeout(r, 20)).then(() =>
        c.reload({ signal }, request(workload('worker'), hash('worker-1')), ['ConfigMap/shared']),
      ),
    ]);
    const log = await inspect.log(path.join(server.root, 'batch.git'));
    expect(log).toHaveLength(2);
    const sha = log[0]?.sha as string;
    expect(web.summary).toContain(`committed ${sha.slice(0, 12)}`);
    expect(worker.summary).toContain(`committed ${sha.slice(0, 12)}`);
    expect(web.summary).toContain(`${KEYS.configHash}=${hash('web-1')}`);
    expect(log[0]?.subject).toBe('chore(reload): shop/web config changed (ConfigMap/shared) and 1 more');
    const diff = await inspect.diff(path.join(server.root, 'batch.git'), sha);
    // The manifests had no pod-template annotations: the map is created, nothing else changes.
    expect(diff.split('\n').filter((l) => /^[+-][^+-]/.test(l))).toEqual([
      '+      annotations:',
      `+        ${KEYS.configHash}: "${hash('web-1')}"`,
      '+      annotations:',
      `+        ${KEYS.configHash}: "${hash('worker-1')}"`,
    ]);
    expect(await counter(metrics, 'committed')).toBe(1);

    // The same value again: nothing to commit, and that is a success.
    const again = await c.reload({ signal }, request(workload('web'), hash('web-1')));
    expect(again.summary).toMatch(/already has .* nothing to commit/);
    expect(await inspect.log(path.join(server.root, 'batch.git'))).toHaveLength(2);
    expect(await counter(metrics, 'unchanged')).toBe(1);
  });

  it('commits reloads that each carry their own signal (their own deadline) as one commit', async () => {
    await server.createRepo('batch-deadlines', {
      'apps/shop/web.yaml': manifest('web'),
      'apps/shop/worker.yaml': manifest('worker'),
    });
    const { c } = committer('batch-deadlines');
    const [web, worker] = await Promise.all([
      c.reload({ signal: new AbortController().signal }, request(workload('web'), hash('web-2')), [
        'ConfigMap/shared',
      ]),
      c.reload({ signal: new AbortController().signal }, request(workload('worker'), hash('worker-2')), [
        'ConfigMap/shared',
      ]),
    ]);
    const log = await inspect.log(path.join(server.root, 'batch-deadlines.git'));
    expect(log).toHaveLength(2);
    const sha = log[0]?.sha as string;
    expect(web.summary).toContain(`committed ${sha.slice(0, 12)}`);
    expect(worker.summary).toContain(`committed ${sha.slice(0, 12)}`);
  });

  it("writes a Helm chart's values file: the Application's last values file, at the workload's values path", async () => {
    await server.createRepo('helm', {
      'charts/web/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.3.0\n',
      'charts/web/values.yaml': 'podAnnotations: {}\n',
      'charts/web/values-prod.yaml': '# prod\nworker:\n  replicas: 3\n',
    });
    const { c } = committer('helm', {
      source: async (app) => ({
        syncedBy: 'Argo CD',
        app,
        project: 'default',
        repo: parseRepoURL(server.url('helm')),
        repoURL: server.url('helm'),
        targetRevision: 'HEAD',
        path: 'charts/web',
        valuesFile: 'values-prod.yaml',
      }),
    });
    const w = workload('worker');
    w.annotations[KEYS.gitValuesPath] = 'worker.podAnnotations';
    const r = await c.reload({ signal: new AbortController().signal }, request(w, hash('helm')));
    expect(r.summary).toContain('charts/web/values-prod.yaml');
    expect(
      await inspect.show(path.join(server.root, 'helm.git'), 'main', 'charts/web/values-prod.yaml'),
    ).toBe(`# prod\nworker:\n  replicas: 3\n  podAnnotations:\n    ${KEYS.configHash}: "${hash('helm')}"\n`);
  });

  it('fails a workload no Application tracks, and still commits the others', async () => {
    await server.createRepo('untracked', { 'apps/shop/web.yaml': manifest('web') });
    const { c, metrics } = committer('untracked');
    const signal = new AbortController().signal;
    const stray = { ...workload('stray'), annotations: {} };
    const [ok, bad] = await Promise.allSettled([
      c.reload({ signal }, request(workload('web'), hash('a'))),
      c.reload({ signal }, request(stray, hash('b'))),
    ]);
    expect(ok.status).toBe('fulfilled');
    expect(bad.status === 'rejected' && (bad.reason as Error).message).toMatch(
      /no Argo CD Application tracks Deployment shop\/stray/,
    );
    expect(await counter(metrics, 'failed')).toBe(1);
  });

  it('commits a Flux-applied workload (no Argo CD tracking) to the source of the Kustomization its labels name, and says Flux reconciles it', async () => {
    await server.createRepo('flux', { 'apps/shop/web.yaml': manifest('web') });
    const asked: unknown[] = [];
    const { c } = committer('flux', {
      fluxSource: async (ks, w) => {
        asked.push({ ks, w });
        return {
          syncedBy: 'Flux',
          app: ks,
          project: '',
          repo: parseRepoURL(server.url('flux')),
          repoURL: server.url('flux'),
          targetRevision: 'main',
          path: 'apps/shop',
        };
      },
    });
    const flux = {
      ...workload('web'),
      annotations: {},
      labels: {
        'kustomize.toolkit.fluxcd.io/name': 'apps',
        'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
      },
    };
    const res = await c.reload({ signal: new AbortController().signal }, request(flux, hash('f')));
    expect(asked).toEqual([
      {
        ks: { namespace: 'flux-system', name: 'apps' },
        w: { group: 'apps', kind: 'Deployment', namespace: 'shop', name: 'web' },
      },
    ]);
    expect(res.summary).toMatch(
      /^committed [0-9a-f]{12} to .*flux\.git branch main .*the pods roll when Flux reconciles it$/,
    );
    // Without Flux configured, the same workload has no source: the labels alone name nothing.
    const { c: argoOnly } = committer('flux');
    await expect(
      argoOnly.reload({ signal: new AbortController().signal }, request(flux, hash('g'))),
    ).rejects.toThrow(/^no Argo CD Application tracks Deployment shop\/web; /);
  });

  it('reports a workload missing from the repository as a failure of that workload', async () => {
    await server.createRepo('missing', { 'apps/shop/web.yaml': manifest('web') });
    const { c } = committer('missing');
    await expect(
      c.reload({ signal: new AbortController().signal }, request(workload('gone'), hash('g'))),
    ).rejects.toThrow(/git write-back to .*missing\.git branch main: .*gone/);
  });

  it('fails on refused credentials with the reason and the credential source, never the token', async () => {
    await server.createRepo('auth', { 'apps/shop/web.yaml': manifest('web') });
    const token = 'wrong-Tok3n-must-not-leak';
    const { c, metrics } = committer('auth', { token });
    const err = await c
      .reload({ signal: new AbortController().signal }, request(workload('web'), hash('x')))
      .then(
        () => undefined,
        (e: Error) => e,
      );
    expect(err?.message).toMatch(/git write-back failed \(auth\).*\[credentials: test credentials\]/);
    expect(err?.message).not.toContain(token);
    expect(err?.message).not.toContain(Buffer.from(`${server.username}:${token}`).toString('base64'));
    expect(await inspect.log(path.join(server.root, 'auth.git'))).toHaveLength(1);
    expect(await counter(metrics, 'failed')).toBe(1);
  });

  it("logs in as the https URL's user when the credentials carry a token only", async () => {
    await server.createRepo('url-user', { 'apps/shop/web.yaml': manifest('web') });
    const url = server.url('url-user').replace('http://', `http://${server.username}@`);
    const { c } = committer('url-user', {
      source: async (app) => ({
        syncedBy: 'Argo CD',
        app,
        project: 'default',
        repo: parseRepoURL(url),
        // As gitSourceOf gives it: the canonical spelling, without the user.
        repoURL: contactURL(parseRepoURL(url)),
        targetRevision: 'main',
        path: 'apps/shop',
      }),
      credentials: async () => ({
        credentials: { token: server.password },
        source: 'test credentials',
        kind: 'test credentials',
        cleanup: async () => {},
      }),
    });
    const r = await c.reload({ signal: new AbortController().signal }, request(workload('web'), hash('u')));
    expect(r.summary).toMatch(/^committed /);
  });

  it('drops a gathered reload when the service stops, without writing', async () => {
    await server.createRepo('abort', { 'apps/shop/web.yaml': manifest('web') });
    const { c } = committer('abort', { gatherQuietMs: 60_000, gatherMaxMs: 60_000 });
    const stop = new AbortController();
    const pending = c.reload({ signal: stop.signal }, request(workload('web'), hash('z')));
    stop.abort(new Error('the service is stopping'));
    await expect(pending).rejects.toThrow('the service is stopping');
    expect(await inspect.log(path.join(server.root, 'abort.git'))).toHaveLength(1);
  });

  it('reads gitops-reloader.io/git-values-path as a known annotation', () => {
    const parsed = parseWorkloadPolicy(
      {
        [KEYS.strategy]: 'git',
        [KEYS.gitValuesPath]: 'worker.podAnnotations',
        'gitops-reloader.io/auto': 'true',
      },
      {},
      { kind: 'Deployment', defaultStrategy: 'restart' },
    );
    expect(parsed.warnings).toEqual([]);
    expect(parsed.problems).toEqual([]);
  });

  it('refuses, counts and clones nothing when the Application does not manage the workload', async () => {
    await server.createRepo('refused', { 'apps/shop/web.yaml': manifest('web') });
    const { c, metrics } = committer('refused', {
      source: async () => {
        throw new GitRefused(
          'not-managed',
          "git write refused: the Application's status.resources do not list it",
        );
      },
    });
    const before = server.requests.length;
    await expect(
      c.reload({ signal: new AbortController().signal }, request(workload('web'), hash('web-1'))),
    ).rejects.toThrow(/git write refused/);
    expect(server.requests.length).toBe(before);
    expect(await metrics.text()).toMatch(/^gitops_reloader_git_refused_total\{rule="not-managed"\} 1$/m);
  });

  it('refuses a plain http:// repository without allowInsecureHttp, before any request', async () => {
    await server.createRepo('plain', { 'apps/shop/web.yaml': manifest('web') });
    const { c, metrics } = committer('plain', { allowInsecureHttp: false });
    const before = server.requests.length;
    await expect(
      c.reload({ signal: new AbortController().signal }, request(workload('web'), hash('web-1'))),
    ).rejects.toThrow(/plain http:\/\//);
    expect(server.requests.length).toBe(before);
    expect(await metrics.text()).toMatch(
      /^gitops_reloader_git_refused_total\{rule="insecure-transport"\} 1$/m,
    );
  });

  it("validates flags with the writer's own rules", async () => {
    // The probe relies on the writer refusing an empty request with this message.
    await expect(
      new GitWriter().commitChecksum({
        repoURL: 'https://git.invalid/x',
        branch: 'main',
        path: '',
        workloads: [],
      }),
    ).rejects.toThrow(NO_WORKLOADS);
  });
});
