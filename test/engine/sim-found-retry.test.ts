// Defects the engine simulation (test/sim) found in retries and resumed reloads (their pod
// snapshots), each reproduced against the real control plane with the real service process (the other
// seeds: sim-found.test.ts, sim-found-start.test.ts).

import { afterEach, describe, expect } from 'vitest';
import { readHashKeyFile } from '../../service/config/config.ts';
import { hashConfig, namespaceKey } from '../../service/core/config-hash.ts';
import { configId } from '../../service/core/types.ts';
import { it } from '../support/kube.ts';
import { ledgerEntry } from '../support/ledger.ts';
import { livePods, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { setApp } from '../support/web-app.ts';
import { configMap } from '../support/workloads.ts';
import { blockEvictions, cleanUp, logAfter, slowWeb, startA1ThenBlock } from './sim-found-support.ts';

afterEach(cleanUp);

describe('a reload held for a missing config after it replaced some pods', () => {
  it('seeds 4, 255: resumes with its pod snapshot when the config returns, replacing no pod twice', async ({
    kube,
    namespace,
  }) => {
    // A1 (app changed) replaces one of two pods, then stalls on a PodDisruptionBudget until its
    // deadline: it will be retried from its snapshot. db, a config the pods need, is deleted: A2 is
    // planned and held. db comes back with its data, so A1's content is wanted again. Before the fixes
    // the hold cleared A1's pending entry (seed 4), and the newer A2 superseded it (seed 255): the
    // return planned a fresh reload whose cutoff was the return, replacing the pod A1 had already
    // created for this change a second time.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('db', { u: 'x' }) });
    // A new pod takes 4 s to be Ready: the window in which the budget goes in, after the first eviction.
    await kube.apps.createNamespacedDeployment({ namespace, body: slowWeb(['app', 'db']) });
    const { before, svc, web } = await startA1ThenBlock(kube, namespace);
    await svc.waitForLog(
      'A1 stalled',
      (l) => web(l) && l.msg === 'reload deadline passed; slot released, re-queued',
      60_000,
    );
    const replaced = (await livePods(kube, namespace, 'web')).filter(
      (p) => !before.some((q) => q.uid === p.uid),
    );
    expect(replaced).toHaveLength(1);
    const fresh = replaced[0]?.uid;

    await kube.core.deleteNamespacedConfigMap({ name: 'db', namespace });
    await svc.waitForLog(
      'A2 held',
      (l) => web(l) && l.msg === 'reload held: a config the pods need is missing',
    );
    await kube.policy.deleteNamespacedPodDisruptionBudget({ name: 'web', namespace });
    const mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('db', { u: 'x' }) });
    const resumed = await logAfter(
      svc,
      'the reload after the return',
      mark,
      (l) => web(l) && l.msg === 'reload started',
    );
    await logAfter(svc, 'it completed', mark, (l) => web(l) && l.msg === 'reload complete', 90_000);
    const after = await waitReadyPods(kube, namespace, 'web', 2);
    // The pod A1 created for this change still serves; only the other old pod was replaced.
    expect(after.map((p) => p.uid)).toContain(fresh);
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
    expect(resumed.resumed).toBe(true);
  });
});

