// Runs the execution-level simulation (test/sim/exec-sim.ts) over many seeds. SIM_EXEC_SCHEDULES=n
// runs more; SIM_SEED=s replays one seed (SIM_LOG=1 adds the service's log lines to the trace). A
// failure prints the replay command and a shortened schedule.
import { describe, expect, it } from 'vitest';
import {
  type ExecSchedule,
  randomExecSchedule,
  shrinkExec,
  simulateExec,
  withProgressiveSteps,
} from './exec-sim.ts';

const replay = process.env.SIM_SEED ? [Number(process.env.SIM_SEED)] : undefined;
const count = Number(process.env.SIM_EXEC_SCHEDULES ?? 2000);
const first = Number(process.env.SIM_FIRST_SEED ?? 1);
// 1,000 by default since the progressive schedules carry bad contents and more readers (issue 34):
// each costs about twice a plain one; 2,000 passed when they were added (README).
const progressiveCount = Number(process.env.SIM_EXEC_PROGRESSIVE_SCHEDULES ?? 1000);

/** Shortened schedules of defects the simulation found; each failed before its fix (README). */
const found: Record<string, ExecSchedule> = {
  "a good change blamed at a canary whose own rollout, begun after its admission, stuck on another change's bad content (progressive seed 1371, issue 34)":
    {
      seed: 1371,
      configs: ['cm0', 'cm1'],
      deployments: [
        { name: 'web0', replicas: 1, maxSurge: 0, maxUnavailable: 1, graceMs: 610, uses: ['cm1'] },
        { name: 'web1', replicas: 4, maxSurge: 1, maxUnavailable: 1, graceMs: 10126, uses: ['cm0', 'cm1'] },
        { name: 'web2', replicas: 2, maxSurge: '50%', maxUnavailable: 1, graceMs: 1000, uses: ['cm0'] },
        { name: 'web3', replicas: 2, maxSurge: 1, maxUnavailable: 0, graceMs: 1760, uses: ['cm0'] },
        { name: 'web4', replicas: 1, maxSurge: 1, maxUnavailable: 1, graceMs: 1313, uses: ['cm0'] },
      ],
      steps: [
        { at: 5712, kind: 'config', config: 'cm1', bad: true },
        { at: 12347, kind: 'config', config: 'cm0' },
        { at: 19318, kind: 'template', deployment: 'web0' },
      ],
      p500: 0.10202009462518617,
      p429: 0.09628409704891965,
      p409: 0.03275725721614436,
      pHang: 0.01648198497714475,
      maxLagMs: 300,
      faultsUntil: 64416,
      progressive: true,
    } as ExecSchedule,
  'a fix halted by the bad surge pod its superseded reload could not remove (progressive seed 8, issue 34)': {
    seed: 8,
    configs: ['cm0'],
    deployments: [
      {
        name: 'web0',
        replicas: 2,
        maxSurge: 1,
        maxUnavailable: '50%',
        pdbMinAvailable: 1,
        graceMs: 320,
        uses: ['cm0'],
      },
      { name: 'web1', replicas: 3, maxSurge: 0, maxUnavailable: 0, graceMs: 381, uses: ['cm0'] },
      { name: 'web2', replicas: 1, maxSurge: '50%', maxUnavailable: 1, graceMs: 1795, uses: ['cm0'] },
      { name: 'web3', replicas: 1, maxSurge: '50%', maxUnavailable: 0, graceMs: 2109, uses: ['cm0'] },
    ],
    steps: [
      { at: 196, kind: 'config', config: 'cm0' },
      { at: 4066, kind: 'config', config: 'cm0', bad: true },
      { at: 40915, kind: 'config', config: 'cm0' },
    ],
    p500: 0.07506205349927768,
    p429: 0.048152697575278576,
    p409: 0.025927811244037004,
    pHang: 0.006231557321734727,
    maxLagMs: 300,
    faultsUntil: 60915,
    progressive: true,
    stayBroken: ['web0'],
  } as ExecSchedule,
  'a halted change going on to reach a workload whose reload of it began before the halt (progressive seed 1416, issue 34)':
    {
      seed: 1416,
      configs: ['cm0', 'cm1'],
      deployments: [
        { name: 'web0', replicas: 4, maxSurge: 1, maxUnavailable: 1, graceMs: 448, uses: ['cm0', 'cm1'] },
        {
          kind: 'StatefulSet',
          name: 'web1',
          replicas: 2,
          maxSurge: 0,
          maxUnavailable: '25%',
          graceMs: 11714,
          uses: ['cm1'],
        },
        { name: 'web2', replicas: 1, maxSurge: '50%', maxUnavailable: 0, graceMs: 473, uses: ['cm0'] },
      ],
      steps: [
        { at: 853, kind: 'config', config: 'cm1' },
        { at: 20903, kind: 'config', config: 'cm1', bad: true },
        { at: 25164, kind: 'drop', compact: true },
        { at: 26932, kind: 'drop', compact: true },
        { at: 61125, kind: 'config', config: 'cm0' },
      ],
      p500: 0.06472353563876822,
      p429: 0.08227615712676196,
      p409: 0.04237410012865439,
      pHang: 0.0367842510342598,
      maxLagMs: 300,
      faultsUntil: 81125,
      progressive: true,
      refuseSurge: 'web2',
    } as ExecSchedule,
  "a good change waiting for ever for a canary whose settling pods another change's reload replaced (progressive seed 392, issue 34)":
    {
      seed: 392,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          name: 'web0',
          replicas: 1,
          maxSurge: '50%',
          maxUnavailable: '25%',
          graceMs: 207,
          uses: ['cm0', 'cm1'],
        },
        { name: 'web1', replicas: 2, maxSurge: 1, maxUnavailable: 0, graceMs: 1403, uses: ['cm0'] },
      ],
      steps: [
        { at: 2856, kind: 'config', config: 'cm0' },
        { at: 6665, kind: 'config', config: 'cm1', bad: true },
      ],
      p500: 0.049814296793192624,
      p429: 0.10750246573006735,
      p409: 0.027288903517182918,
      pHang: 0.003457422507926822,
      maxLagMs: 300,
      faultsUntil: 26665,
      progressive: true,
      stayBroken: ['web0'],
    } as ExecSchedule,
  "a bad change excused at a canary whose pods the engine's own cut reload left unhealthy, and the good one blamed (progressive seed 1097, issue 34)":
    {
      seed: 1097,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          kind: 'StatefulSet',
          name: 'web0',
          replicas: 3,
          maxSurge: '25%',
          maxUnavailable: 1,
          graceMs: 9689,
          uses: ['cm0', 'cm1'],
        },
        { name: 'web1', replicas: 2, maxSurge: 1, maxUnavailable: 1, graceMs: 2131, uses: ['cm0'] },
        { name: 'web2', replicas: 2, maxSurge: '50%', maxUnavailable: 1, graceMs: 674, uses: ['cm0'] },
      ],
      steps: [
        { at: 18042, kind: 'config', config: 'cm0' },
        { at: 21766, kind: 'config', config: 'cm1', bad: true },
      ],
      p500: 0.08290285107214003,
      p429: 0.0053256247309036555,
      p409: 0.030570396105758846,
      pHang: 0.04484270286047831,
      maxLagMs: 300,
      faultsUntil: 41766,
      progressive: true,
    } as ExecSchedule,
  "a canary failing fast, parked behind another change's wave, holding the first change's wave for ever (progressive seed 999, issue 34)":
    {
      seed: 999,
      configs: ['cm0', 'cm1'],
      deployments: [
        { name: 'web0', replicas: 2, maxSurge: 0, maxUnavailable: '25%', graceMs: 13882, uses: ['cm1'] },
        { name: 'web1', replicas: 1, maxSurge: 0, maxUnavailable: 1, graceMs: 6244, uses: ['cm0', 'cm1'] },
        { name: 'web2', replicas: 1, maxSurge: '50%', maxUnavailable: 1, graceMs: 205, uses: ['cm0'] },
      ],
      steps: [
        { at: 50646, kind: 'config', config: 'cm0' },
        { at: 81169, kind: 'config', config: 'cm1', bad: true },
      ],
      p500: 0.13680341702420265,
      p429: 0.11929307396057992,
      p409: 0.022448713798075916,
      pHang: 0.038547515170648694,
      maxLagMs: 300,
      faultsUntil: 121862,
      progressive: true,
      refuseSurge: 'web1',
      stayBroken: ['web1'],
    } as ExecSchedule,
  'a good change blamed for the pods a bad change of another config gave its running reload (progressive seed 1025, issue 34)':
    {
      seed: 1025,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          name: 'web0',
          replicas: 2,
          maxSurge: '25%',
          maxUnavailable: 0,
          graceMs: 1941,
          uses: ['cm0', 'cm1'],
        },
        {
          kind: 'StatefulSet',
          name: 'web1',
          replicas: 1,
          maxSurge: '25%',
          maxUnavailable: '25%',
          graceMs: 1744,
          uses: ['cm1'],
        },
        { name: 'web2', replicas: 1, maxSurge: 1, maxUnavailable: 0, graceMs: 1686, uses: ['cm0'] },
      ],
      steps: [
        { at: 929, kind: 'template', deployment: 'web0' },
        { at: 5251, kind: 'config', config: 'cm0' },
        { at: 10066, kind: 'config', config: 'cm1', bad: true },
        { at: 45153, kind: 'drop', compact: false },
        { at: 45299, kind: 'partition', ms: 8867, noticeMs: 6600 },
      ],
      p500: 0.050654608430340885,
      p429: 0.14921141881495714,
      p409: 0.04091406876686961,
      pHang: 0.004774654842913151,
      maxLagMs: 300,
      faultsUntil: 65299,
      progressive: true,
      stayBroken: ['web1'],
    } as ExecSchedule,
  'an older change never passing its settle once a newer reload of the workload was not judged (seed 421, issue 34)':
    {
      seed: 421,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          name: 'web0',
          replicas: 1,
          maxSurge: 1,
          maxUnavailable: '25%',
          graceMs: 2051,
          uses: ['cm0', 'cm1'],
        },
        {
          name: 'web1',
          replicas: 4,
          maxSurge: '50%',
          maxUnavailable: '50%',
          pdbMinAvailable: 3,
          graceMs: 27847,
          uses: ['cm0', 'cm1'],
        },
      ],
      steps: [
        { at: 34001, kind: 'partition', ms: 43409, noticeMs: 6795 },
        { at: 37934, kind: 'config', config: 'cm1' },
        { at: 39707, kind: 'config', config: 'cm1' },
        { at: 65322, kind: 'config', config: 'cm1' },
        { at: 82945, kind: 'config', config: 'cm0' },
        { at: 87161, kind: 'template', deployment: 'web0' },
        { at: 88649, kind: 'config', config: 'cm1' },
      ],
      p500: 0.1016979276551865,
      p429: 0.02996846563182771,
      p409: 0.016124138631857934,
      pHang: 0.04206906905164942,
      maxLagMs: 300,
      faultsUntil: 108649,
      progressive: true,
    },
  'an eviction of a pod seen not Ready, Ready by then, under the floor (seed 270)': {
    seed: 270,
    configs: ['cm0', 'cm1'],
    deployments: [
      {
        kind: 'StatefulSet',
        name: 'web0',
        replicas: 4,
        maxSurge: '25%',
        maxUnavailable: 1,
        graceMs: 22821,
        uses: ['cm0', 'cm1'],
      },
    ],
    steps: [{ at: 406, kind: 'config', config: 'cm1' }],
    p500: 0.12221524383639916,
    p429: 0.06453390649985521,
    pHang: 0.04002116927877069,
    maxLagMs: 3000,
    faultsUntil: 47391,
  },
  'a new leader replacing the pods of a template rollout made after the change (seed 115)': {
    seed: 115,
    configs: ['cm0'],
    deployments: [
      {
        name: 'web0',
        replicas: 4,
        maxSurge: '25%',
        maxUnavailable: '25%',
        pdbMinAvailable: 3,
        graceMs: 1799,
        uses: ['cm0'],
      },
      { name: 'web1', replicas: 4, maxSurge: '25%', maxUnavailable: '25%', graceMs: 1220, uses: ['cm0'] },
    ],
    steps: [
      { at: 33151, kind: 'config', config: 'cm0' },
      { at: 66889, kind: 'config', config: 'cm0' },
      { at: 67943, kind: 'template', deployment: 'web0' },
      { at: 68670, kind: 'partition', ms: 20856, noticeMs: 4089 },
    ],
    p500: 0.09982240595854819,
    p429: 0.07215556997107342,
    pHang: 0.04424574822187424,
    maxLagMs: 300,
    faultsUntil: 92603,
  },
  'a change seen during a slow start-up, replayed with a later cutoff (seed 895)': {
    seed: 895,
    configs: ['cm0'],
    deployments: [
      {
        name: 'web0',
        replicas: 3,
        maxSurge: 0,
        maxUnavailable: 0,
        pdbMinAvailable: 2,
        graceMs: 23070,
        uses: ['cm0'],
      },
    ],
    steps: [
      { at: 344, kind: 'template', deployment: 'web0' },
      { at: 498, kind: 'config', config: 'cm0' },
    ],
    p500: 0.0858572366181761,
    p429: 0.10135693056508899,
    pHang: 0.047878719633445144,
    maxLagMs: 300,
    faultsUntil: 23730,
  },
  // With --progressive-reloads: seeds it found when the suite first ran with it (their schedules,
  // shortened). An older change's settle timer judged a newer change's reload mid-way (28); a template
  // rollout's pods were judged as the config's (73); a StatefulSet's pod still starting after its
  // reload completed at its last eviction was judged not Ready (104). Each halted a good change.
  "with --progressive-reloads, an older change's settle judging a newer reload (seed 28)": {
    progressive: true,
    ...({
      seed: 28,
      configs: ['cm0'],
      deployments: [
        {
          kind: 'StatefulSet',
          name: 'web0',
          replicas: 3,
          maxSurge: 1,
          maxUnavailable: 1,
          pdbMinAvailable: 2,
          graceMs: 1068,
          uses: ['cm0'],
        },
        {
          kind: 'StatefulSet',
          name: 'web1',
          replicas: 4,
          maxSurge: 1,
          maxUnavailable: '50%',
          graceMs: 10495,
          uses: ['cm0'],
        },
      ],
      steps: [
        { at: 1670, kind: 'config', config: 'cm0' },
        { at: 11598, kind: 'config', config: 'cm0' },
      ],
      p500: 0.10569215227151289,
      p429: 0.008245258103124797,
      p409: 0.04515304131200537,
      pHang: 0.040219107631128286,
      maxLagMs: 300,
      faultsUntil: 34636,
    } as ExecSchedule),
  },
  'with --progressive-reloads, a template rollout judged as the config (seed 73)': {
    progressive: true,
    ...({
      seed: 73,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          kind: 'StatefulSet',
          name: 'web0',
          replicas: 4,
          maxSurge: 0,
          maxUnavailable: 0,
          graceMs: 449,
          uses: ['cm0'],
        },
        {
          name: 'web1',
          replicas: 3,
          maxSurge: 1,
          maxUnavailable: 0,
          pdbMinAvailable: 2,
          graceMs: 9274,
          uses: ['cm0', 'cm1'],
        },
      ],
      steps: [
        { at: 6604, kind: 'partition', ms: 25856, noticeMs: 15297 },
        { at: 55721, kind: 'config', config: 'cm0' },
        { at: 90615, kind: 'config', config: 'cm0' },
        { at: 131288, kind: 'template', deployment: 'web0' },
      ],
      p500: 0.049456964421551675,
      p429: 0.06777186171384528,
      p409: 0.03307603221619502,
      pHang: 0.03689650991000235,
      maxLagMs: 3000,
      faultsUntil: 151288,
    } as ExecSchedule),
  },
  'with --progressive-reloads, a StatefulSet pod still starting after its last eviction (seed 104)': {
    progressive: true,
    ...({
      seed: 104,
      configs: ['cm0', 'cm1'],
      deployments: [
        {
          kind: 'StatefulSet',
          name: 'web0',
          replicas: 3,
          maxSurge: '50%',
          maxUnavailable: '25%',
          pdbMinAvailable: 2,
          graceMs: 29011,
          uses: ['cm0', 'cm1'],
        },
        { name: 'web1', replicas: 3, maxSurge: '50%', maxUnavailable: 1, graceMs: 1363, uses: ['cm1'] },
      ],
      steps: [{ at: 291, kind: 'config', config: 'cm1' }],
      p500: 0.03528405282413587,
      p429: 0.016214100422803312,
      p409: 0.04739624841604382,
      pHang: 0.029214547690935434,
      maxLagMs: 300,
      faultsUntil: 84233,
    } as ExecSchedule),
  },
};

