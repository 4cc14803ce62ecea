// Git-commit mode against the real Argo CD v3.6 of test/cluster: a person commits a ConfigMap change,
// Argo CD syncs it, gitops-reloader (strategy git) pushes the checksum commit to the Application's
// repository on the cluster's git server, Argo CD syncs that commit, and the Deployment rolls once,
// from git. The service runs under issue 13's rules as documented: the Application is used because
// the real Argo CD lists the workload in its status.resources and the default AppProject allows it;
// the credentials are Argo CD's own repository Secret for exactly this URL (--git-argocd-credentials);
// and the loopback git server is plain http, which needs --git-allow-insecure-http.
import { readFile } from 'node:fs/promises';
import { describe, expect, type TestContext } from 'vitest';
import {
  ArgoApp,
  argocdEndpoints,
  GitRepo,
  type Manifest,
  startReloader,
  toFiles,
} from '../../support/argocd.ts';
import {
  CONFIG_HASH,
  changedLines,
  commits,
  expectedHash,
  replicaSetCount,
  rolledOut,
} from '../../support/checksum-commit.ts';
import { idle } from '../../support/decisions.ts';
import { it, type Kube } from '../../support/kube.ts';
import { events, PodTracker, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { hashKeyFile } from '../../support/service.ts';
import { cm, web } from '../fixtures.ts';

function manifests(mode: string): Manifest[] {
  const w = web('web', { configMaps: ['web-config'], replicas: 2 });
  w.metadata.annotations = { ...w.metadata.annotations, 'gitops-reloader.io/strategy': 'git' };
  return [cm('web-config', { mode }), w];
}

/** Argo CD's repository Secret for exactly this repository, as `argocd repo add` writes it. */
async function repositorySecret(kube: Kube, name: string, url: string): Promise<() => Promise<void>> {
  const namespace = argocdEndpoints().namespace;
  await kube.core.createNamespacedSecret({
    namespace,
    body: {
      metadata: { name, labels: { 'argocd.argoproj.io/secret-type': 'repository' } },
      // The loopback git server is anonymous; these are what a real server would check.
      stringData: { type: 'git', url, username: 'reloader', password: 'loopback-server-ignores-it' },
    },
  });
  return async () => {
    await kube.core.deleteNamespacedSecret({ name, namespace }).catch(() => undefined);
  };
}

interface Case {
  /** The repository's first commit. */
  files: Record<string, string>;
  /** A person's commit that changes ConfigMap web-config to `{ mode: 'slow' }`. */
  change: Record<string, string>;
  path?: string;
  source?: Record<string, unknown>;
  /** The +/- lines the service's commit must hold, given the value. */
  diff(value: string): string[];
  /** The file the service edits. */
  file: string;
}

/**
 * A config change in git, synced by Argo CD; the service's checksum commit on top, synced by Argo CD;
 * one rollout from git; then nothing more.
 */
async function roundTrip(
  kube: Kube,
  namespace: string,
  onTestFinished: TestContext['onTestFinished'],
  c: Case,
): Promise<void> {
  const repo = await GitRepo.create(namespace, c.files);
  const dropSecret = await repositorySecret(kube, `repo-${namespace}`.slice(0, 63), repo.url);
  const app = await ArgoApp.create(kube, {
    name: namespace,
    repo,
    destination: namespace,
    ...(c.path ? { path: c.path } : {}),
    ...(c.source ? { source: c.source } : {}),
  });
  try {
    const initial = await repo.head();
    const synced = await app.waitSynced(initial);
    // What the service's authority rule reads: the real Argo CD lists the workload it manages.
    expect(synced.status?.resources).toContainEqual(
      expect.objectContaining({ group: 'apps', kind: 'Deployment', namespace, name: 'web' }),
    );
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const live = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(live.metadata?.annotations?.['argocd.argoproj.io/tracking-id']).toBe(
      `${namespace}:apps/Deployment:${namespace}/web`,
    );
    const generation = live.metadata?.generation as number;
    const keyFile = await hashKeyFile();
    const key = Buffer.from((await readFile(keyFile, 'utf8')).replace(/\s+$/, ''), 'utf8');
    const svc = await startReloader(namespace, ['--git-argocd-credentials', '--git-allow-insecure-http'], {
      onTestFinished,
      keyFile,
    });
    const pods = await PodTracker.start(kube, namespace, 'web');

    // A person changes the config in git; Argo CD syncs it.
    const change = await app.commit(repo, c.change, 'web-config: slow');
    await app.waitOperation(change, 'Succeeded');
    expect((await kube.core.readNamespacedConfigMap({ name: 'web-config', namespace })).data).toEqual({
      mode: 'slow',
    });

    // The service commits the checksum on top of it.
    const ours = await commits(repo, 3);
    const commit = ours[0] as { sha: string; subject: string; author: string };
    expect(ours[1]?.sha).toBe(change);
    expect(commit.subject).toBe(`chore(reload): ${namespace}/web config changed (ConfigMap/web-config)`);
    expect(commit.author).toBe('gitops-reloader <gitops-reloader@localhost>');
    const value = expectedHash(key, namespace, 'web-config', { mode: 'slow' });
    const diff = await changedLines(repo, commit.sha);
    expect(diff).toEqual(c.diff(value));
    expect(await repo.show(commit.sha, c.file)).toContain(value);
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(ev.message).toContain(`committed ${commit.sha.slice(0, 12)}`);
    const done = await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      60_000,
    );
    expect(done.replaced, 'git mode replaces no pod itself').toBe(0);

    // Argo CD learns of the commit as from a git webhook (a hard refresh), syncs it, and rolls the pods.
    await app.refresh();
    await app.waitSynced(commit.sha);
    const rolled = await rolledOut(kube, namespace);
    expect(rolled.spec?.template?.metadata?.annotations?.[CONFIG_HASH]).toBe(value);
    expect(rolled.metadata?.generation, 'one template change, from git').toBe(generation + 1);
    await waitReadyPods(kube, namespace, 'web', 2);

    // Nothing more: no second commit, no second rollout, no restart of ours; the app stays Synced/Healthy.
    // Decided: nothing under way for web in the service; Argo CD compares twice more and finds the
    // app Synced and Healthy; then the commits and ReplicaSets are counted.
    const settled = Date.now();
    await idle(svc, `Deployment/${namespace}/web`);
    await app.expectStaysSyncedAndHealthy(settled);
    expect((await repo.log()).length, 'commits').toBe(3);
    expect(await replicaSetCount(kube, namespace), 'ReplicaSets').toBe(2);
    pods.stop();
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
    expect(pods.surgePods(), 'no surge pod: the rollout is the Deployment controller’s').toEqual([]);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    expect(svc.logs.filter((l) => l.msg === 'git write-back committed')).toHaveLength(1);
    const final = await app.read();
    expect(final.status?.sync?.status).toBe('Synced');
    expect(final.status?.sync?.revision).toBe(commit.sha);
    expect(final.status?.health?.status).toBe('Healthy');
  } finally {
    await app.delete();
    await dropSecret();
  }
}