describe('a workload deleted and created again while a reload of the old object waits for its retry', () => {
  it('seed 13626: the retry does not run for the new object; the ledger keeps its baseline', async ({
    kube,
    namespace,
  }) => {
    // A1 (app k=2) stalls on a PodDisruptionBudget until its deadline and waits for its retry. web is
    // deleted, app changes (k=3), and web is created again: a new object whose pods read k=3, baselined
    // with it. Before the fix A1's retry ran for the new object, found no pod older than its cutoff and
    // recorded its own target, k=2: the ledger went back, and a later change would replace pods that
    // already read k=3. --min-reload-interval keeps the retry in the queue (after its 2 s back-off)
    // until well after the new object exists; the superseded line proves it was judged against it.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await blockEvictions(kube, namespace);
    await kube.apps.createNamespacedDeployment({ namespace, body: slowWeb(['app']) });
    await waitReadyPods(kube, namespace, 'web', 2);
    const keyFile = await hashKeyFile();
    // Without progressive reloads: with them, the gate drops the retry before this rule sees it (its
    // config's content changed since it was planned: engine/progressive.ts), and this is the rule's test.
    const svc = startService(
      serviceArgs(namespace, keyFile, [
        '--debounce=0s',
        '--reload-deadline=3s',
        '--min-reload-interval=30s',
        '--progressive-reloads=false',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    const id = `Deployment/${namespace}/web`;

    await setApp(kube, namespace, '2');
    await svc.waitForLog('A1 started', (l) => web(l) && l.msg === 'reload started');
    await svc.waitForLog(
      'A1 stalled',
      (l) => web(l) && l.msg === 'reload deadline passed; slot released, re-queued',
      60_000,
    );

    await kube.policy.deleteNamespacedPodDisruptionBudget({ name: 'web', namespace });
    await kube.apps.deleteNamespacedDeployment({ name: 'web', namespace, propagationPolicy: 'Foreground' });
    await waitFor(
      async () => {
        const left = await kube.apps.listNamespacedDeployment({ namespace });
        const pods = await kube.core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
        const n = left.items.length + pods.items.length;
        return n === 0 ? true : pending(n);
      },
      { describe: 'web and its pods gone', timeout: 60_000 },
    );
    let mark = svc.logs.length;
    await setApp(kube, namespace, '3');
    await logAfter(
      svc,
      'app k=3 observed',
      mark,
      (l) => l.msg === 'config changed' && l.config === `ConfigMap/${namespace}/app`,
    );
    mark = svc.logs.length;
    const created = await kube.apps.createNamespacedDeployment({ namespace, body: slowWeb(['app']) });
    const uid = created.metadata?.uid;
    expect(uid).toBeTruthy();
    const fresh = await waitReadyPods(kube, namespace, 'web', 2);
    await logAfter(svc, 'the new web baselined', mark, (l) => web(l) && l.msg === 'baseline recorded');

    // A1's retry, judged against the new object: dropped (the fix) or run (the defect).
    const retry = await logAfter(
      svc,
      "A1's retry judged",
      mark,
      (l) => web(l) && (l.msg.startsWith('reload superseded') || l.msg === 'reload started'),
      60_000,
    );
    const settled = await logAfter(
      svc,
      'the workload judged after it',
      svc.logs.indexOf(retry),
      (l) =>
        web(l) && ['no reload needed', 'reload complete', 'reload started'].includes(l.msg) && l !== retry,
      60_000,
    );
    const key = namespaceKey(readHashKeyFile(keyFile), namespace);
    const app = configId({ kind: 'ConfigMap', namespace, name: 'app' });
    const entry = await ledgerEntry(kube, namespace, id);
    // Digests named by their data, so a failure says which one the ledger holds.
    const digest = (k: string) => hashConfig({ data: { k } }, key).all;
    const named: Record<string, string> = { [digest('2')]: "k=2 (A1's target)", [digest('3')]: 'k=3' };
    const held = Object.entries(entry?.configs ?? {}).map(([c, d]) => [c, named[d] ?? d]);
    expect(Object.fromEntries(held)).toEqual({ [app]: 'k=3' });
    expect(entry?.uid).toBe(uid);
    expect(entry?.pending).toBeUndefined();
    expect(retry.msg).toBe('reload superseded by a new object of the same name; not run');
    expect(settled.msg).toBe('no reload needed');
    // No pod of the new object was replaced.
    expect((await livePods(kube, namespace, 'web')).map((p) => p.uid).sort()).toEqual(
      fresh.map((p) => p.uid).sort(),
    );
  });
});

describe('a config deleted and created again while a reload of another change runs', () => {
  it('seeds 749, 1895: plans no second reload; the first resumes with its snapshot, replacing no pod twice', async ({
    kube,
    namespace,
  }) => {
    // A1 (app changed) replaces one of two pods, then stalls on a PodDisruptionBudget until its
    // deadline. Meanwhile db is deleted and created again with the same data. Before the fix each of
    // those events planned a reload of A1's change with a cutoff from the event (a deleted config's
    // digest differs), which superseded A1's retry and replaced the pod A1 had created a second time.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('db', { u: 'x' }) });
    // Opted out of progressive reloads: this is about the retry's cutoff and snapshot. In waves, A1's
    // deadline judges its replacement pod (Ready 4 s after it starts), and on a loaded machine that
    // can still be starting then: a halt, which is the gate's business, not this seed's.
    const body = slowWeb(['app', 'db']);
    body.metadata = {
      ...body.metadata,
      annotations: { ...body.metadata?.annotations, 'gitops-reloader.io/progressive': 'false' },
    };
    await kube.apps.createNamespacedDeployment({ namespace, body });
    const { before, svc, web } = await startA1ThenBlock(kube, namespace);
    let mark = svc.logs.length;
    await kube.core.deleteNamespacedConfigMap({ name: 'db', namespace });
    await logAfter(svc, 'the deletion observed', mark, (l) => l.msg === 'config changed');
    mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('db', { u: 'x' }) });
    await logAfter(svc, 'the return observed', mark, (l) => l.msg === 'config changed');
    await svc.waitForLog(
      'A1 stalled',
      (l) => web(l) && l.msg === 'reload deadline passed; slot released, re-queued',
      60_000,
    );
    const replaced = (await livePods(kube, namespace, 'web')).filter(
      (p) => !before.some((q) => q.uid === p.uid),
    );
    expect(replaced).toHaveLength(1);
    const fresh = replaced[0]?.uid;

    mark = svc.logs.length;
    await kube.policy.deleteNamespacedPodDisruptionBudget({ name: 'web', namespace });
    const next = await logAfter(svc, 'the next run', mark, (l) => web(l) && l.msg === 'reload started');
    await logAfter(svc, 'it completed', mark, (l) => web(l) && l.msg === 'reload complete', 90_000);
    const after = await waitReadyPods(kube, namespace, 'web', 2);
    // The pod A1 created for this change still serves; only the other old pod was replaced.
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
    expect(after.map((p) => p.uid)).toContain(fresh);
    expect(next.resumed).toBe(true);
  });
});