/** Runs the seeds; on a violation, fails with the replay command and a shortened schedule. */
async function runSeeds(seeds: number[], progressive: boolean): Promise<void> {
  const totals = { evictions: 0, surgePods: 0, podPatches: 0, refused: 0, terms: 0 };
  for (const seed of seeds) {
    const s: ExecSchedule = progressive
      ? withProgressiveSteps(randomExecSchedule(seed))
      : randomExecSchedule(seed);
    const { violations, stats } = await simulateExec(s);
    for (const k of Object.keys(totals) as Array<keyof typeof totals>) totals[k] += stats[k];
    if (violations.length > 0) {
      const short = await shrinkExec(s);
      const env = progressive ? 'SIM_EXEC_PROGRESSIVE=1 ' : '';
      const msg = [
        `seed ${seed}${progressive ? ' (with --progressive-reloads)' : ''} broke an invariant:`,
        ...violations.slice(0, 5),
        `replay: ${env}SIM_SEED=${seed} npm run test:unit -- test/sim/exec-sim`,
        `shortened schedule (${short.steps.length} of ${s.steps.length} steps): ${JSON.stringify(short)}`,
        ...(await simulateExec(short)).violations.slice(0, 5).map((v) => `  with it: ${v}`),
      ].join('\n');
      expect.fail(msg);
    }
  }
  // Something ran: the restarts evicted, made and handed over surge pods, and leaders changed.
  expect(totals.evictions).toBeGreaterThan(0);
  if (!replay) {
    expect(totals.surgePods).toBeGreaterThan(0);
    expect(totals.podPatches).toBeGreaterThan(0);
    expect(totals.refused).toBeGreaterThan(0);
    expect(totals.terms).toBeGreaterThan(seeds.length);
  }
}

