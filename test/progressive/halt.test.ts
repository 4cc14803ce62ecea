// Progressive reloads on the real control plane (docs/progressive-reloads.md): 30 Deployments read one
// ConfigMap, whose pods, as an app that reads its config at start, never become Ready while the
// ConfigMap is bad (a MutatingAdmissionPolicy and a kwok stage, test/support/app-health.ts). A bad
// change touches the first wave only and is halted; the halt survives a leader change; the fixing
// change reloads every workload exactly once, and a revert to what the pods run restarts nothing.
// Observed as a user would: pods, Events, logs.
import { afterEach, describe, expect, inject, onTestFinished } from 'vitest';
import type { ReloadStatus } from '../../service/engine/status.ts';
import { renderedDom } from '../support/browser.ts';
import { it, type Kube } from '../support/kube.ts';
import {
  events,
  livePods,
  PodTracker,
  type PodView,
  surgePods,
  waitAllReplaced,
  waitForEvent,
  waitReadyPods,
} from '../support/observe.ts';
import { progressiveFleet, READS, setHealth, sharedHealth } from '../support/progressive-fleet.ts';
import { FAST_LEASE } from '../support/replicas.ts';
import {
  hashKeyFile,
  killAll,
  type RunningService,
  runCli,
  serviceArgs,
  startService,
} from '../support/service.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { deployment } from '../support/workloads.ts';

afterEach(killAll);

const N = 30;
const REPLICAS = 2;
/** Not the first by name: the priority, not the order of names, makes it the first wave. */
const CANARY = 'app-17';
const apps = Array.from({ length: N }, (_, i) => `app-${String(i).padStart(2, '0')}`);

function start(namespace: string, key: string): RunningService {
  return startService(
    serviceArgs(namespace, key, [
      '--debounce=500ms',
      '--progressive-reloads',
      '--progressive-gather=2s',
      '--progressive-settle=3s',
      // A replacement that never becomes Ready stops the restart at maxUnavailable 0: no progress.
      '--reload-deadline=5s',
      ...FAST_LEASE,
    ]),
  );
}

/** Waits until no surge pod is left in the namespace. */
async function noSurgeLeft(kube: Kube, namespace: string, what: string) {
  await waitFor(
    async () => {
      const left = await surgePods(kube, namespace);
      return left.length === 0 ? left : pending(left.map((p) => p.metadata?.name));
    },
    { describe: what, timeout: 30_000 },
  );
}

/** Each app's live pods, by app. */
async function podsByApp(kube: Kube, namespace: string, names: string[]): Promise<Map<string, PodView[]>> {
  const out = new Map<string, PodView[]>();
  for (const app of names) out.set(app, await livePods(kube, namespace, app));
  return out;
}

/** Every app's pods are exactly `before`'s, all Ready. */
async function untouched(kube: Kube, namespace: string, before: Map<string, PodView[]>) {
  const names = [...before.keys()];
  const now = await podsByApp(kube, namespace, names);
  for (const app of names) {
    const pods = now.get(app) ?? [];
    expect({ app, uids: pods.map((p) => p.uid).sort(), ready: pods.every((p) => p.ready) }).toEqual({
      app,
      uids: (before.get(app) ?? []).map((p) => p.uid).sort(),
      ready: true,
    });
  }
}

/** The fleet of `names`, the canary among them first by priority. */
const fleet = (kube: Kube, namespace: string, names: string[]) =>
  progressiveFleet(kube, namespace, names, { canary: CANARY, replicas: REPLICAS });

