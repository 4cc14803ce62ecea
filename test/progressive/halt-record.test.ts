// A halt has a record of its own, keyed by the change (issue 34, Build 6; docs/adr/0042), on the real
// control plane, each case across a restart of the service. A halt kept on the failing workload's
// ledger entry was dropped by any rewrite of that entry, and a reload carrying two configs' changes
// recorded one: after a restart the bad change started again from its first wave and reached the
// next workload. Here the bad change reaches no further workload after the restart, and a newer
// content of the config still reaches every reader once. Seen failing on main (`9776c26`): both cases
// reloaded a further reader with the bad content after the restart. Measured alone: 35-39 s (19-21 s
// and 16-18 s: the bad change, its halt, a restart, and the fix's waves over 3 or 4 workloads).
import { afterEach, describe, expect } from 'vitest';
import { expectHeld } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, waitAllReplaced, waitForEvent } from '../support/observe.ts';
import { type Fleet, progressiveFleet, setConfig, setHealth } from '../support/progressive-fleet.ts';
import { FAST_LEASE } from '../support/replicas.ts';
import { hashKeyFile, killAll, type RunningService, serviceArgs, startService } from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';

afterEach(killAll);

const CANARY = 'canary';

function start(namespace: string, key: string): RunningService {
  return startService(
    serviceArgs(namespace, key, [
      '--debounce=500ms',
      '--progressive-gather=2s',
      '--progressive-settle=2s',
      '--reload-deadline=3s',
      ...FAST_LEASE,
    ]),
  );
}

/** Kills the service (a crash) and starts a new one on the same ledger; waits until it is ready. */
async function restart(svc: RunningService, namespace: string, key: string): Promise<RunningService> {
  await svc.kill();
  const next = start(namespace, key);
  await next.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
  return next;
}

/**
 * After the restart: each of `held` is held by the restored halt (its decision logged, its status
 * `halt`), and no reload started in this term.
 */
async function heldAfterRestart(svc: RunningService, namespace: string, held: string[]) {
  for (const app of held) {
    await svc.waitForLog(
      `${app} held by the restored halt`,
      (l) =>
        (l.msg === 'reload held: its change was halted by a failed wave' &&
          l.workload === `Deployment/${app}`) ||
        // What main did instead: the bad change started again, at this workload.
        (l.msg === 'reload started' && l.workload === `Deployment/${app}`),
    );
    await expectHeld(svc, `Deployment/${namespace}/${app}`, 'halt');
  }
  expect(svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload)).toEqual([]);
}

/** After a good change: every app replaced once, by Ready pods, one Reloaded Event each. */
async function everyReaderOnce(kube: Kube, namespace: string, apps: string[], f: Fleet) {
  for (const app of apps) await waitAllReplaced(kube, namespace, app, f.before.get(app) ?? [], 1);
  await waitFor(
    async () => {
      const reloaded = (await events(kube, namespace, 'Reloaded')).map((e) => e.involvedObject.name);
      return apps.every((a) => reloaded.includes(a)) ? reloaded : pending(reloaded);
    },
    { describe: 'a Reloaded Event on every reader', timeout: 30_000 },
  );
  for (const app of apps)
    expect({ app, reloaded: (await events(kube, namespace, 'Reloaded', app)).length }).toEqual({
      app,
      reloaded: 1,
    });
}

describe('a halt has a record of its own, keyed by the change', () => {
  it('the canary’s entry rewritten by a change of its other config after the halt: across a restart the halted change reaches no further workload; the fix reaches every reader', async ({
    kube,
    namespace,
  }) => {
    // A StatefulSet canary: its restart completes at its eviction, so its entry records the bad
    // content, and the halt comes when its new pod does not become Ready in the settle.
    const f = await progressiveFleet(
      kube,
      namespace,
      [{ name: CANARY, kind: 'StatefulSet', configs: ['shared', 'own'] }, 'app-1', 'app-2'],
      { canary: CANARY, replicas: 1, configs: { own: { v: '1' } } },
    );
    const key = await hashKeyFile();
    let svc = start(namespace, key);
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await setHealth(kube, namespace, 'bad');
    const halted = await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 30_000);
    expect(halted.message).toMatch(new RegExp(`^change halted at wave 1: StatefulSet/${CANARY} `));

    // A change of the canary's other config: its reload rewrites the canary's ledger entry.
    const completes = () =>
      svc.logs.filter((l) => l.msg === 'reload complete' && l.workload === `StatefulSet/${CANARY}`).length;
    const before = completes();
    await setConfig(kube, namespace, 'own', { v: '2' });
    await waitFor(async () => (completes() > before ? true : pending(completes())), {
      describe: 'the canary’s reload for its other config complete',
      timeout: 30_000,
    });

    svc = await restart(svc, namespace, key);
    await heldAfterRestart(svc, namespace, ['app-1', 'app-2']);

    // A newer content of the config ends the halt and reaches every reader once.
    await setHealth(kube, namespace, 'fixed');
    await everyReaderOnce(kube, namespace, ['app-1', 'app-2'], f);
    await waitAllReplaced(kube, namespace, CANARY, [], 1);
  });

  it('a reload carrying two configs’ changes, halted: across a restart (the canary deleted meanwhile) neither change reaches a further workload; newer contents reach every reader', async ({
    kube,
    namespace,
  }) => {
    // Each config has a reader of its own: whichever change a single record kept, the other's reader
    // would be reloaded after the restart.
    const readers = ['app-1', 'only-extra', 'only-shared'];
    const f = await progressiveFleet(
      kube,
      namespace,
      [
        { name: CANARY, configs: ['shared', 'extra'] },
        { name: 'app-1', configs: ['shared', 'extra'] },
        { name: 'only-extra', configs: ['extra'] },
        { name: 'only-shared', configs: ['shared'] },
      ],
      { canary: CANARY, replicas: 1, configs: { extra: { v: '1' } } },
    );
    const key = await hashKeyFile();
    let svc = start(namespace, key);
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    // Both written within the debounce: one reload of each reader carries both changes.
    await setConfig(kube, namespace, 'extra', { v: '2' });
    await setHealth(kube, namespace, 'bad');
    const started = await svc.waitForLog('the canary’s reload', (l) => l.msg === 'reload started');
    expect({ workload: started.workload, configs: started.configs }).toEqual({
      workload: `Deployment/${CANARY}`,
      configs: ['ConfigMap/extra', 'ConfigMap/shared'],
    });
    await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 30_000);
    await waitForEvent(kube, namespace, 'ReloadHalted', 'extra', 30_000);
    // The canary is deleted after the halt: the record does not live on its entry.
    await kube.apps.deleteNamespacedDeployment({ name: CANARY, namespace });

    svc = await restart(svc, namespace, key);
    await heldAfterRestart(svc, namespace, readers);

    await setConfig(kube, namespace, 'extra', { v: '3' });
    await setHealth(kube, namespace, 'fixed');
    await everyReaderOnce(kube, namespace, readers, f);
  });
});
