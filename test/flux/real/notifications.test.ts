// The real notification-controller delivers signed events (a `generic-hmac` Provider and an Alert for
// the test's Kustomizations) to the service's Flux event endpoint. Covered: a successful
// reconciliation (the event is accepted and the reload runs once), a failed one under
// --flux-on-failed-apply=hold (the reload is held), a duplicate delivery and a bad signature.
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect } from 'vitest';
import { FLUX_WEBHOOK_PATH as PATH } from '../../../service/flux/webhook.ts';
import { cm, reloadedCount, web } from '../../argocd/fixtures.ts';
import { GitRepo, toFiles } from '../../support/argocd.ts';
import { expectHeld, idle } from '../../support/decisions.ts';
import { FluxKustomization, FluxSource, startFluxReloader, subscribe } from '../../support/flux.ts';
import { it, type Kube } from '../../support/kube.ts';
import { waitForEvent, waitReadyPods } from '../../support/observe.ts';
import type { RunningService } from '../../support/service.ts';
import { pastTheSecondOf } from '../../support/wait-for.ts';

function httpUrl(svc: RunningService): string {
  const line = svc.logs.find((l) => l.msg === 'http listening');
  if (!line) throw new Error('the service logged no http address');
  return line.url as string;
}

async function setup(
  kube: Kube,
  namespace: string,
  onTestFinished: Parameters<typeof startFluxReloader>[2]['onTestFinished'],
  extra: string[] = [],
) {
  const files = (v: string) => toFiles([cm('app', { k: v }), web('web', { configMaps: ['app'] })], 'app');
  const repo = await GitRepo.create(namespace, files('1'));
  const source = await FluxSource.create(kube, namespace, repo);
  const k = await FluxKustomization.create(kube, { name: 'app', source, path: './app' });
  await k.waitApplied(await repo.head());
  await waitReadyPods(kube, namespace, 'web', 1);
  const token = randomBytes(24).toString('hex');
  const dir = await mkdtemp(path.join(tmpdir(), 'gr-flux-token-'));
  const tokenFile = path.join(dir, 'token');
  await writeFile(tokenFile, token, { mode: 0o600 });
  const svc = await startFluxReloader(namespace, [`--flux-webhook-token-file=${tokenFile}`, ...extra], {
    onTestFinished,
  });
  await subscribe(kube, namespace, httpUrl(svc), token);
  return { files, repo, source, k, token, svc };
}

describe('Flux notifications from the real notification-controller', { timeout: 300_000 }, () => {
  it('accepts the signed events of a reconciliation and reloads once; a duplicate does nothing, a bad signature is refused', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const { files, repo, source, k, token, svc } = await setup(kube, namespace, onTestFinished);
    const sha = await repo.commit(files('2'), 'Change the config');
    await source.fetched(sha);
    await k.waitApplied(sha);
    const accepted = await svc.waitForLog(
      'a signed event from notification-controller',
      (l) =>
        l.msg === 'Flux event accepted' &&
        l.flux === `Kustomization/${namespace}/app` &&
        typeof l.revision === 'string' &&
        l.revision.endsWith(sha),
      60_000,
    );
    expect(accepted.outcome).toBe('accepted');
    await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    // Nothing more under way for web: a second reload would be waited for, and counted.
    await idle(svc, `Deployment/${namespace}/web`);
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);

    // The same event delivered twice (notification-controller retries): the second does nothing. Its
    // timestamp is a second the controller's own events of this revision cannot have (they are older).
    await pastTheSecondOf(Date.now());
    const body = JSON.stringify({
      involvedObject: {
        kind: 'Kustomization',
        namespace,
        name: 'app',
        apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      },
      severity: 'info',
      timestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
      message: `ConfigMap/${namespace}/app configured`,
      reason: 'Progressing',
      metadata: { revision: `main@sha1:${sha}` },
      reportingController: 'kustomize-controller',
    });
    const post = (signature: string) =>
      fetch(`${httpUrl(svc)}${PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-signature': signature },
        body,
      });
    const sign = (key: string) => `sha256=${createHmac('sha256', key).update(body).digest('hex')}`;
    const first = await post(sign(token));
    expect(first.status).toBe(202);
    expect(((await first.json()) as { outcome: string }).outcome).toBe('accepted');
    const again = await post(sign(token));
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual({ outcome: 'duplicate' });

    // Signed with another key: refused, and nothing is read or held for it.
    const forged = await post(sign('not-the-token'));
    expect(forged.status).toBe(401);
    await svc.waitForLog(
      'the refusal',
      (l) => l.msg === 'Flux event refused: the signature does not match the body and token',
      10_000,
    );
    expect(await reloadedCount(kube, namespace, 'web')).toBe(1);
  });

  it('holds the reload of a failed reconciliation under --flux-on-failed-apply=hold, and the event says it failed', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    const { files, repo, source, svc } = await setup(kube, namespace, onTestFinished, [
      '--flux-on-failed-apply=hold',
    ]);
    // The next reconciliation applies the config, then fails its health check (a Deployment that never
    // comes) at its timeout.
    await kube.custom.patchNamespacedCustomObject(
      {
        group: 'kustomize.toolkit.fluxcd.io',
        version: 'v1',
        plural: 'kustomizations',
        namespace,
        name: 'app',
        body: {
          spec: {
            timeout: '20s',
            healthChecks: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'never', namespace }],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const sha = await repo.commit(files('2'), 'Change the config');
    await source.fetched(sha);
    const failedEvent = await svc.waitForLog(
      'the error event of the failed reconciliation',
      (l) =>
        l.msg === 'Flux event accepted' &&
        l.flux === `Kustomization/${namespace}/app` &&
        l.severity === 'error' &&
        typeof l.revision === 'string' &&
        l.revision.endsWith(sha),
      120_000,
    );
    expect(failedEvent.reason).toMatch(/HealthCheckFailed|ReconciliationFailed/);
    await svc.waitForLog(
      'the hold',
      (l) =>
        l.msg ===
        'Flux apply did not succeed; its config changes stay held until it does (--flux-on-failed-apply=hold)',
      60_000,
    );
    // Held: the service's status says web waits for the Kustomization and nothing else; no reload.
    await expectHeld(svc, `Deployment/${namespace}/web`);
    expect(await reloadedCount(kube, namespace, 'web'), 'Reloaded Events').toBe(0);
    const live = await kube.core.readNamespacedConfigMap({ namespace, name: 'app' });
    expect(live.data?.k, 'the config was applied before the health check failed').toBe('2');
  });
});
