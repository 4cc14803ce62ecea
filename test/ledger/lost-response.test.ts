// A ledger write whose response is lost after the API server applied it (found by the engine
// simulation, seed 19), on the real control plane: the service reaches the API server through a
// loopback proxy that drops the answer to the write recording a completed reload. Before the fix the
// service kept the entry it had before that write, and its retry wrote from it: the shard went back to
// the configs the lost write had replaced (the unit test is service/kube/ledger-lost-response.test.ts).
import { type V1ConfigMap, Watch } from '@kubernetes/client-node';
import { afterEach, describe, expect } from 'vitest';
import { decodeEntry } from '../../service/core/ledger-entry.ts';
import { LEDGER_LABELS } from '../../service/kube/ledger.ts';
import { ApiProxy } from '../support/api-proxy.ts';
import { it } from '../support/kube.ts';
import { ledgerEntry } from '../support/ledger.ts';
import { proxiedServiceArgs } from '../support/proxied-service.ts';
import { killAll, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { webApp } from '../support/web-app.ts';
import { configMap } from '../support/workloads.ts';

afterEach(killAll);

const SHARD = /\/configmaps\/gitops-reloader-ledger-\d+(\?|$)/;

describe('a ledger write whose response is lost', () => {
  it('seed 19: never sends the ledger back to the entry the lost write replaced', async ({
    kube,
    namespace,
    onTestFinished,
  }) => {
    await webApp(kube, namespace);
    const proxy = await ApiProxy.start(kube.kc);
    onTestFinished(() => proxy.close());
    const args = await proxiedServiceArgs(kube, namespace, proxy, ['--debounce=0s']);

    // Every version of the workload's entry the shards held, in order.
    const id = `Deployment/${namespace}/web`;
    const seen: string[] = [];
    const selector = Object.entries(LEDGER_LABELS)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const watch = await new Watch(kube.kc).watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { labelSelector: selector },
      (_type: string, cm: V1ConfigMap) => {
        for (const [key, value] of Object.entries(cm.data ?? {})) {
          const d = decodeEntry(key, value);
          if (d.ok && d.id === id) seen.push(JSON.stringify(d.entry.configs));
        }
      },
      () => {},
    );
    onTestFinished(() => watch.abort());

    const svc = startService(args);
    await svc.waitForLog('baseline', (l) => l.msg === 'baseline recorded', 60_000);
    const before = (await ledgerEntry(kube, namespace, id))?.configs;
    // The write that records the reload as complete (no pending reload left in it) loses its answer.
    proxy.loseResponse(
      (r) =>
        r.method === 'PATCH' &&
        SHARD.test(r.path) &&
        r.status === 200 &&
        !Object.values((r.body as { data?: Record<string, string | null> })?.data ?? {}).some((v) =>
          v?.includes('"p"'),
        ) &&
        JSON.stringify(r.body).includes('web'),
    );
    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitFor(() => (proxy.requests.some((r) => r.lost) ? true : pending('no response lost yet')), {
      describe: 'the completion write applied, its answer lost',
      timeout: 30_000,
    });
    const after = await waitFor(
      async () => {
        const e = await ledgerEntry(kube, namespace, id);
        return e && !e.pending && JSON.stringify(e.configs) !== JSON.stringify(before) ? e : pending(e);
      },
      { describe: 'the new configs recorded', timeout: 30_000 },
    );
    // The run whose write lost its answer failed; its retry (2 s later) decides again.
    const failed = await svc.waitForLog('the run failed', (l) => l.msg === 'reload failed', 30_000);
    await svc.waitForLog(
      'the retry decided',
      (l) =>
        svc.logs.indexOf(l) > svc.logs.indexOf(failed) &&
        l.workload === 'Deployment/web' &&
        (l.msg === 'reload not needed: a completed reload applied this content' ||
          l.msg === 'reload complete'),
      60_000,
    );
    await waitFor(
      async () => {
        const e = await ledgerEntry(kube, namespace, id);
        return e && !e.pending ? e : pending(e);
      },
      { describe: 'no reload pending', timeout: 60_000 },
    );
    const first = seen.indexOf(JSON.stringify(after.configs));
    expect(first).toBeGreaterThanOrEqual(0);
    expect(seen.slice(first)).not.toContain(JSON.stringify(before));
  });
});
