// Runs the engine simulation (test/sim/sim.ts) over many seeds. SIM_SCHEDULES=n runs more;
// SIM_SEED=s replays one seed. A failure prints the replay command and a shortened schedule.
import { describe, expect, it } from 'vitest';
import { randomSchedule, type Schedule, type Step, shrink, withBadContents } from './schedule.ts';
import { type SimOptions, simulate, stats } from './sim.ts';

const replay = process.env.SIM_SEED ? [Number(process.env.SIM_SEED)] : undefined;

/**
 * Seeds of the default range that still break an invariant, for reasons not fixed yet (reported with
 * the issue-20 work; SIM_SEED=n replays each). They are left out of the default run, and listed in
 * its output, never silently.
 */
const KNOWN: Record<number, string> = {};
/** Seeds beyond the default range that once failed, run every time (README: 24,741 and 26,441). */
const FIXED_BEYOND = [24741, 26441];
const count = Number(process.env.SIM_SCHEDULES ?? 3000);
/** The same schedules with --progressive-reloads: its waves and gathering must lose nothing either. */
const progressiveCount = Number(process.env.SIM_PROGRESSIVE_SCHEDULES ?? 6000);
const first = Number(process.env.SIM_FIRST_SEED ?? 1);

/**
 * The seed's schedule. With --progressive-reloads, every even seed also writes broken contents (most
 * followed by their fix): halts must survive restarts, leader changes and deletions, and every good
 * change must still reach every reader (issue 34).
 */
const scheduleOf = (seed: number, o: SimOptions) =>
  o.progressive && seed % 2 === 0 ? withBadContents(randomSchedule(seed)) : randomSchedule(seed);

/** Simulates one seed; on a violation, fails with the replay command and a shortened schedule. */
async function check(seed: number, totals: Totals, o: SimOptions = {}): Promise<void> {
  const s = scheduleOf(seed, o);
  const violations = await simulate(s, o);
  totals.runs += stats.runs;
  totals.replaced += stats.replaced;
  totals.ledgerFaults += stats.ledgerFaults;
  totals.halts += stats.halts;
  for (const [k, n] of Object.entries(stats.steps)) totals.steps[k] = (totals.steps[k] ?? 0) + n;
  if (violations.length === 0) return;
  const short = await shrink(s, async (x) => (await simulate(x, o)).length > 0);
  const env = o.progressive ? 'SIM_PROGRESSIVE=1 ' : '';
  const msg = [
    `seed ${seed}${o.progressive ? ' (with --progressive-reloads)' : ''} broke an invariant:`,
    ...violations.slice(0, 5),
    `replay: ${env}SIM_SEED=${seed} npm run test:unit -- test/sim`,
    `shortened schedule (${short.steps.length} of ${s.steps.length} steps): ${JSON.stringify(short)}`,
    ...(await simulate(short, o)).slice(0, 5).map((v) => `  with it: ${v}`),
  ].join('\n');
  expect.fail(msg);
}

interface Totals {
  runs: number;
  replaced: number;
  ledgerFaults: number;
  halts: number;
  steps: Record<string, number>;
}

describe('engine simulation', () => {
  it(`keeps its invariants over ${replay ? `seed ${replay[0]}` : `${count} seeded schedules`}`, async () => {
    const range = Array.from({ length: count }, (_, i) => first + i);
    const all = replay ?? [...range, ...FIXED_BEYOND.filter((n) => !range.includes(n))];
    const seeds = replay ? all : all.filter((seed) => KNOWN[seed] === undefined);
    const skipped = all.filter((seed) => !seeds.includes(seed));
    if (skipped.length > 0)
      console.warn(
        `engine simulation: known failing seeds left out: ${skipped.map((n) => `${n} (${KNOWN[n]})`).join('; ')}`,
      );
    const totals: Totals = { runs: 0, replaced: 0, ledgerFaults: 0, halts: 0, steps: {} };
    for (const seed of seeds) await check(seed, totals);
    // Not an assertion on numbers, a guard that the schedules exercise what they claim to.
    expect(totals.replaced).toBeGreaterThan(0);
    if (!replay) {
      for (const kind of [
        'update',
        'meta',
        'delete',
        'recreate',
        'template',
        'wdelete',
        'wrecreate',
        'term',
        'crash',
        'restart',
        'syncStart',
        'syncEnd',
      ])
        expect(totals.steps[kind] ?? 0, kind).toBeGreaterThan(0);
      if (process.env.SIM_STATS) console.log(JSON.stringify(totals));
    }
  }, 600_000);

  it(`keeps its invariants with --progressive-reloads over ${replay ? `seed ${replay[0]}` : `${progressiveCount} seeded schedules`}`, async () => {
    if (replay && !process.env.SIM_PROGRESSIVE) return;
    const seeds = replay ?? Array.from({ length: progressiveCount }, (_, i) => first + i);
    const totals: Totals = { runs: 0, replaced: 0, ledgerFaults: 0, halts: 0, steps: {} };
    for (const seed of seeds) await check(seed, totals, { progressive: true });
    expect(totals.replaced).toBeGreaterThan(0);
    // The broken contents were judged: changes were halted (and, by the invariants, stayed so).
    if (!replay) expect(totals.halts).toBeGreaterThan(0);
    if (process.env.SIM_STATS) console.log(JSON.stringify(totals));
  }, 600_000);
});

/**
 * Named schedules (broken contents, progressive reloads): a good change of cm1 and a bad one of cm0
 * found at one start travel in one canary's reload and are halted together; cm0's fix must end cm1's
 * halt too, live or found at a later start (ADR 0045). Without it web1 (cm1 only) never reloads.
 */
const haltedTogether = (fix: Step[]): Schedule => ({
  seed: 56,
  configs: [{ name: 'cm0' }, { name: 'cm1' }],
  deployments: [
    {
      name: 'web0',
      uses: [
        { config: 'cm0', optional: false },
        { config: 'cm1', optional: false },
      ],
      replicas: 2,
    },
    { name: 'web1', uses: [{ config: 'cm1', optional: true }], replicas: 1 },
    {
      name: 'web2',
      uses: [
        { config: 'cm0', optional: true },
        { config: 'cm1', optional: true },
      ],
      replicas: 3,
    },
  ],
  apps: [],
  argo: { mode: 'watched', onFailedSync: 'reload' },
  steps: [
    { at: 927, kind: 'crash' },
    { at: 57_283, kind: 'update', config: 'cm0', bad: true },
    { at: 108_576, kind: 'update', config: 'cm1' },
    { at: 200_000, kind: 'restart', rekey: 'none' },
    ...fix,
  ],
  minIntervalMs: 30_000,
  pFail: 0,
  pStall: 0,
  pWait: 0,
  pLedger: 0,
  pEvent: 0,
  faultsUntil: 400_000,
});

describe('engine simulation, named schedules', () => {
  it('a good change halted with a bad one is released by the bad one’s fix (ADR 0045, seed 56 shortened)', async () => {
    expect(
      await simulate(haltedTogether([{ at: 300_000, kind: 'update', config: 'cm0' }]), { progressive: true }),
    ).toEqual([]);
  });

  it('…and by a fix written while the service was down, found at the next start', async () => {
    const fix: Step[] = [
      { at: 280_000, kind: 'crash' },
      { at: 300_000, kind: 'update', config: 'cm0' },
      { at: 320_000, kind: 'restart', rekey: 'none' },
    ];
    expect(await simulate(haltedTogether(fix), { progressive: true })).toEqual([]);
  });
});