describe('progressive reloads', () => {
  it('a bad shared config stops at the first wave, stays halted across a leader change, and the fix reloads every workload once', async ({
    kube,
    namespace,
  }) => {
    const { before, trackers } = await fleet(kube, namespace, apps);
    const key = await hashKeyFile();
    let svc = start(namespace, key);
    await svc.waitForLog('ready', (l) => l.msg === 'ready');

    // The bad change: only the canary is touched, and the change is halted.
    await setHealth(kube, namespace, 'bad');
    const halted = await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 90_000);
    expect(halted.type).toBe('Warning');
    expect(halted.involvedObject.kind).toBe('ConfigMap');
    expect(halted.message).toMatch(
      new RegExp(
        // Its surge pod runs without becoming Ready: judged within the settle time, or at the deadline.
        `^change halted at wave 1: Deployment/${CANARY} its (new pods were not healthy within the settle time|reload made no progress for --reload-deadline)`,
      ),
    );
    expect(halted.message).toMatch(/29 workload\(s\) held/);
    // The canary's retry came back and was held too, not run.
    await svc.waitForLog(
      'the canary held',
      (l) =>
        l.msg === 'reload held: its change was halted by a failed wave' &&
        l.workload === `Deployment/${CANARY}`,
      30_000,
    );
    // Its surge pod, which never became Ready, is removed; its old pods stay, Ready.
    await noSurgeLeft(kube, namespace, 'no surge pod left');
    await untouched(kube, namespace, before);
    const canarySurge = trackers.get(CANARY)?.surgePods() ?? [];
    expect(canarySurge.length).toBeGreaterThan(0); // it was the first wave: it was touched
    for (const app of apps.filter((a) => a !== CANARY)) {
      expect({ app, seen: trackers.get(app)?.seen.size }).toEqual({ app, seen: REPLICAS });
    }
    const held = await events(kube, namespace, 'ReloadHalted');
    expect(
      held
        .filter((e) => e.message?.startsWith('held:'))
        .map((e) => e.involvedObject.name)
        .sort(),
    ).toEqual(apps.filter((a) => a !== CANARY));

    // A leader change (a crash, and a new process): the halt is restored from the ledger, and the
    // reloads the new term finds are all held.
    await svc.kill();
    svc = start(namespace, key);
    await svc.waitForLog(
      'halt restored',
      (l) =>
        l.msg === 'progressive reload halt restored from the ledger: nothing more starts for this change',
      60_000,
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await waitFor(
      async () => {
        const heldNow = new Set(
          svc.logs
            .filter((l) => l.msg === 'reload held: its change was halted by a failed wave')
            .map((l) => l.workload),
        );
        return heldNow.size === N ? heldNow : pending(heldNow.size);
      },
      { describe: `all ${N} reloads held by the restored halt`, timeout: 60_000 },
    );
    await untouched(kube, namespace, before);
    // Held by the restored halt, not halted again: the new term started no reload, not even the canary's.
    expect(svc.logs.filter((l) => l.msg === 'reload started')).toEqual([]);
    expect(trackers.get(CANARY)?.surgePods().length).toBe(canarySurge.length);

    // The fix, new content: a newer change supersedes the halt; every workload reloads exactly once.
    await setHealth(kube, namespace, 'fixed');
    for (const app of apps) await waitAllReplaced(kube, namespace, app, before.get(app) ?? [], REPLICAS);
    await waitFor(
      async () => {
        const done = new Set(
          svc.logs.filter((l) => l.msg === 'reload complete').map((l) => l.workload as string),
        );
        return done.size === N ? done : pending(done.size);
      },
      { describe: `${N} reloads complete`, timeout: 120_000 },
    );
    await noSurgeLeft(kube, namespace, 'no surge pod left after the fix');
    for (const app of apps) {
      // I3: each old pod was replaced once, by a pod that saw the fix (Ready).
      const fresh = trackers.get(app)?.newSince(before.get(app) ?? []) ?? [];
      expect({ app, replacements: fresh.length }).toEqual({ app, replacements: REPLICAS });
      expect(await events(kube, namespace, 'Reloaded', app)).toHaveLength(1);
    }
    // The canary went first again: the fix started from the first wave.
    const started = svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload);
    expect(started[0]).toBe(`Deployment/${CANARY}`);
    expect(new Set(started).size).toBe(N);
  });

  it('a revert to the content the pods run lifts the halt and restarts nothing', async ({
    kube,
    namespace,
  }) => {
    const names = apps.slice(0, 6).concat(CANARY);
    const { before, trackers } = await fleet(kube, namespace, names);
    const svc = start(namespace, await hashKeyFile());
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await setHealth(kube, namespace, 'bad');
    await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 90_000);
    // What anyone with a port-forward reads: the halt, and every other workload held by it.
    const url = `${(await svc.waitForLog('status url', (l) => l.msg === 'status listening')).url}/status`;
    const status = (await (await fetch(url)).json()) as ReloadStatus;
    expect(status.halted).toEqual([
      expect.objectContaining({
        config: `ConfigMap/${namespace}/shared`,
        wave: 1,
        workload: `Deployment/${namespace}/${CANARY}`,
      }),
    ]);
    // The pods that failed: the canary's replacements that never became Ready.
    const failed = status.halted[0]?.pods ?? [];
    expect(failed.length).toBeGreaterThan(0);
    for (const pod of failed) expect(pod.startsWith(`${CANARY}-`)).toBe(true);
    expect(
      status.waiting
        .filter((w) => w.why === 'halt')
        .map((w) => w.workload)
        .sort(),
    ).toEqual(
      names
        .filter((n) => n !== CANARY)
        .map((n) => `Deployment/${namespace}/${n}`)
        .sort(),
    );
    const cli = await runCli(['status', `--url=${url}`]);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain(`halted (1)\n  ConfigMap/${namespace}/shared at wave 1`);
    // The page on the same data, as a real browser renders it (its script fills the tables).
    const dom = await renderedDom(url.replace(/status$/, ''));
    expect(dom).toContain('data-loaded="true"');
    const table = (id: string) =>
      dom.slice(
        dom.indexOf(`<table id="${id}">`),
        dom.indexOf('</table>', dom.indexOf(`<table id="${id}">`)),
      );
    expect(table('halted')).toContain(
      `<td>ConfigMap/${namespace}/shared</td><td>1</td><td>Deployment/${namespace}/${CANARY}</td>`,
    );
    expect(table('halted')).toContain(`<td>${failed.join(', ')}</td>`);
    for (const n of names.filter((x) => x !== CANARY))
      expect(table('waiting')).toContain(`<td>Deployment/${namespace}/${n}</td><td>halt</td>`);
    await setHealth(kube, namespace, 'good');
    await svc.waitForLog(
      'halt lifted',
      (l) => l.msg === 'progressive reload halt lifted: the config changed since',
    );
    // Every workload's batch for the revert is judged: nothing is needed.
    await waitFor(
      async () => {
        const judged = new Set(svc.logs.filter((l) => l.msg === 'no reload needed').map((l) => l.workload));
        return judged.size === names.length ? judged : pending(judged.size);
      },
      { describe: 'every workload judged after the revert', timeout: 30_000 },
    );
    // The canary's retry, planned for the bad content, comes and does not run.
    await svc.waitForLog(
      'the retry not run',
      (l) =>
        l.msg === 'reload not run: the config changed since it was planned' &&
        l.workload === `Deployment/${CANARY}`,
      30_000,
    );
    await noSurgeLeft(kube, namespace, 'no surge pod left');
    await untouched(kube, namespace, before);
    for (const app of names)
      expect({ app, replacements: trackers.get(app)?.newSince(before.get(app) ?? []).length }).toEqual({
        app,
        replacements: 0,
      });
    expect(svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload)).toEqual([
      `Deployment/${CANARY}`,
    ]);
  });

  it("gitops-reloader resume continues a halted change, with the caller's own credentials", async ({
    kube,
    namespace,
  }) => {
    const names = apps.slice(0, 2).concat(CANARY);
    await fleet(kube, namespace, names);
    const svc = start(namespace, await hashKeyFile());
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await setHealth(kube, namespace, 'bad');
    await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 90_000);
    const canaryStarts = () =>
      svc.logs.filter((l) => l.msg === 'reload started' && l.workload === `Deployment/${CANARY}`).length;
    const startsBefore = canaryStarts();
    // A name that is not a config, or a path, is refused before anything is sent.
    const bad = await runCli([
      'resume',
      `configmap/../${namespace}/shared`,
      `--kubeconfig=${inject('kubeconfig')}`,
    ]);
    expect({ code: bad.code, stderr: bad.stderr }).toEqual({
      code: 2,
      stderr: expect.stringContaining('expected configmap/NAMESPACE/NAME'),
    });
    const missing = await runCli([
      'resume',
      `configmap/${namespace}/nope`,
      `--kubeconfig=${inject('kubeconfig')}`,
    ]);
    expect({ code: missing.code, stderr: missing.stderr }).toEqual({
      code: 1,
      stderr: expect.stringContaining(`ConfigMap ${namespace}/nope: it does not exist`),
    });
    const cli = await runCli([
      'resume',
      `configmap/${namespace}/shared`,
      `--kubeconfig=${inject('kubeconfig')}`,
    ]);
    expect(cli.code).toBe(0);
    expect(cli.stdout).toContain(`ConfigMap ${namespace}/shared: gitops-reloader.io/progressive-resume=`);
    const resumed = await waitForEvent(kube, namespace, 'ReloadResumed', 'shared', 30_000);
    expect(resumed.message).toMatch(/^the halted change \(wave 1, /);
    // The change goes on from the workload that failed it: the canary's reload starts again.
    await waitFor(async () => (canaryStarts() > startsBefore ? true : pending(canaryStarts())), {
      describe: 'the canary reloads again after the resume',
      timeout: 30_000,
    });
    // It alone: the next workloads in line stay held (the canary's retry, backing off at the resume,
    // took back its own place).
    expect(svc.logs.filter((l) => l.msg === 'reload started').map((l) => l.workload)).toEqual([
      `Deployment/${CANARY}`,
      `Deployment/${CANARY}`,
    ]);
  });

  it('one workload alone: its restart stops at its first replacement, not at its availability floor', async ({
    kube,
    namespace,
  }) => {
    await sharedHealth(kube, namespace);
    // 8 replicas with 25% / 25%: a restart may surge 2 and evict 2 at once.
    await kube.apps.createNamespacedDeployment({
      namespace,
      body: deployment('solo', {
        replicas: 8,
        labels: { [READS.key]: READS.value },
        annotations: { 'reloader.stakater.com/auto': 'true' },
        container: { envFrom: [{ configMapRef: { name: 'shared' } }] },
      }),
    });
    const before = await waitReadyPods(kube, namespace, 'solo', 8);
    const tracker = await PodTracker.start(kube, namespace, 'solo');
    onTestFinished(() => tracker.stop());
    const svc = start(namespace, await hashKeyFile());
    await svc.waitForLog('ready', (l) => l.msg === 'ready');
    await setHealth(kube, namespace, 'bad');
    const halted = await waitForEvent(kube, namespace, 'ReloadHalted', 'shared', 90_000);
    expect(halted.message).toMatch(
      /^change halted at wave 1: Deployment\/solo its (new pods were not healthy within|reload made no progress) .*not Ready/,
    );
    await noSurgeLeft(kube, namespace, 'its surge pod removed');
    // One replacement was tried, and no old pod was evicted: all 8 serve, Ready.
    expect(tracker.surgePods()).toHaveLength(1);
    expect(tracker.newSince(before)).toEqual([]);
    await untouched(kube, namespace, new Map([['solo', before]]));
  });
});
