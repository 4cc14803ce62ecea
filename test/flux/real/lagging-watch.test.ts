// The Flux gate when its watches of Kustomizations and sources lag behind its config watch (a relist
// after a 410, a loaded API server), on the real Flux controllers and the chart's install: the
// service talks to the API server through a loopback proxy that delivers those watches 20 s late.
// A commit changes a ConfigMap and, in the same Kustomization (health-checked), a Deployment whose
// new pods take 8 s to be Ready. The config change arrives while the Kustomization still looks idle
// to the service: Flux wrote it, so the gate reads the Kustomization afresh (it reconciles) and holds
// the change; the end, seen late, is confirmed by a fresh read before the reload. Without that the
// reload started during the apply (docs/flux.md, "The gate under adversity").
import { describe, expect } from 'vitest';
import { cm, web } from '../../argocd/fixtures.ts';
import { GitRepo, type Manifest, toFiles } from '../../support/argocd.ts';
import { FluxKustomization, FluxSource, revisionOf } from '../../support/flux.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import { FAST_LEASE, installRelease, startReplica, stoppedAfterEach } from '../../support/replicas.ts';
import { deployment } from '../../support/workloads.ts';

const { releases, replicas } = stoppedAfterEach();

const LAG_MS = 20_000;
/** The service's LIST and WATCH of Kustomizations and sources (not a GET of one object). */
const fluxWatch = (path: string) =>
  /\/apis\/(kustomize|source)\.toolkit\.fluxcd\.io\/v1\/namespaces\/[^/]+\/[a-z]+\?/.test(path);

/** A Deployment nobody reloads, whose new pods are Ready 8 s after they start: it slows the health check. */
function slow(note: string): Manifest {
  return deployment('slow', {
    replicas: 1,
    podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '8s', 'example.com/note': note },
  }) as unknown as Manifest;
}

describe('a lagging Flux watch', { timeout: 300_000 }, () => {
  it('does not let a config change Flux applied go before the reconciliation that applied it ends', async ({
    kube,
    namespace,
  }) => {
    const files = (v: string) =>
      toFiles([cm('app', { k: v }), web('web', { configMaps: ['app'], replicas: 2 }), slow(v)], 'app');
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const k = await FluxKustomization.create(kube, { name: 'app', source, path: './app', wait: true });
    await k.waitApplied(await repo.head());
    const before = await waitReadyPods(kube, namespace, 'web', 2);

    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=1s'],
      flux: { namespaces: [namespace] },
    });
    releases.push(release);
    const replica = await startReplica(kube, release, 'replica-a', [], (proxy) =>
      proxy.lag(fluxWatch, LAG_MS),
    );
    replicas.push(replica);
    await replica.svc.waitForLog('ready', (l) => l.msg === 'ready', LAG_MS + 60_000);
    const pods = await PodTracker.start(kube, namespace, 'web');

    const sha = await repo.commit(files('2'), 'Change the config and roll slow');
    await source.fetched(sha);
    const done = await k.waitApplied(sha);
    const readyAt = Date.parse(
      done.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime ?? '',
    );
    expect(Number.isFinite(readyAt)).toBe(true);
    const started = await replica.svc.waitForLog(
      'the reload of web',
      (l) => l.msg === 'reload started' && l.workload === 'Deployment/web',
      LAG_MS + 60_000,
    );
    // Ready's time has whole seconds: the reload starts no earlier than that second.
    expect(Date.parse(started.time as string)).toBeGreaterThanOrEqual(readyAt);
    // The service held the change although its view of the Kustomization was idle: Flux wrote it.
    expect(
      replica.svc.logs.some(
        (l) => l.msg === 'Flux wrote a config of an applier that looks idle; reading it again',
      ),
    ).toBe(true);
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    expect(ev.message).toContain(`(after sync of Kustomization/${namespace}/app at ${revisionOf(sha)})`);
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    pods.stop();
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
    expect(replica.svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
  });
});