describe('execution-level simulation', () => {
  const seeds = (n: number) => replay ?? Array.from({ length: n }, (_, i) => first + i);
  const plain = !replay || !process.env.SIM_EXEC_PROGRESSIVE;
  const progressive = !replay || Boolean(process.env.SIM_EXEC_PROGRESSIVE);
  it.runIf(plain)(
    `keeps its invariants over ${replay ? `seed ${replay[0]}` : `${count} seeded schedules`}`,
    () => runSeeds(seeds(count), false),
    600_000,
  );
  // The same schedules with --progressive-reloads: its waves, settles and halts must lose nothing,
  // and halt no good change (a halt holds the change, so a wrong one reads as a lost change here).
  it.runIf(progressive)(
    `keeps its invariants with --progressive-reloads over ${replay ? `seed ${replay[0]}` : `${progressiveCount} seeded schedules`}`,
    () => runSeeds(seeds(progressiveCount), true),
    600_000,
  );

  for (const [what, s] of Object.entries(found)) {
    it(`no longer finds ${what}`, async () => {
      expect((await simulateExec(s)).violations).toEqual([]);
    });
  }

  it('gives the same trace for the same seed', async () => {
    for (const seed of [7, 115, 2612]) {
      const a = await simulateExec(randomExecSchedule(seed));
      const b = await simulateExec(randomExecSchedule(seed));
      expect(a.trace.length).toBeGreaterThan(10);
      expect(b.trace).toEqual(a.trace);
    }
  });

  it("sees a deposed leader's writes when the fence is not wired (the Lease check can fail)", async () => {
    // The same schedules with the writes sent without the leader's fence: some deposed leader's
    // write reaches the API, and the check says so. With the fence (the test above) none does.
    const seen: string[] = [];
    for (let seed = 1; seed <= 400 && seen.length === 0; seed++) {
      const s = randomExecSchedule(seed);
      if (!s.steps.some((x) => x.kind === 'partition')) continue;
      seen.push(
        ...(await simulateExec({ ...s, noFence: true })).violations.filter((v) => v.includes('Lease')),
      );
    }
    expect(seen[0]).toMatch(/without holding the Lease/);
  });
});
