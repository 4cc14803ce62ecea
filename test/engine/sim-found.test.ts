// Defects the engine simulation (test/sim) found, each reproduced against the real control plane with
// the real service process. The seed each test stands for is in its name; the unit test of the fix is
// in service/reconciler.test.ts, service/engine/startup.test.ts, service/engine/decide.test.ts or
// service/core/batcher.test.ts. Split in three files so that they run side by side: this one (reloads
// held, deleted workloads, refused ledger writes), sim-found-start.test.ts (changes found at start)
// and sim-found-retry.test.ts (retries and resumed snapshots).

import { afterEach, describe, expect } from 'vitest';
import { readHashKeyFile } from '../../service/config/config.ts';
import { hashConfig, namespaceKey } from '../../service/core/config-hash.ts';
import { effectiveCutoff } from '../../service/core/cutoff.ts';
import { configId } from '../../service/core/types.ts';
import { refuse } from '../support/admission.ts';
import { changeOf, decides } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { ledgerEntry } from '../support/ledger.ts';
import { waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, type LogLine, serviceArgs, startService } from '../support/service.ts';
import { pastTheSecondOf, pending, waitFor } from '../support/wait-for.ts';
import { scaleUpOne, setApp, webApp, webDeployment } from '../support/web-app.ts';
import { configMap, deployment } from '../support/workloads.ts';
import { cleanUp, heldReceiver, logAfter, posted, webhookService, writtenAt } from './sim-found-support.ts';

afterEach(cleanUp);

describe('defects the engine simulation found', () => {
  it('seed 407: a reload held for a missing config while an older one waits for its retry runs when the config returns', async ({
    kube,
    namespace,
  }) => {
    // A1 runs (its webhook POST unanswered); A2, a newer change, queues behind it; the config is
    // deleted; A1 fails (HTTP 400, not retried by the POST itself) and will be retried; A2 runs and is
    // held, its config missing. Before the fix A1's pending retry kept A2's content marked "under way"
    // for good, so the config's return with A2's data was taken for a duplicate: the change was lost.
    await webApp(kube, namespace);
    const hook = await heldReceiver();
    const svc = await webhookService(namespace, hook, ['--webhook-retries=0']);
    const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';

    await setApp(kube, namespace, '2');
    await posted(hook, 'A1 POSTed to the webhook');
    let mark = svc.logs.length;
    await setApp(kube, namespace, '3');
    await logAfter(svc, 'A2 observed', mark, (l) => l.msg === 'config changed');
    // The mark before the write: the service may log the deletion before the delete call returns.
    mark = svc.logs.length;
    await kube.core.deleteNamespacedConfigMap({ name: 'app', namespace });
    await logAfter(svc, 'the deletion observed', mark, (l) => l.msg === 'config changed');
    // A1 ends one of two ways, by a race inside the service (measured both ways; issue 34 leaves it
    // open): the deletion supersedes it at once (ADR 0039: it stops, its slot released), or it runs
    // on until its webhook's answer fails it and its retry waits. Either way the config is missing, so
    // what is planned is held; the claim is what follows: the config's return is reloaded, its
    // content not taken for one under way.
    hook.open.shift()?.writeHead(400).end();
    await svc.waitForLog(
      'A2 held',
      (l) => web(l) && l.msg === 'reload held: a config the pods need is missing',
    );

    mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '3' }) });
    const back = await logAfter(
      svc,
      'the return judged',
      mark,
      (l) =>
        (web(l) && (l.msg === 'reload started' || l.msg === 'no reload needed')) ||
        l.msg === 'a reload for this content is already under way',
    );
    expect(back.msg).toBe('reload started');
    await posted(hook, 'A2 POSTed to the webhook');
    hook.open.shift()?.writeHead(200).end();
    await logAfter(svc, 'A2 complete', mark, (l) => web(l) && l.msg === 'reload complete');
  });
});

describe('a workload deleted while its reload runs', () => {
  it('seed 8: leaves no ledger entry behind once the reload ends', async ({ kube, namespace }) => {
    // The reload (its webhook POST unanswered) runs while the Deployment is deleted; the delete event
    // leaves the entry to the run, which records its outcome after. Before the fix that record stayed:
    // a new Deployment of the same name would be judged against it. The periodic sweep, which also
    // forgets gone workloads' entries (seed 12), is kept out of the way by a long interval.
    await webApp(kube, namespace);
    const hook = await heldReceiver();
    const svc = await webhookService(namespace, hook, ['--surge-sweep-interval=1h']);
    const id = `Deployment/${namespace}/web`;
    await setApp(kube, namespace, '2');
    await posted(hook, 'the reload POSTed to the webhook');
    expect(await ledgerEntry(kube, namespace, id)).toBeDefined();
    await kube.apps.deleteNamespacedDeployment({ name: 'web', namespace });
    // Deployment events reach the service in order: once it recorded a Deployment created after the
    // delete, it has seen the delete.
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('other', {
        annotations: { 'reloader.stakater.com/auto': 'true' },
        container: { envFrom: [{ configMapRef: { name: 'app' } }] },
      }),
    });
    await svc.waitForLog(
      'the later Deployment recorded',
      (l) => l.workload === 'Deployment/other' && l.msg === 'baseline recorded',
    );
    expect(await ledgerEntry(kube, namespace, id)).toBeDefined();
    hook.open.shift()?.writeHead(200).end();
    await svc.waitForLog(
      'the reload complete',
      (l) => l.workload === 'Deployment/web' && l.msg === 'reload complete',
    );
    await waitFor(
      async () => ((await ledgerEntry(kube, namespace, id)) ? pending('the entry is there') : true),
      {
        describe: 'the entry of the deleted Deployment removed',
        timeout: 20_000,
      },
    );
  });
});

