// Runs the execution-level simulation (test/sim/exec-sim.ts) over many seeds. SIM_EXEC_SCHEDULES=n
// runs more; SIM_SEED=s replays one seed. A failure prints the replay command and a shortened schedule.
import { describe, expect, it } from 'vitest';
import { randomExecSchedule, shrinkExec, simulateExec } from './exec-sim.ts';

const replay = process.env.SIM_SEED ? [Number(process.env.SIM_SEED)] : undefined;
const count = Number(process.env.SIM_EXEC_SCHEDULES ?? 200);
const first = Number(process.env.SIM_FIRST_SEED ?? 1);

describe('execution-level simulation', () => {
  it(`keeps its invariants over ${replay ? `seed ${replay[0]}` : `${count} seeded schedules`}`, async () => {
    const seeds = replay ?? Array.from({ length: count }, (_, i) => first + i);
    const totals = { evictions: 0, surgePods: 0, handovers: 0, refused: 0, terms: 0 };
    for (const seed of seeds) {
      const s = randomExecSchedule(seed);
      const { violations, stats } = await simulateExec(s);
      for (const k of Object.keys(totals) as Array<keyof typeof totals>) totals[k] += stats[k];
      if (violations.length > 0) {
        const short = await shrinkExec(s);
        const msg = [
          `seed ${seed} broke an invariant:`,
          ...violations.slice(0, 5),
          `replay: SIM_SEED=${seed} npm run test:unit -- test/sim/exec-sim`,
          `shortened schedule (${short.steps.length} of ${s.steps.length} steps): ${JSON.stringify(short)}`,
          ...(await simulateExec(short)).violations.slice(0, 5).map((v) => `  with it: ${v}`),
        ].join('\n');
        expect.fail(msg);
      }
    }
    console.log(`exec sim: ${seeds.length} schedules`, totals);
    // Something ran: the restarts evicted, made surge pods and handed them over.
    expect(totals.evictions + totals.handovers).toBeGreaterThan(0);
  }, 600_000);
});
