// A flapping config on the real control plane: two writers (field managers) rewrite one ConfigMap
// every second, as two controllers fighting over it would (stakater/Reloader#1183). Each workload
// restarts at most once per --min-reload-interval, and one ConfigFlapping Warning names both writers.
import { afterEach, describe, expect } from 'vitest';
import { it, type Kube } from '../support/kube.ts';
import { events, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

const APPS = ['a', 'b', 'c'];
const INTERVAL_S = 8;

async function write(kube: Kube, namespace: string, i: number) {
  await kube.core.replaceNamespacedConfigMap({
    name: 'flappy',
    namespace,
    body: configMap('flappy', { v: String(i) }),
    fieldManager: i % 2 === 0 ? 'operator-a' : 'operator-b',
  });
}

describe('a flapping config', () => {
  it('restarts each workload at most once per interval, and one Warning names the writers', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('flappy', { v: 'start' }) });
    for (const app of APPS) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(app, {
          annotations: { 'reloader.stakater.com/auto': 'true' },
          container: { envFrom: [{ configMapRef: { name: 'flappy' } }] },
        }),
      });
    }
    for (const app of APPS) await waitReadyPods(kube, namespace, app, 1);
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        `--min-reload-interval=${INTERVAL_S}s`,
        '--flap-changes=5',
        '--flap-window=30s',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    // The writers rewrite it, each write once the service has seen the one before, until the first
    // wave's workload (`a`, first by name) has restarted three times (so the interval between its
    // restarts is measured twice), within a deadline. With progressive reloads on (the default), each
    // write is a new change that starts again from its first wave: the others wait for the flapping
    // to end, then reload once.
    const starts = (app: string) =>
      svc.logs
        .filter((l) => l.msg === 'reload started' && l.workload === `Deployment/${app}`)
        .map((l) => Date.parse(String(l.time)));
    const seen = () => svc.logs.filter((l) => l.msg === 'config changed').length;
    const deadline = Date.now() + 90_000;
    let writes = 0;
    let lastWrite = 0;
    while (starts('a').length < 3) {
      expect(Date.now()).toBeLessThan(deadline);
      lastWrite = Date.now();
      await write(kube, namespace, ++writes);
      const want = writes;
      await waitFor(async () => (seen() >= want ? true : pending(seen())), {
        describe: `write ${want} seen by the service`,
        timeout: 10_000,
      });
    }
    // The flapping over, every workload reloads to the last content.
    await waitFor(
      async () => {
        const late = APPS.filter((app) => !starts(app).some((t) => t >= lastWrite));
        return late.length === 0 ? true : pending(late);
      },
      { describe: 'every workload reloaded after the last write', timeout: 60_000 },
    );
    const flaps = await waitForEvent(kube, namespace, 'ConfigFlapping', 'flappy');
    expect(flaps.type).toBe('Warning');
    expect(flaps.message).toMatch(/^changed 5 times within 30s, written by operator-a, operator-b;/);
    expect(await events(kube, namespace, 'ConfigFlapping')).toHaveLength(1);
    for (const app of APPS) {
      const t = starts(app);
      // A reload per write is what an unbounded reloader does.
      expect(t.length).toBeLessThan(writes / 4);
      for (let i = 1; i < t.length; i++) {
        // The queue's interval runs from the end of one reload to the start of the next.
        expect((t[i] as number) - (t[i - 1] as number)).toBeGreaterThanOrEqual(INTERVAL_S * 1000);
      }
    }
  });
});
