// Runs the engine simulation (test/sim/sim.ts) over many seeds. SIM_SCHEDULES=n runs more;
// SIM_SEED=s replays one seed. A failure prints the replay command and a shortened schedule.
import { describe, expect, it } from 'vitest';
import { randomSchedule, shrink, simulate } from './sim.ts';

const replay = process.env.SIM_SEED ? [Number(process.env.SIM_SEED)] : undefined;
const count = Number(process.env.SIM_SCHEDULES ?? 2000);
const first = Number(process.env.SIM_FIRST_SEED ?? 1);

describe('engine simulation', () => {
  it(`keeps its invariants over ${replay ? `seed ${replay[0]}` : `${count} seeded schedules`}`, async () => {
    const seeds = replay ?? Array.from({ length: count }, (_, i) => first + i);
    for (const seed of seeds) {
      const s = randomSchedule(seed);
      const violations = await simulate(s);
      if (violations.length > 0) {
        const short = await shrink(s);
        const msg = [
          `seed ${seed} broke an invariant:`,
          ...violations.slice(0, 5),
          `replay: SIM_SEED=${seed} npm run test:unit -- test/sim`,
          `shortened schedule (${short.changes.length} of ${s.changes.length} changes): ${JSON.stringify(short)}`,
          ...(await simulate(short)).slice(0, 5).map((v) => `  with it: ${v}`),
        ].join('\n');
        expect.fail(msg);
      }
    }
  }, 600_000);
});
