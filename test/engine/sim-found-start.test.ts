// Defects the engine simulation (test/sim) found in what a start finds changed while the service was
// down, each reproduced against the real control plane with the real service process (the other
// seeds: sim-found.test.ts, sim-found-retry.test.ts).

import { afterEach, describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { ledgerEntry } from '../support/ledger.ts';
import { livePods, waitReadyPods, waitRolledOut } from '../support/observe.ts';
import { hashKeyFile, serviceArgs, startService } from '../support/service.ts';
import { pastTheSecondOf, pending, waitFor } from '../support/wait-for.ts';
import { scaleUpOne, setApp, webApp } from '../support/web-app.ts';
import { configMap } from '../support/workloads.ts';
import { cleanUp, logAfter, slowWeb, writtenAt } from './sim-found-support.ts';

afterEach(cleanUp);

describe('a change found at start', () => {
  it('seed 83: replaces the pods older than the config write, not a pod created after it', async ({
    kube,
    namespace,
  }) => {
    // The service stops; the config is written; a pod is created after the write (it reads the new
    // data), as a reload cut by a leader change or a rollout while down creates one. Before the fix
    // the change found at start took the start as its cutoff and replaced that pod too.
    const before = await webApp(kube, namespace, 2);
    const keyFile = await hashKeyFile();
    const args = serviceArgs(namespace, keyFile, ['--debounce=0s']);
    const first = startService(args);
    await first.waitForLog('baseline', (l) => l.msg === 'baseline recorded', 60_000);
    expect(await first.stop()).toBe(0);

    const written = await setApp(kube, namespace, '2');
    const writeMs = writtenAt(written);
    // The cutoff is the write plus a 1 s margin: the new pod is stamped a whole second after that.
    await pastTheSecondOf(writeMs + 1000);
    const { added: newer } = await scaleUpOne(kube, namespace, before);

    const svc = startService(args);
    await svc.waitForLog('the change found', (l) => l.msg === 'changed while the service was down', 60_000);
    await svc.waitForLog('the reload done', (l) => l.msg === 'reload complete', 90_000);
    const after = await waitReadyPods(kube, namespace, 'web', 3);
    expect(after.map((p) => p.uid)).toContain(newer.uid);
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
  });
});

describe('a pending reload whose configs changed again while the service was down', () => {
  it('seed 144: is judged by the pods at start: after a rollout while down, nothing is restarted', async ({
    kube,
    namespace,
  }) => {
    // A1 (k=2) runs slowly; the service crashes with A1 pending; while it is down the config changes
    // again (k=3) and the pod template changes: every pod is new, created after k=3 was written. Before the
    // fix the start took the pending reload whose target differs for a change found "now", with no
    // pod-age check, and replaced every pod again.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const body = (note: string) => slowWeb(['app'], note);
    await kube.apps.createNamespacedDeployment({ namespace, body: body('1') });
    await waitReadyPods(kube, namespace, 'web', 2);
    const keyFile = await hashKeyFile();
    const args = serviceArgs(namespace, keyFile, ['--debounce=0s']);
    const first = startService(args);
    await first.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const id = `Deployment/${namespace}/web`;

    await setApp(kube, namespace, '2');
    await waitFor(
      async () => (await ledgerEntry(kube, namespace, id))?.pending ?? pending('no pending entry yet'),
      { describe: 'A1 recorded as pending', timeout: 30_000 },
    );
    await first.kill();
    expect((await ledgerEntry(kube, namespace, id))?.pending).toBeDefined();

    // While down: the config changes again (k=3; a change the running service saw would supersede A1
    // at once, ADR 0039), then a template change rolls every pod, each created after k=3 was written.
    const written = await setApp(kube, namespace, '3');
    const writeMs = writtenAt(written);
    await pastTheSecondOf(writeMs + 1000);
    await kube.apps.replaceNamespacedDeployment({ name: 'web', namespace, body: body('2') });
    await waitRolledOut(kube, namespace, 'web', 2);
    const rolled = await waitReadyPods(kube, namespace, 'web', 2);

    const svc = startService(args);
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    // Judged at start: the pending reload is settled (cleared) either by the start's own record or,
    // without the fix, by a reload that ran to its end.
    await waitFor(
      async () => {
        const e = await ledgerEntry(kube, namespace, id);
        return e && !e.pending ? e : pending(e);
      },
      { describe: 'the pending reload settled', timeout: 90_000 },
    );
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid).sort()).toEqual(
      rolled.map((p) => p.uid).sort(),
    );
  });
});

describe('a pending reload after a key change', () => {
  it('seed 1963: whose config was written again since it began replaces every pod older than that write', async ({
    kube,
    namespace,
  }) => {
    // A1 (k=2) snapshots both pods and replaces one; then k=3 is written and the service crashes.
    // It starts again with another HMAC key, so the digests prove nothing. Before the fix the pending
    // reload resumed with its snapshot only: the pod A1 had created (reading k=2) was kept, and k=3
    // never reached it.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.apps.createNamespacedDeployment({ namespace, body: slowWeb(['app']) });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    const first = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await first.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const id = `Deployment/${namespace}/web`;

    await setApp(kube, namespace, '2');
    const a1 = await waitFor(
      async () => {
        const p = (await ledgerEntry(kube, namespace, id))?.pending;
        return p?.targets ? p : pending('no snapshot yet');
      },
      { describe: 'A1 pending with its snapshot', timeout: 30_000 },
    );
    expect(a1.targets).toHaveLength(2);
    const a1Pod = await waitFor(
      async () => {
        const live = await livePods(kube, namespace, 'web');
        return live.find((p) => !before.some((q) => q.uid === p.uid)) ?? pending(live);
      },
      { describe: 'a pod A1 created', timeout: 30_000 },
    );
    // k=3 is written after A1's cutoff (a write within it would count as A1's own change).
    await pastTheSecondOf(Date.parse(a1.cutoff));
    const mark = first.logs.length;
    await setApp(kube, namespace, '3');
    await logAfter(first, 'the second write seen', mark, (l) => l.msg === 'config changed');
    await first.kill();
    expect((await ledgerEntry(kube, namespace, id))?.pending).toBeDefined();

    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    await svc.waitForLog(
      'the reload done',
      (l) => l.workload === 'Deployment/web' && l.msg === 'reload complete',
      90_000,
    );
    const after = await waitReadyPods(kube, namespace, 'web', 2);
    // The pod A1 created before k=3 was written is replaced too.
    expect(after.map((p) => p.uid)).not.toContain(a1Pod.uid);
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
  });
});