/**
 * Makes the API server refuse every write of the service's ledger shards in `namespace` (their
 * names: gitops-reloader-ledger-<n>); returns the lifting of it. A ConfigMap named like a shard but
 * not one the service reads (no shard number) is the probe.
 */
async function refuseLedgerWrites(kube: Kube, namespace: string): Promise<() => Promise<void>> {
  const probe = 'gitops-reloader-ledger-probe';
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap(probe, { n: '0' }) });
  return refuse(kube, namespace, {
    name: 'ledger',
    rules: [
      {
        apiGroups: [''],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE', 'DELETE'],
        resources: ['configmaps'],
      },
    ],
    allowWhen: "!request.name.startsWith('gitops-reloader-ledger-')",
    message: 'the ledger is read-only for this test',
    probe: () =>
      kube.core.replaceNamespacedConfigMap({
        name: probe,
        namespace,
        body: configMap(probe, { n: String(Date.now()) }),
      }),
  });
}

describe('ledger writes the API server refused', () => {
  it('seed 12: a refused removal of the entry of a deleted workload is retried by the periodic sweep', async ({
    kube,
    namespace,
  }) => {
    // The Deployment is deleted while the API refuses ledger writes: the removal of its entry fails.
    // Before the fix nothing tried it again, and the entry outlived the workload (a new workload of
    // the same name would be judged against it).
    await webApp(kube, namespace);
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--surge-sweep-interval=3s']),
    );
    await svc.waitForLog('baseline', (l) => l.msg === 'baseline recorded', 60_000);
    const id = `Deployment/${namespace}/web`;
    expect(await ledgerEntry(kube, namespace, id)).toBeDefined();
    const lift = await refuseLedgerWrites(kube, namespace);
    await kube.apps.deleteNamespacedDeployment({ name: 'web', namespace });
    await svc.waitForLog('the removal refused', (l) => l.msg === 'ledger remove failed', 30_000);
    await lift();
    await waitFor(
      async () => ((await ledgerEntry(kube, namespace, id)) ? pending('the entry is there') : true),
      {
        describe: 'the entry of the deleted Deployment removed',
        timeout: 30_000,
      },
    );
  });

  it('seed 1740: a baseline the ledger refused is recorded again, so a change of its config reloads', async ({
    kube,
    namespace,
  }) => {
    // A Deployment appears while the API refuses ledger writes: its baseline is not recorded. Before
    // the fix it was never tried again, so the next change of its config found no entry, was taken
    // for the baseline of a new workload, and reloaded nothing.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const lift = await refuseLedgerWrites(kube, namespace);
    await kube.apps.createNamespacedDeployment({ namespace, body: webDeployment() });
    await waitReadyPods(kube, namespace, 'web', 1);
    await svc.waitForLog(
      'the baseline refused',
      (l) => l.workload === 'Deployment/web' && String(l.msg).startsWith('could not record the ledger'),
      30_000,
    );
    await lift();
    // Read from the ledger, not the log: since the seed-12045 fix a retry that finds the refused
    // digests unchanged records them under "no reload needed".
    await waitFor(
      async () => (await ledgerEntry(kube, namespace, `Deployment/${namespace}/web`)) ?? pending('no entry'),
      { describe: 'the baseline recorded', timeout: 30_000 },
    );
    const mark = svc.logs.length;
    // The decision about this change (its resourceVersion), not the retry's own "no reload needed",
    // which may be logged a moment after the entry it recorded is read here.
    const change = changeOf('ConfigMap', await setApp(kube, namespace, '2'));
    const judged = await logAfter(
      svc,
      'the change judged',
      mark,
      (l) =>
        l.workload === 'Deployment/web' &&
        ['reload started', 'baseline recorded', 'no reload needed'].includes(l.msg) &&
        decides(l as LogLine, change),
    );
    expect(judged.msg).toBe('reload started');
  });

  it('seed 12045: a config changed while the baseline of its workload is refused reloads the pods that read the old data', async ({
    kube,
    namespace,
  }) => {
    // A Deployment appears while the API refuses ledger writes: its baseline (k=1, what its pods
    // read) is not recorded and is retried. app changes (k=2) before a retry lands. Before the fix the
    // retry recorded the new digests as the baseline: the pods, started with k=1, were never reloaded.
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    const keyFile = await hashKeyFile();
    const svc = startService(serviceArgs(namespace, keyFile, ['--debounce=0s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    const id = `Deployment/${namespace}/web`;
    const lift = await refuseLedgerWrites(kube, namespace);
    await kube.apps.createNamespacedDeployment({ namespace, body: webDeployment(2) });
    const before = await waitReadyPods(kube, namespace, 'web', 2);
    await svc.waitForLog(
      'the baseline refused',
      (l) => web(l) && l.msg === 'could not record the ledger; retrying',
      30_000,
    );

    let mark = svc.logs.length;
    await setApp(kube, namespace, '2');
    const seen = await logAfter(
      svc,
      'the change observed',
      mark,
      (l) => l.msg === 'config changed' && l.config === `ConfigMap/${namespace}/app`,
    );
    // Judged while writes are still refused: with the fix a reload whose pending entry is refused,
    // without it a baseline of the new digests, refused too.
    await logAfter(
      svc,
      'the change judged under the refusal',
      svc.logs.indexOf(seen),
      (l) => web(l) && ['reload failed', 'could not record the ledger; retrying'].includes(l.msg),
    );
    expect(await ledgerEntry(kube, namespace, id)).toBeUndefined();
    mark = svc.logs.length;
    await lift();

    const outcome = await logAfter(
      svc,
      'the retry after the refusal',
      mark,
      (l) => web(l) && ['reload complete', 'baseline recorded', 'no reload needed'].includes(l.msg),
      90_000,
    );
    expect(outcome.msg).toBe('reload complete');
    expect(outcome.configs).toEqual(['ConfigMap/app']);
    expect(outcome.replaced).toBe(2);
    const key = namespaceKey(readHashKeyFile(keyFile), namespace);
    const app = configId({ kind: 'ConfigMap', namespace, name: 'app' });
    const entry = await waitFor(
      async () => {
        const e = await ledgerEntry(kube, namespace, id);
        return e && !e.pending ? e : pending(e);
      },
      { describe: 'the reload recorded, nothing pending', timeout: 30_000 },
    );
    expect(entry.configs).toEqual({ [app]: hashConfig({ data: { k: '2' } }, key).all });
    // Every pod that read k=1 replaced, by the one reload.
    const after = await waitReadyPods(kube, namespace, 'web', 2);
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
    expect(svc.logs.filter((l) => web(l) && l.msg === 'reload complete')).toHaveLength(1);
  });
});

describe('a metadata-only edit of a config after its data changed, within one batch', () => {
  it('seed 5449: does not date the change: the pod created between the two is kept', async ({
    kube,
    namespace,
  }) => {
    // app's data changes; a pod is created past that change's cutoff (it reads the new data); then
    // only an annotation of app is edited, all within one debounce window. Before the fix the batch
    // kept the config's latest observation, the edit's: the cutoff moved past the new pod, which was
    // replaced needlessly (I3).
    const before = await webApp(kube, namespace, 2);
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--debounce=15s']));
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const web = (l: { [k: string]: unknown }) => l.workload === 'Deployment/web';
    const app = (l: { msg: string; [k: string]: unknown }) =>
      l.msg === 'config changed' && l.config === `ConfigMap/${namespace}/app`;
    const started = () => svc.logs.filter((l) => web(l) && l.msg === 'reload started');

    let mark = svc.logs.length;
    const written = await setApp(kube, namespace, '2');
    // Logged just after the service took the observation's time: no earlier than it.
    const dataSeen = Date.parse(String((await logAfter(svc, 'the data change observed', mark, app)).time));
    await pastTheSecondOf(dataSeen + 1000);
    const { added } = await scaleUpOne(kube, namespace, before);

    mark = svc.logs.length;
    // An annotation the service reads on a config (the simulation's metadata edit), data unchanged.
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }, { 'argocd.argoproj.io/sync-wave': '1' }),
    });
    const editSeen = Date.parse(String((await logAfter(svc, 'the edit observed', mark, app)).time));
    expect(started()).toEqual([]); // the batch is still open

    const reload = await svc.waitForLog('the reload started', (l) => web(l) && l.msg === 'reload started');
    await svc.waitForLog('the reload complete', (l) => web(l) && l.msg === 'reload complete', 90_000);
    const after = await waitReadyPods(kube, namespace, 'web', 3);
    expect(after.map((p) => p.uid)).toContain(added.uid);
    expect(after.filter((p) => before.some((q) => q.uid === p.uid))).toEqual([]);
    expect(started()).toHaveLength(1);
    // The cutoff is the data change's: past its write's second (the API server's whole-second stamp)
    // plus the margin, and no later than its observation's; before the edit's.
    const writeMs = writtenAt(written);
    const cutoff = Date.parse(String(reload.cutoff));
    expect(cutoff).toBeGreaterThanOrEqual(writeMs + 2000);
    expect(cutoff).toBeLessThanOrEqual(effectiveCutoff(dataSeen));
    expect(cutoff).toBeLessThan(effectiveCutoff(editSeen));
  });
});
