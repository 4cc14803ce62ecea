// Runs the Flux gate simulation (test/sim/flux-sim.ts) over many seeds. FLUX_SIM_SCHEDULES=n runs
// more; FLUX_SIM_SEED=s replays one seed. A failure prints the replay command and the schedule.
import { describe, expect, it } from 'vitest';
import { randomFluxSchedule, simulateFlux } from './flux-sim.ts';

const replay = process.env.FLUX_SIM_SEED ? [Number(process.env.FLUX_SIM_SEED)] : undefined;
const count = Number(process.env.FLUX_SIM_SCHEDULES ?? 4000);

describe('Flux gate simulation', () => {
  it(`keeps its invariants over ${replay ? `seed ${replay[0]}` : `${count} seeded schedules`}`, async () => {
    const seeds = replay ?? Array.from({ length: count }, (_, i) => i + 1);
    const totals = { delivered: 0, held: 0, steps: {} as Record<string, number> };
    for (const seed of seeds) {
      const s = randomFluxSchedule(seed);
      const res = await simulateFlux({ ...s });
      totals.delivered += res.delivered;
      totals.held += res.held;
      for (const [k, n] of Object.entries(res.steps)) totals.steps[k] = (totals.steps[k] ?? 0) + n;
      if (res.violations.length > 0)
        expect.fail(
          [
            `seed ${seed} broke an invariant:`,
            ...res.violations.slice(0, 5),
            `replay: FLUX_SIM_SEED=${seed} npm run test:unit -- test/sim/flux-sim.test.ts`,
            `schedule: ${JSON.stringify(s)}`,
          ].join('\n'),
        );
    }
    // Not an assertion on numbers, a guard that the schedules exercise what they claim to.
    expect(totals.held).toBeGreaterThan(0);
    if (!replay)
      for (const k of [
        'commit',
        'edit',
        'term',
        'time',
        'check',
        'apply',
        'ready',
        'lastApplied',
        'retry',
        'deliver',
      ])
        expect(totals.steps[k], k).toBeGreaterThan(0);
  });
});
