// Git-commit mode against the real Flux controllers of test/cluster: a person commits a ConfigMap
// change, source-controller fetches it and kustomize-controller applies it; gitops-reloader (strategy
// git) pushes the checksum commit to the Kustomization's GitRepository on the cluster's git server;
// Flux reconciles that commit, and the Deployment rolls once, from git. The service runs under the
// rules of docs/flux.md ("Git mode"): the Kustomization is used because its inventory lists the
// workload; the credentials come from --git-credentials-dir, bound to exactly this repository by
// --git-credentials-urls; and the loopback git server is plain http (--git-allow-insecure-http).
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect } from 'vitest';
import { cm, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import {
  CONFIG_HASH,
  changedLines,
  commits,
  expectedHash,
  replicaSetCount,
  rolledOut,
} from '../../support/checksum-commit.ts';
import { idle } from '../../support/decisions.ts';
import { FluxKustomization, FluxSource, revisionOf, startFluxReloader } from '../../support/flux.ts';
import { it, type Kube } from '../../support/kube.ts';
import { events, PodTracker, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { hashKeyFile } from '../../support/service.ts';
import { configMap, deployment } from '../../support/workloads.ts';

function files(mode: string): Record<string, string> {
  const w = web('web', { configMaps: ['web-config'], replicas: 2 });
  w.metadata.annotations = { ...w.metadata.annotations, 'gitops-reloader.io/strategy': 'git' };
  return toFiles([cm('web-config', { mode }), w], 'app');
}

/** A credentials directory as a mounted Secret gives it (the loopback server ignores what it holds). */
async function credentialsDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'flux-git-creds-'));
  await writeFile(path.join(dir, 'username'), 'reloader');
  await writeFile(path.join(dir, 'token'), 'loopback-server-ignores-it');
  return dir;
}

/** The repository with `files('fast')`, its GitRepository, and Kustomization `app` applied from it. */
async function appliedApp(kube: Kube, namespace: string) {
  const repo = await GitRepo.create(namespace, files('fast'));
  const source = await FluxSource.create(kube, namespace, repo);
  const app = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
  await app.waitApplied(await repo.head());
  return { repo, source, app };
}

/** The service in git mode, its credentials bound to exactly this repository (docs/flux.md, "Git mode"). */
async function gitModeReloader(namespace: string, repo: GitRepo, o: Parameters<typeof startFluxReloader>[2]) {
  return startFluxReloader(
    namespace,
    [
      '--git-allow-insecure-http',
      `--git-credentials-dir=${await credentialsDir()}`,
      `--git-credentials-urls=${repo.url}`,
    ],
    o,
  );
}

