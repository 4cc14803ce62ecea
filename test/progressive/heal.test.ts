// The fix heals (issue 34, finding 0), on the real control plane, in the order people produce: a bad
// change of a shared ConfigMap makes every new pod fail readiness (test/support/app-health.ts), and
// the fix is written while the bad change's canary still waits for its surge pod, long before
// --reload-deadline. The canary's reload of the bad content stops at once and gives back its slot;
// every reader then reloads once, to the fix, the canary first, and no halt is blamed on the fix.
// Without a fix, a canary whose new pod runs without becoming Ready halts the change within the
// settle time, with a Warning naming the config (not at --reload-deadline). On main before the fix
// both waited for the 2-minute deadline. Measured: 52 s.
import { afterEach, describe, expect } from 'vitest';
import { health } from '../support/app-health.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, surgePods, waitAllReplaced, waitForEvent } from '../support/observe.ts';
import { progressiveFleet, setHealth } from '../support/progressive-fleet.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';

afterEach(killAll);

const REPLICAS = 2;
const CANARY = 'canary';
/** Long: nothing here may wait for it. */
const DEADLINE = ['--reload-deadline=2m'];

/** The fleet of `names`, the canary among them first by priority. */
const fleet = (kube: Kube, namespace: string, names: string[]) =>
  progressiveFleet(kube, namespace, names, { canary: CANARY, replicas: REPLICAS });

function start(namespace: string, key: string, settle: string): RunningService {
  return startService(
    serviceArgs(namespace, key, [
      '--debounce=500ms',
      '--progressive-gather=2s',
      `--progressive-settle=${settle}`,
      ...DEADLINE,
    ]),
  );
}

/** After the fix: every app's old pods replaced once, by Ready pods, one Reloaded Event each, no surge left. */
async function everyReaderOnce(
  kube: Kube,
  namespace: string,
  svc: RunningService,
  names: string[],
  f: Awaited<ReturnType<typeof fleet>>,
) {
  for (const app of names) await waitAllReplaced(kube, namespace, app, f.before.get(app) ?? [], REPLICAS);
  await svc.waitForLog(
    'the fix reached every reader',
    (l) => l.msg === 'progressive reload: the change reached every workload that reads it',
    60_000,
  );
  await waitFor(
    async () => {
      const left = await surgePods(kube, namespace);
      return left.length === 0 ? true : pending(left.map((p) => p.metadata?.name));
    },
    { describe: 'no surge pod left', timeout: 30_000 },
  );
  for (const app of names) {
    expect({ app, replacements: f.trackers.get(app)?.newSince(f.before.get(app) ?? []).length }).toEqual({
      app,
      replacements: REPLICAS,
    });
    expect(await events(kube, namespace, 'Reloaded', app)).toHaveLength(1);
  }
}

describe('progressive reloads: the fix heals', () => {
  it('the fix written while the bad change’s canary still waits stops that reload at once; every reader reloads once to the fix, the canary first', async ({
    kube,
    namespace,
  }) => {
    const names = [CANARY, 'app-1', 'app-2', 'app-3', 'app-4'];
    const f = await fleet(kube, namespace, names);
    // A settle long enough that the fix comes while the canary's reload still waits.
    const svc = start(namespace, await hashKeyFile(), '10s');
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    await setHealth(kube, namespace, 'bad');
    // The canary's surge pod runs and is not Ready: the person who sees it writes the fix now.
    await waitFor(
      async () => {
        const surge = (await surgePods(kube, namespace)).map((p) => ({
          name: p.metadata?.name,
          health: health(p),
        }));
        return surge.some((p) => p.name?.startsWith(`${CANARY}-`) && p.health === 'unready')
          ? true
          : pending(surge);
      },
      { describe: 'the canary’s surge pod running and not Ready', timeout: 30_000 },
    );
    const fixAt = svc.logs.length;
    await setHealth(kube, namespace, 'fixed');
    await svc.waitForLog(
      'the bad reload stopped',
      (l) =>
        l.msg === 'reload stopped: a newer change of its config supersedes it; slot released' &&
        l.workload === `Deployment/${CANARY}`,
    );

    await everyReaderOnce(kube, namespace, svc, names, f);
    // The fix started from the first wave: the canary first.
    const started = svc.logs
      .slice(fixAt)
      .filter((l) => l.msg === 'reload started')
      .map((l) => l.workload);
    expect(started[0]).toBe(`Deployment/${CANARY}`);
    expect(new Set(started).size).toBe(names.length);
    // Neither change was halted: the bad one was superseded before it was judged, and the fix is good.
    expect(await events(kube, namespace, 'ReloadHalted')).toEqual([]);
  });

  it('a canary whose new pod runs without becoming Ready halts the change within the settle time, with a Warning naming the config; the fix then reaches every reader once', async ({
    kube,
    namespace,
  }) => {
    const names = [CANARY, 'app-1', 'app-2'];
    const f = await fleet(kube, namespace, names);
    const svc = start(namespace, await hashKeyFile(), '3s');
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    const wrote = Date.now();
    await setHealth(kube, namespace, 'bad');
    const halted = await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 30_000);
    const after = Date.now() - wrote;
    expect(halted.type).toBe('Warning');
    expect(halted.involvedObject.kind).toBe('ConfigMap');
    expect(halted.message).toMatch(
      new RegExp(
        `^change halted at wave 1: Deployment/${CANARY} its new pods were not healthy within the settle time \\(3s\\): not Ready: ${CANARY}-`,
      ),
    );
    // Debounce, gathering, the pod's start and the settle: far from the 2-minute deadline.
    expect(after).toBeLessThan(20_000);
    // The canary's reload stopped and gave back its slot; its retry is held by the halt.
    await svc.waitForLog(
      'the canary held',
      (l) =>
        l.msg === 'reload held: its change was halted by a failed wave' &&
        l.workload === `Deployment/${CANARY}`,
    );
    for (const app of names.filter((n) => n !== CANARY))
      expect({ app, replacements: f.trackers.get(app)?.newSince(f.before.get(app) ?? []).length }).toEqual({
        app,
        replacements: 0,
      });

    const fixAt = svc.logs.length;
    await setHealth(kube, namespace, 'fixed');
    await everyReaderOnce(kube, namespace, svc, names, f);
    const started = svc.logs
      .slice(fixAt)
      .filter((l) => l.msg === 'reload started')
      .map((l) => l.workload);
    expect(started[0]).toBe(`Deployment/${CANARY}`);
    expect(new Set(started).size).toBe(names.length);
  });
});
