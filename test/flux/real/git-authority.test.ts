// Flux git mode with two tenants and two repositories, on the real Flux controllers (issue 35,
// finding 2). Team A edits its own Kustomization: sourceRef to team B's GitRepository (in B's
// namespace) and B's path, suspended so that its inventory still lists A's last apply (as Flux leaves
// it under --no-cross-namespace-refs). Then A changes a config of its own workload. The service holds
// credentials for both repositories; before issue 35 it committed A's checksum into B's repository, to
// B's own `web` manifest (it names no namespace: B's Kustomization sets targetNamespace). Now it
// refuses (rule source-namespace) and B's repository receives 0 pushes, counted at the git server by
// a pre-receive hook that records every push it is sent.
//
// Measured on the 2-core machine: 7.4 s (15 s with the run's set-up, alone).
import { chmod, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { cm, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { FluxKustomization, FluxSource, startFluxReloader } from '../../support/flux.ts';
import { it, type Kube } from '../../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { configMap } from '../../support/workloads.ts';

const KUSTOMIZE = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };

function files(mode: string): Record<string, string> {
  const w = web('web', { configMaps: ['web-config'], replicas: 1 });
  w.metadata.annotations = { ...w.metadata.annotations, 'gitops-reloader.io/strategy': 'git' };
  return toFiles([cm('web-config', { mode }), w], 'app');
}

/** Every push the git server is sent to `repo`, accepted or not, recorded by a pre-receive hook. */
async function countPushes(repo: GitRepo): Promise<() => Promise<number>> {
  const log = path.join(repo.bare, 'pushes-received');
  const hook = path.join(repo.bare, 'hooks', 'pre-receive');
  await writeFile(hook, `#!/bin/sh\ncat >/dev/null\necho push >> '${log}'\nexit 0\n`);
  await chmod(hook, 0o755);
  return async () =>
    (await readFile(log, 'utf8').catch(() => '')).split('\n').filter((l) => l === 'push').length;
}

/** A team: its namespace, repository (checksum pushes counted), GitRepository and Kustomization `app`. */
async function team(kube: Kube, namespace: string) {
  const repo = await GitRepo.create(namespace, files('fast'));
  const pushes = await countPushes(repo);
  const source = await FluxSource.create(kube, namespace, repo);
  const app = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
  await app.waitApplied(await repo.head());
  await waitReadyPods(kube, namespace, 'web', 1);
  return { repo, pushes, source, app };
}

async function credentialsDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'flux-authority-creds-'));
  await writeFile(path.join(dir, 'username'), 'reloader');
  await writeFile(path.join(dir, 'token'), 'loopback-server-ignores-it');
  return dir;
}

describe('Flux git mode: the source written to is the one the inventory came from', {
  timeout: 300_000,
}, () => {
  it("a Kustomization repointed at another team's GitRepository and path gets no commit there: team B's repository receives 0 pushes", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const teamB = (
      await kube.core.createNamespace({ body: { metadata: { generateName: 't-flux-team-b-' } } })
    ).metadata?.name as string;
    onTestFinished(async () => {
      await kube.core.deleteNamespace({ name: teamB }).catch(() => undefined);
    });
    const a = await team(kube, namespace);
    const b = await team(kube, teamB);
    const bHead = await b.repo.head();

    // The platform trusts both teams' namespaces for Flux (startFluxReloader adds the test's; list
    // flags collect), and holds credentials for both repositories.
    const svc = await startFluxReloader(
      namespace,
      [
        `--flux-namespaces=${teamB}`,
        '--git-allow-insecure-http',
        `--git-credentials-dir=${await credentialsDir()}`,
        `--git-credentials-urls=${a.repo.url},${b.repo.url}`,
      ],
      { onTestFinished },
    );

    // Team A repoints its own Kustomization at B's GitRepository and path; suspended, Flux leaves its
    // inventory as A's last apply.
    await kube.custom.patchNamespacedCustomObject(
      {
        ...KUSTOMIZE,
        namespace,
        name: 'app',
        body: {
          spec: {
            suspend: true,
            sourceRef: { kind: 'GitRepository', name: b.source.name, namespace: teamB },
            path: './app',
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const k = await a.app.read();
    expect(k.status?.inventory?.entries?.map((e) => e.id)).toContain(`${namespace}_web_apps_Deployment`);

    // And changes a config of its own workload.
    await kube.core.replaceNamespacedConfigMap({
      name: 'web-config',
      namespace,
      body: configMap('web-config', { mode: 'slow' }),
    });
    // The service's decision about that write: refused, before anything is sent.
    const refused = await svc.waitForLog(
      'the git write for web decided',
      (l) => l.msg === 'git write refused' || l.msg === 'git write-back committed',
      90_000,
    );
    expect(refused.msg, `committed: ${JSON.stringify(refused)}`).toBe('git write refused');
    expect(refused.rule).toBe('source-namespace');
    const ev = await waitForEvent(kube, namespace, 'ReloadFailed', 'web');
    expect(ev.message).toContain('git write refused');
    expect(ev.message, "the Event in A's namespace names nothing of B's").not.toContain(teamB);

    // Counted at the git server: no push to B's repository, and its branch is where B left it.
    expect(await b.pushes(), "pushes received by team B's repository").toBe(0);
    expect(await b.repo.head()).toBe(bHead);
    expect(svc.logs.filter((l) => l.msg === 'git write-back committed')).toEqual([]);
  });
});
