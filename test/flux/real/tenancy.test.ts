// A tenant labels its own ConfigMap as another tenant's Kustomization's, with the labels
// kustomize-controller writes (kustomize.toolkit.fluxcd.io/name and /namespace). Only the
// Kustomization's own inventory counts: the forged config is not held with that Kustomization's
// revision, and its reload is not credited to it, while the real tenant's config is.
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { AUTO, cm, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { FluxKustomization, FluxSource } from '../../support/flux.ts';
import { it } from '../../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { hashKeyFile, serviceArgs, startService } from '../../support/service.ts';
import { deployment } from '../../support/workloads.ts';

const KUSTOMIZE = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };

describe('Flux tenancy', { timeout: 300_000 }, () => {
  it("a config labelled for another tenant's Kustomization is not held with its revision nor credited to it", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // The attacker's namespace, next to the victim's (the test's).
    const other = (
      await kube.core.createNamespace({ body: { metadata: { generateName: 't-flux-attacker-' } } })
    ).metadata?.name as string;
    onTestFinished(async () => {
      await kube.core.deleteNamespace({ name: other });
    });

    // The victim: a Kustomization applying ConfigMap app and the Deployment web that reads it.
    const files = (v: string) => toFiles([cm('app', { k: v }), web('web', { configMaps: ['app'] })], 'app');
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const k = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
    await k.waitApplied(await repo.head());
    await waitReadyPods(kube, namespace, 'web', 1);

    // The attacker: its own ConfigMap, labelled as the victim's Kustomization's, read by its own Deployment.
    await kube.core.createNamespacedConfigMap({
      namespace: other,
      body: {
        metadata: {
          name: 'forged',
          labels: {
            'kustomize.toolkit.fluxcd.io/name': 'app',
            'kustomize.toolkit.fluxcd.io/namespace': namespace,
          },
        },
        data: { k: '1' },
      },
    });
    await kube.apps.createNamespacedDeployment({
      namespace: other,
      body: deployment('attacker', {
        replicas: 1,
        annotations: AUTO,
        container: { envFrom: [{ configMapRef: { name: 'forged' } }] },
      }),
    });
    await waitReadyPods(kube, other, 'attacker', 1);

    const args = serviceArgs(namespace, await hashKeyFile(), [
      `--flux-namespaces=${namespace}`,
      '--argocd-namespaces=',
      '--debounce=1s',
      '--max-debounce-wait=2s',
    ]).map((a) => (a === `--namespaces=${namespace}` ? `--namespaces=${namespace},${other}` : a));
    const svc = startService(args);
    onTestFinished(() => svc.kill());
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);

    // The victim's Kustomization is busy with a long reconciliation: its health check waits for a
    // Deployment that never comes, up to its timeout.
    await kube.custom.patchNamespacedCustomObject(
      {
        ...KUSTOMIZE,
        namespace,
        name: 'app',
        body: {
          spec: {
            timeout: '40s',
            healthChecks: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'never', namespace }],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const sha = await repo.commit(files('2'), 'Change the victim config');
    await source.fetched(sha);
    await svc.waitForLog(
      'the victim reconciliation holds its config',
      (l) =>
        l.msg === 'config change held until the Flux reconciliation ends' &&
        (l.configs as string[] | undefined)?.[0] === `ConfigMap/${namespace}/app`,
      60_000,
    );

    // While it is busy, the attacker changes its forged config.
    await kube.core.patchNamespacedConfigMap(
      { namespace: other, name: 'forged', body: { data: { k: '2' } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const attackerReload = await waitForEvent(kube, other, 'Reloaded', 'attacker', 30_000);
    // The victim's Kustomization was still reconciling when the attacker's reload went out: not held.
    const during = await k.read();
    expect(during.status?.conditions?.find((c) => c.type === 'Reconciling')?.reason).toBe('Progressing');
    expect(attackerReload.message, 'not credited to the victim Kustomization').not.toContain(
      'Kustomization/',
    );
    expect(
      svc.logs.some(
        (l) =>
          l.msg === 'config change held until the Flux reconciliation ends' &&
          (l.configs as string[] | undefined)?.includes(`ConfigMap/${other}/forged`),
      ),
      'the forged config was never held',
    ).toBe(false);

    // The victim's own change waits for its reconciliation to end (here it fails at its timeout, and
    // --flux-on-failed-apply=reload releases it).
    const victimReload = await waitForEvent(kube, namespace, 'Reloaded', 'web', 120_000);
    expect(victimReload.message).toContain(
      `(after sync of Kustomization/${namespace}/app at main@sha1:${sha})`,
    );
    const released = svc.logs.filter(
      (l) => l.msg === 'releasing config changes held for the Flux reconciliation as one batch',
    );
    expect(released.flatMap((l) => l.configs as string[])).toEqual([`ConfigMap/${namespace}/app`]);
  });
});
