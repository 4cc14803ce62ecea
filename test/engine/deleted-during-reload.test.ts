// An optional config deleted while a reload of another config runs, against the real control plane
// (found by the engine simulation, seeds 860 and 121, then 749 and 1895). The deletion must plan no
// second reload: while the first is in flight, the in-flight check sees the same content (a deleted
// optional config keeps the digest last applied, seeds 749/1895); were it planned, once the first is
// recorded it would have nothing left to do (seeds 860/121). Before those fixes it ran, replacing pods
// the first had just created, and recorded the config as "missing", so its return with the data it had
// reloaded the pods once more.
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { livePods, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const uids = async (kube: Kube, namespace: string) =>
  (await livePods(kube, namespace, 'web')).map((p) => p.uid).sort();

/** How the deletion's batch was judged (the in-flight check logs the workload's full id). */
const decided = (svc: RunningService, namespace: string, after: number) =>
  svc.waitForLog('a decision on the second reload', (l) => {
    const web = l.workload === 'Deployment/web' || l.workload === `Deployment/${namespace}/web`;
    if (!web || svc.logs.indexOf(l) < after) return false;
    return [
      'reload started',
      'reload not needed: a completed reload applied this content',
      'reload held: a config the pods need is missing',
      'a reload for this content is already under way',
    ].includes(l.msg);
  });

describe('an optional config deleted while a reload runs', () => {
  it('plans no second reload, and its return with the same data reloads nothing', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('extra', { e: '1' }) });
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('web', {
        replicas: 2,
        annotations: { 'reloader.stakater.com/auto': 'true' },
        // Each new pod takes 4 s to be Ready: the reload runs long enough to delete the config meanwhile.
        podAnnotations: { 'kwok.gitops-reloader.io/ready-after': '4s' },
        container: {
          envFrom: [{ configMapRef: { name: 'app' } }, { configMapRef: { name: 'extra', optional: true } }],
        },
      }),
    });
    await waitReadyPods(kube, namespace, 'web', 2);
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), ['--debounce=0s', '--min-reload-interval=0s']),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await svc.waitForLog(
      'the first reload',
      (l) => l.workload === 'Deployment/web' && l.msg === 'reload started',
    );
    const deleting = svc.logs.length;
    await kube.core.deleteNamespacedConfigMap({ name: 'extra', namespace });
    await svc.waitForLog(
      'the first reload done',
      (l) => l.workload === 'Deployment/web' && l.msg === 'reload complete',
    );
    const second = await decided(svc, namespace, deleting);
    expect([
      'a reload for this content is already under way',
      'reload not needed: a completed reload applied this content',
    ]).toContain(second.msg);
    await waitReadyPods(kube, namespace, 'web', 2);
    const after = await uids(kube, namespace);

    const mark = svc.logs.length;
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('extra', { e: '1' }) });
    const back = await svc.waitForLog('the return judged', (l) => {
      if (l.workload !== 'Deployment/web' || svc.logs.indexOf(l) < mark) return false;
      return l.msg === 'no reload needed' || l.msg === 'reload started';
    });
    expect(back.msg).toBe('no reload needed');
    expect(await uids(kube, namespace)).toEqual(after);
    expect(
      svc.logs.filter((l) => l.workload === 'Deployment/web' && l.msg === 'reload started'),
    ).toHaveLength(1);
  });
});
