// Black-box compatibility with Stakater Reloader (issue 37): the scenarios of Reloader's own e2e suite
// (scenarios.ts), all set up at once, each in its own namespace, against one running tool, with
// --reload-on-create=true --reload-on-delete=true as Reloader's e2e runs. One change per scenario, made
// for all at once; the outcome is judged by which pods (or Jobs) were replaced. A reload is waited for
// with a deadline; "not reloaded" waits for the tool's logged decision about that change.
// By default the tool is gitops-reloader. `npm run compat -- --peer reloader=PATH` runs the same file
// against a peer binary (COMPAT_PEER) and writes the outcomes (COMPAT_RESULTS) for the table in
// docs/migrating-from-reloader.md.
// Measured: 21 s against gitops-reloader (33 scenarios, 2 cores, alone); on main c109073, 3 of the 27
// fail (on-create, on-delete: no reload in 90 s; pause-period: reloaded at once).
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { V1Job } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminKubeConfig, clients, type Kube } from '../support/kube.ts';
import { livePods, type PodView } from '../support/observe.ts';
import { pending, waitFor } from '../support/wait-for.ts';
import { type Change, create, SCENARIOS, type Scenario } from './scenarios.ts';
import { subjectFromEnv } from './subjects.ts';
import type { Row } from './table.ts';

const kube: Kube = clients(adminKubeConfig());
const run = randomBytes(3).toString('hex');
const LABEL = 'compat.gitops-reloader.io/run';
const subject = subjectFromEnv();
const nsOf = (s: Scenario) => `c-${s.id}-${run}`;
const releaseNamespace = `c-release-${run}`;

interface Before {
  pods: PodView[];
  jobUid?: string | undefined;
}
const before = new Map<string, Before>();
const changes = new Map<string, Change & { at: number }>();
const outcomes = new Map<string, Row['observed']>();

async function jobsOf(ns: string): Promise<V1Job[]> {
  return (await kube.batch.listNamespacedJob({ namespace: ns })).items.filter(
    (j) => !j.metadata?.deletionTimestamp,
  );
}

/** The workload is up: its pods Ready (a pod workload), its Job created. */
async function waitUp(s: Scenario): Promise<Before> {
  const ns = nsOf(s);
  const { kind, name } = s.workload;
  if (kind === 'CronJob') return { pods: [] };
  if (kind === 'Job')
    return waitFor(
      async () => {
        const job = (await jobsOf(ns)).find((j) => j.metadata?.name === name);
        return job ? { pods: [], jobUid: job.metadata?.uid } : pending('no Job yet');
      },
      { describe: `Job ${ns}/${name}`, timeout: 60_000 },
    );
  return waitFor(
    async () => {
      const pods = await livePods(kube, ns, name);
      return pods.length > 0 && pods.every((p) => p.ready) ? { pods } : pending(pods);
    },
    { describe: `${kind} ${ns}/${name} Ready`, timeout: 90_000 },
  );
}

/** Whether the scenario's workload was replaced since `before`: every old pod gone, new ones Ready; a new Job. */
async function replaced(s: Scenario): Promise<boolean> {
  const ns = nsOf(s);
  const b = before.get(s.id) as Before;
  const { kind, name } = s.workload;
  if (kind === 'CronJob')
    return (await jobsOf(ns)).some((j) =>
      j.metadata?.ownerReferences?.some((o) => o.kind === 'CronJob' && o.name === name),
    );
  if (kind === 'Job') {
    const job = (await jobsOf(ns)).find((j) => j.metadata?.name === name);
    return job !== undefined && job.metadata?.uid !== b.jobUid;
  }
  const old = new Set(b.pods.map((p) => p.uid));
  const now = await livePods(kube, ns, name);
  return now.length >= b.pods.length && now.every((p) => p.ready && !old.has(p.uid));
}

/** Whether any pod or Job of the scenario's workload was touched (the negative outcome is "none"). */
async function untouched(s: Scenario): Promise<boolean> {
  const b = before.get(s.id) as Before;
  const { kind } = s.workload;
  if (kind === 'CronJob' || kind === 'Job') return !(await replaced(s));
  const now = new Set((await livePods(kube, nsOf(s), s.workload.name)).map((p) => p.uid));
  return b.pods.every((p) => now.has(p.uid));
}

beforeAll(async () => {
  await Promise.all(
    [...SCENARIOS.map(nsOf), releaseNamespace].map((name) =>
      kube.core.createNamespace({ body: { metadata: { name, labels: { [LABEL]: run } } } }),
    ),
  );
  await Promise.all(
    SCENARIOS.map(async (s) => {
      for (const o of s.objects(nsOf(s))) await create(kube, nsOf(s), o);
    }),
  );
  await Promise.all(SCENARIOS.map(async (s) => before.set(s.id, await waitUp(s))));
  await subject.start({ namespaces: SCENARIOS.map(nsOf), releaseNamespace, selector: `${LABEL}=${run}` });
  await Promise.all(
    SCENARIOS.map(async (s) => {
      const at = Date.now();
      changes.set(s.id, { ...(await s.change(kube, nsOf(s))), at });
    }),
  );
});

afterAll(async () => {
  await subject.stop();
  if (process.env.COMPAT_RESULTS) {
    const rows = SCENARIOS.map((s) => ({
      id: s.id,
      title: s.title,
      from: s.from,
      expected: s.expect,
      observed: outcomes.get(s.id) ?? 'error',
    }));
    writeFileSync(
      process.env.COMPAT_RESULTS,
      `${JSON.stringify({ subject: subject.name, rows }, null, 2)}\n`,
    );
  }
  await Promise.all(
    [...SCENARIOS.map(nsOf), releaseNamespace].map((name) =>
      kube.core.deleteNamespace({ name }).catch(() => undefined),
    ),
  );
});

// Reloads first: a tool that logs no decisions judges "not reloaded" after the reloads were seen.
const ordered = [...SCENARIOS].sort((a, b) => (a.expect === b.expect ? 0 : a.expect === 'reload' ? -1 : 1));

describe(`Reloader's e2e scenarios, as behaviour, against ${subject.name}`, () => {
  it.each(ordered.map((s) => [s.id, s] as const))('%s', async (_id, s) => {
    const workload = `${s.workload.kind}/${nsOf(s)}/${s.workload.name}`;
    try {
      if (s.expect === 'reload') {
        await waitFor(async () => ((await replaced(s)) ? true : pending('not yet replaced')), {
          describe: `${s.title} (${workload})`,
          timeout: 90_000,
        });
        outcomes.set(s.id, 'reloaded');
        if (s.notBeforeMs !== undefined) {
          // Creation times are whole seconds: a second of slack.
          const from = (changes.get(s.id)?.at ?? 0) + s.notBeforeMs - 1_000;
          const pods = await livePods(kube, nsOf(s), s.workload.name);
          const early = pods.filter((p) => p.createdAt < from);
          if (early.length > 0) outcomes.set(s.id, 'reloaded too early');
          expect(early, `${s.title}: pods created before the period ended`).toEqual([]);
        }
      } else {
        await subject.decidedNoReload(changes.get(s.id) as Change, workload);
        outcomes.set(s.id, (await untouched(s)) ? 'not reloaded' : 'reloaded');
        expect(outcomes.get(s.id), s.title).toBe('not reloaded');
      }
    } catch (err) {
      if (!outcomes.has(s.id))
        outcomes.set(s.id, (await untouched(s).catch(() => true)) ? 'not reloaded' : 'reloaded');
      throw err;
    }
  });
});