describe('git-commit mode with the real Flux controllers', { timeout: 300_000 }, () => {
  it("our checksum commit goes to the Kustomization's GitRepository, is reconciled by Flux, and rolls the workload once", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const { repo, source, app } = await appliedApp(kube, namespace);
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const live = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    // What the workload claims (a label its team could write) and what proves it (the inventory).
    expect(live.metadata?.labels?.['kustomize.toolkit.fluxcd.io/name']).toBe('app');
    expect((await app.read()).status?.inventory?.entries?.map((e) => e.id)).toContain(
      `${namespace}_web_apps_Deployment`,
    );
    const generation = live.metadata?.generation as number;
    const keyFile = await hashKeyFile();
    const key = Buffer.from((await readFile(keyFile, 'utf8')).replace(/\s+$/, ''), 'utf8');
    const svc = await gitModeReloader(namespace, repo, { onTestFinished, keyFile });
    const pods = await PodTracker.start(kube, namespace, 'web');

    // A person changes the config in git; Flux fetches and applies it.
    const change = await repo.commit(files('slow'), 'web-config: slow');
    await source.fetched(change);
    await app.waitApplied(change);
    expect((await kube.core.readNamespacedConfigMap({ name: 'web-config', namespace })).data).toEqual({
      mode: 'slow',
    });

    // The service commits the checksum on top of it, to the GitRepository's branch.
    const ours = await commits(repo, 3);
    const commit = ours[0] as { sha: string; subject: string; author: string };
    expect(ours[1]?.sha).toBe(change);
    expect(commit.subject).toBe(`chore(reload): ${namespace}/web config changed (ConfigMap/web-config)`);
    expect(commit.author).toBe('gitops-reloader <gitops-reloader@localhost>');
    const value = expectedHash(key, namespace, 'web-config', { mode: 'slow' });
    const diff = await changedLines(repo, commit.sha);
    // Only the annotation (the template had no annotations map: it is created).
    expect(diff).toEqual(['+      annotations:', `+        ${CONFIG_HASH}: "${value}"`]);
    expect(await repo.show(commit.sha, 'app/deployment-web.yaml')).toContain(value);
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web');
    expect(ev.message).toContain(`committed ${commit.sha.slice(0, 12)}`);
    expect(ev.message).toContain('the pods roll when Flux reconciles it');
    // Released by the end of the Kustomization's reconciliation of the person's commit.
    expect(ev.message).toContain(`(after sync of Kustomization/${namespace}/app at ${revisionOf(change)})`);
    const done = await svc.waitForLog(
      'reload complete',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      60_000,
    );
    expect(done.replaced, 'git mode replaces no pod itself').toBe(0);
    const committed = svc.logs.filter((l) => l.msg === 'git write-back committed');
    expect(committed).toHaveLength(1);
    expect(committed[0]?.kustomization).toBe(`${namespace}/app`);

    // Flux fetches and applies the commit; the Deployment controller rolls the pods.
    await source.fetched(commit.sha);
    await app.waitApplied(commit.sha);
    const rolled = await rolledOut(kube, namespace);
    expect(rolled.spec?.template?.metadata?.annotations?.[CONFIG_HASH]).toBe(value);
    expect(rolled.metadata?.generation, 'one template change, from git').toBe(generation + 1);
    await waitReadyPods(kube, namespace, 'web', 2);

    // Nothing more: no second commit, no second rollout, no restart of ours; asked to reconcile again,
    // Flux applies the same revision and changes nothing (what we wrote is git's).
    // Decided: nothing under way for web in the service. Then two more reconciliations, each
    // requested and waited for (lastHandledReconcileAt): each applied the same revision.
    await idle(svc, `Deployment/${namespace}/web`);
    for (let i = 0; i < 2; i++) {
      const k = await app.reconciled();
      expect(k.status?.lastAppliedRevision, 'the Kustomization applied').toBe(revisionOf(commit.sha));
      expect(k.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'Ready').toBe('True');
    }
    await idle(svc, `Deployment/${namespace}/web`);
    expect((await repo.log()).length, 'commits').toBe(3);
    expect(await replicaSetCount(kube, namespace), 'ReplicaSets').toBe(2);
    pods.stop();
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
    expect(pods.surgePods(), 'no surge pod: the rollout is the Deployment controller’s').toEqual([]);
    expect(await events(kube, namespace, 'Reloaded', 'web')).toHaveLength(1);
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    expect(svc.logs.filter((l) => l.msg === 'git write-back committed')).toHaveLength(1);
    const final = await kube.apps.readNamespacedDeployment({ name: 'web', namespace });
    expect(final.metadata?.generation).toBe(generation + 1);
    const managers = new Set((final.metadata?.managedFields ?? []).map((f) => f.manager));
    for (const m of managers) expect(m).toMatch(/^(kustomize-controller|kube-controller-manager)$/);
    const k = await app.read();
    expect(k.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  });

  it("a workload labelled with another team's Kustomization gets no commit to its repository", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const { repo } = await appliedApp(kube, namespace);
    // A team that can write workloads forges kustomize-controller's labels on its own Deployment.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('forger-config', { v: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('forger', {
        labels: {
          'kustomize.toolkit.fluxcd.io/name': 'app',
          'kustomize.toolkit.fluxcd.io/namespace': namespace,
        },
        annotations: { 'reloader.stakater.com/auto': 'true', 'gitops-reloader.io/strategy': 'git' },
        container: { envFrom: [{ configMapRef: { name: 'forger-config' } }] },
      }),
    });
    await waitReadyPods(kube, namespace, 'forger', 1);
    const svc = await gitModeReloader(namespace, repo, { onTestFinished });
    await kube.core.replaceNamespacedConfigMap({
      name: 'forger-config',
      namespace,
      body: configMap('forger-config', { v: '2' }),
    });
    const refused = await svc.waitForLog('the refusal', (l) => l.msg === 'git write refused', 60_000);
    expect(refused.rule).toBe('not-managed');
    expect(refused.kustomization).toBeUndefined();
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'forger');
    expect(ev.message).toContain(
      `git write refused for Kustomization ${namespace}/app: its inventory does not list Deployment ${namespace}/forger`,
    );
    // Nothing was written: the repository holds the first commit only.
    expect((await repo.log()).map((l) => l.subject)).toHaveLength(1);
    expect(svc.logs.filter((l) => l.msg === 'git write-back committed')).toEqual([]);
  });
});
