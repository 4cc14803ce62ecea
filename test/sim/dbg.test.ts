import { it } from 'vitest';
import { randomExecSchedule, simulateExec } from './exec-sim.ts';

it('dbg', async () => {
  const s = process.env.SIM_SCHED
    ? JSON.parse(process.env.SIM_SCHED)
    : randomExecSchedule(Number(process.env.SIM_SEED ?? 4));
  const r = await simulateExec(s);
  console.log(
    r.trace
      .filter((l) => l.includes(process.env.GREP ?? ''))
      .slice(0, 300)
      .join('\n'),
    r.violations,
    r.stats,
  );
}, 60000);
