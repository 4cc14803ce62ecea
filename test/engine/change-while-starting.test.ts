// A config written while a new term's start judges the world (the caches synced, the ledger still
// loading) is a change, not the baseline: the workload, seen for the first time with the old content,
// is baselined at that content, and the write, replayed once the start is done, reloads it once.
// Before the fix the baseline recorded the new content and the replay found nothing to do: the change
// was lost (CI of stop 41, test/hub/tenancy.test.ts, where a hub cluster's first term was slow).
// The replica's ledger LIST is held at its API proxy until the service says it saw the write.
//
// Measured on the 2-core machine: 2.5 s alone (the test; the run adds its set-up).
import { describe, expect } from 'vitest';
import { it } from '../support/kube.ts';
import { waitAllReplaced, waitForEvent } from '../support/observe.ts';
import { FAST_LEASE, installRelease, startReplica, stoppedAfterEach } from '../support/replicas.ts';
import { setApp, webApp } from '../support/web-app.ts';

const { releases, replicas } = stoppedAfterEach();

describe('a config written while the term starts', () => {
  it('is replayed as a change after the baseline: the workload seen for the first time reloads once', async ({
    kube,
    namespace,
  }) => {
    const before = await webApp(kube, namespace, 1);
    const release = await installRelease(namespace, {
      watch: [namespace],
      extraArgs: [...FAST_LEASE, '--debounce=0s'],
    });
    releases.push(release);
    let ledgerList: { held: Promise<void>; release: () => void } | undefined;
    const r = await startReplica(kube, release, 'replica-a', [], (proxy) => {
      ledgerList = proxy.hold(
        (q) =>
          q.method === 'GET' && decodeURIComponent(q.path).includes('app.kubernetes.io/component=ledger'),
      );
    });
    replicas.push(r);
    await ledgerList?.held;
    await r.svc.waitForLog('caches synced', (l) => l.msg === 'caches synced', 60_000);
    const written = await setApp(kube, namespace, '2');
    await r.svc.waitForLog(
      'the write seen during the start',
      (l) =>
        l.msg === 'config change seen while the term starts; judged once it has' &&
        l.resourceVersion === written.metadata?.resourceVersion,
      30_000,
    );
    expect(
      r.svc.logs.some((l) => l.msg === 'ready'),
      'the start is still held',
    ).toBe(false);
    ledgerList?.release();

    const baseline = await r.svc.waitForLog('the baseline', (l) => l.msg === 'baseline recorded', 30_000);
    expect(baseline.workload).toBe('Deployment/web');
    expect(baseline.namespace).toBe(namespace);
    const reloaded = await waitForEvent(kube, namespace, 'Reloaded', 'web', 60_000);
    expect(reloaded.message).toContain('ConfigMap/app');
    await waitAllReplaced(kube, namespace, 'web', before, 1);
    const complete = await r.svc.waitForLog('reload complete', (l) => l.msg === 'reload complete', 60_000);
    expect(complete.workload).toBe('Deployment/web');
    expect(
      r.svc.logs.filter((l) => l.msg === 'reload started'),
      'one reload for one write',
    ).toHaveLength(1);
  });
});