const CHART_DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
  annotations:
    gitops-reloader.io/strategy: git
    reloader.stakater.com/auto: "true"
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      {{- with .Values.podAnnotations }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      containers:
        - name: app
          image: registry.invalid/app:1
          envFrom:
            - configMapRef: {name: web-config}
`;

const chartValues = (mode: string) => `# The shop's web chart.
mode: ${mode}   # fast in prod
podAnnotations: {}
`;

describe.concurrent('git-commit mode with the real Argo CD', { timeout: 300_000 }, () => {
  it('our checksum commit (plain directory) is synced by Argo CD, rolls the workload once, and the app ends Synced and Healthy', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    await roundTrip(kube, namespace, onTestFinished, {
      files: toFiles(manifests('fast')),
      change: toFiles([cm('web-config', { mode: 'slow' })]),
      file: 'manifests/deployment-web.yaml',
      // Only the annotation (the template had no annotations map: it is created).
      diff: (value) => ['+      annotations:', `+        ${CONFIG_HASH}: "${value}"`],
    });
  });

  it('our checksum commit to a Helm values file is rendered by Argo CD, rolls the workload once, and the app ends Synced and Healthy', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    await roundTrip(kube, namespace, onTestFinished, {
      files: {
        'chart/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n',
        'chart/values.yaml': chartValues('fast'),
        'chart/templates/configmap.yaml':
          'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  mode: {{ .Values.mode | quote }}\n',
        'chart/templates/deployment.yaml': CHART_DEPLOYMENT,
      },
      change: { 'chart/values.yaml': chartValues('slow') },
      path: 'chart',
      source: { helm: { valueFiles: ['values.yaml'] } },
      file: 'chart/values.yaml',
      // podAnnotations: {} becomes a block map holding the checksum; the comments stay.
      diff: (value) => ['-podAnnotations: {}', '+podAnnotations:', `+  ${CONFIG_HASH}: "${value}"`],
    });
  });
});
