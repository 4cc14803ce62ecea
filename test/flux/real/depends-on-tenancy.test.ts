// --flux-depends-on-as-one across tenants, on the real Flux controllers (issue 35, finding 5). The
// dependent writes its dependsOn: a tenant's Kustomization, in its own namespace, names the victim
// team's Kustomization as a dependency, and keeps itself busy (a health check on a Deployment that never
// comes, up to its spec.timeout). Before issue 35 the gate grouped the two, so the victim's reload was
// held until the tenant's reconciliation ended (here its 90 s timeout; for ever under
// --flux-on-failed-apply=hold). Now only dependsOn within one namespace groups: the victim's reload
// goes out once its own Kustomization applied, while the tenant's is still reconciling.
//
// Measured on the 2-core machine: 8.2 s and 13.1 s in two runs (12 s and 18 s with the run's set-up,
// alone on the shared control plane).
import { describe, expect } from 'vitest';
import { cm, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { FluxKustomization, FluxSource, type KustomizationObject } from '../../support/flux.ts';
import { it } from '../../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { hashKeyFile, serviceArgs, startService } from '../../support/service.ts';
import { pending, waitFor } from '../../support/wait-for.ts';

const KUSTOMIZE = { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', plural: 'kustomizations' };

const reconciling = (k: KustomizationObject) =>
  k.status?.conditions?.find((c) => c.type === 'Reconciling' && c.status === 'True')?.reason;

describe('Flux dependsOn across tenants', { timeout: 300_000 }, () => {
  it("a tenant's Kustomization naming another team's in its dependsOn does not hold that team's reload while it reconciles", async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    // The tenant's namespace, next to the victim's (the test's).
    const tenant = (
      await kube.core.createNamespace({ body: { metadata: { generateName: 't-flux-dependent-' } } })
    ).metadata?.name as string;
    onTestFinished(async () => {
      await kube.core.deleteNamespace({ name: tenant });
    });

    // The victim: Kustomization `configs` applies ConfigMap app and the Deployment web that reads it.
    const files = (v: string) => toFiles([cm('app', { k: v }), web('web', { configMaps: ['app'] })], 'app');
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const victim = await FluxKustomization.create(kube, { name: 'configs', source, path: './app' });
    await victim.waitApplied(await repo.head());
    await waitReadyPods(kube, namespace, 'web', 1);

    // The tenant: its own repository and GitRepository; its Kustomization depends on the victim's and
    // stays busy for 90 s (a health check on a Deployment that never comes).
    const tenantRepo = await GitRepo.create(tenant, toFiles([cm('mine', { k: '1' })], 'app'));
    const tenantSource = await FluxSource.create(kube, tenant, tenantRepo);
    await kube.custom.createNamespacedCustomObject({
      ...KUSTOMIZE,
      namespace: tenant,
      body: {
        apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
        kind: 'Kustomization',
        metadata: { name: 'dependent', namespace: tenant },
        spec: {
          interval: '1h',
          sourceRef: { kind: 'GitRepository', name: tenantSource.name },
          path: './app',
          prune: true,
          targetNamespace: tenant,
          timeout: '90s',
          dependsOn: [{ name: 'configs', namespace }],
          healthChecks: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'never', namespace: tenant }],
        },
      },
    });
    const readTenant = async () =>
      (await kube.custom.getNamespacedCustomObject({
        ...KUSTOMIZE,
        namespace: tenant,
        name: 'dependent',
      })) as KustomizationObject;
    // Past its dependency check: applied, now waiting on its health check.
    await waitFor(
      async () => {
        const k = await readTenant();
        return reconciling(k) === 'Progressing' && k.status?.inventory?.entries?.length
          ? k
          : pending(k.status?.conditions);
      },
      {
        describe: `Kustomization ${tenant}/dependent running its health check`,
        timeout: 60_000,
        interval: 200,
      },
    );

    // The operator watches both teams' namespaces, with dependsOn chains as one.
    const args = serviceArgs(namespace, await hashKeyFile(), [
      `--flux-namespaces=${namespace},${tenant}`,
      '--argocd-namespaces=',
      '--debounce=1s',
      '--max-debounce-wait=2s',
      '--flux-depends-on-as-one',
    ]).map((a) => (a === `--namespaces=${namespace}` ? `--namespaces=${namespace},${tenant}` : a));
    const svc = startService(args);
    onTestFinished(() => svc.kill());
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);

    // The victim changes its config; its own Kustomization applies it.
    const sha = await repo.commit(files('2'), 'Change the victim config');
    await source.fetched(sha);
    await victim.waitApplied(sha);
    // Unfixed, the reload waits for the tenant's reconciliation to end (at its 90 s timeout).
    const reload = await waitForEvent(kube, namespace, 'Reloaded', 'web', 45_000);
    expect(reload.message).toContain(
      `(after sync of Kustomization/${namespace}/configs at main@sha1:${sha})`,
    );
    // The tenant's Kustomization was still reconciling when the victim's reload went out.
    const during = await readTenant();
    expect(reconciling(during), 'the tenant still reconciling at the reload').toBe('Progressing');

    const released = svc.logs.filter(
      (l) => l.msg === 'releasing config changes held for the Flux reconciliation as one batch',
    );
    expect(released.map((l) => l.applier)).toEqual([`Kustomization/${namespace}/configs`]);
    expect(
      svc.logs.some(
        (l) =>
          (l.msg as string).startsWith('dependsOn in another namespace is not grouped') &&
          l.applier === `Kustomization/${tenant}/dependent`,
      ),
      'the foreign dependency was logged as not grouped',
    ).toBe(true);
  });
});
