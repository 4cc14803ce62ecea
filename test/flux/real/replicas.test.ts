// Two replicas as the chart runs them (helm template | kubectl apply, the Deployment's args, the
// chart's ServiceAccount and Flux grants), with the real Flux controllers: notification-controller's
// signed events reach the replica that does not lead (as a Service may route them), which accepts
// them and acts on nothing; the leader reloads once, after the Kustomization is Ready at the commit.
import { randomBytes } from 'node:crypto';
import { describe, expect } from 'vitest';
import { cm, reloadedCount, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { idle } from '../../support/decisions.ts';
import { FluxKustomization, FluxSource, revisionOf, subscribe } from '../../support/flux.ts';
import { it } from '../../support/kube.ts';
import { PodTracker, waitAllReplaced, waitForEvent, waitReadyPods } from '../../support/observe.ts';
import {
  FAST_LEASE,
  installRelease,
  leaderAndStandby,
  nonLeaderWrites,
  stoppedAfterEach,
} from '../../support/replicas.ts';

const { releases, replicas } = stoppedAfterEach();

describe('two replicas with the real Flux controllers', { timeout: 300_000 }, () => {
  it("accept Flux's events at the standby and reload once, on the leader", async ({ kube, namespace }) => {
    const files = (v: string) =>
      toFiles([cm('app', { k: v }), web('web', { configMaps: ['app'], replicas: 2 })], 'app');
    const repo = await GitRepo.create(namespace, files('1'));
    const source = await FluxSource.create(kube, namespace, repo);
    const k = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
    await k.waitApplied(await repo.head());
    const before = await waitReadyPods(kube, namespace, 'web', 2);

    const token = randomBytes(24).toString('hex');
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: FAST_LEASE,
      flux: { namespaces: [namespace], webhookToken: token, tokenSecret: 'gitops-reloader-flux' },
    });
    releases.push(release);
    expect(release.args).toContain(`--flux-namespaces=${namespace}`);
    const [leader, standby] = await leaderAndStandby(kube, release, replicas);
    // The Service may route any event to either replica: here every one goes to the standby.
    await subscribe(kube, namespace, standby.url, token, 'gitops-reloader-flux');
    const pods = await PodTracker.start(kube, namespace, 'web');

    const sha = await repo.commit(files('2'), 'Change the config');
    await source.fetched(sha);
    await k.waitApplied(sha);
    const accepted = await standby.svc.waitForLog(
      'the standby accepts the signed event of the reconciliation',
      (l) =>
        l.msg === 'Flux event accepted' &&
        l.flux === `Kustomization/${namespace}/app` &&
        typeof l.revision === 'string' &&
        l.revision.endsWith(sha),
      60_000,
    );
    expect(accepted.outcome).toBe('accepted');
    const ev = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    expect(ev.message).toContain(`(after sync of Kustomization/${namespace}/app at ${revisionOf(sha)})`);
    await waitAllReplaced(kube, namespace, 'web', before, 2);
    await leader.svc.waitForLog(
      'the leader completes the reload',
      (l) => l.msg === 'reload complete' && l.workload === 'Deployment/web',
      60_000,
    );
    // Nothing more under way for web at the leader: a second reload would be waited for, and counted.
    await idle(leader.svc, `Deployment/${namespace}/web`);
    expect(await reloadedCount(kube, namespace, 'web'), 'Reloaded Events').toBe(1);
    pods.stop();

    expect(leader.svc.logs.filter((l) => l.msg === 'reload started')).toHaveLength(1);
    expect(standby.svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    expect(pods.newSince(before), 'each pod replaced exactly once').toHaveLength(2);
    // What the API server saw: every write came from the replica holding the Lease.
    expect(nonLeaderWrites(replicas)).toEqual([]);
  });
});
