// A flapping config through the reconciler: one Warning per episode, with fake clock and timers.
import { describe, expect, it } from 'vitest';
import { engineWorld } from '../../test/support/engine-fakes.ts';

describe('a flapping config', () => {
  it('is reported once per episode, when it changed --flap-changes times within --flap-window', async () => {
    const w = engineWorld(['--flap-changes=3', '--flap-window=10s']);
    w.state.putConfig(w.putConfigMap('a', 'cm', { k: '0' }));
    w.state.putWorkload(w.deployment('a', 'web', 'cm') as NonNullable<ReturnType<typeof w.deployment>>);
    await w.reconciler.start();
    const flaps = () => w.events.filter((e) => e.reason === 'ConfigFlapping').map((e) => e.message);
    for (let i = 1; i <= 6; i++) {
      w.change('a', 'cm', { k: String(i) });
      await w.time.advance(w.time.clock.now + 1_000);
      await w.settle();
      expect(flaps()).toHaveLength(i < 3 ? 0 : 1);
    }
    expect(flaps()[0]).toMatch(
      /^changed 3 times within 10s, written by unknown \(no managedFields\); its workloads restart at most once per --min-reload-interval \(10s\)/,
    );
    // A metadata-only edit is not a change of its data.
    await w.time.advance(w.time.clock.now + 60_000);
    for (let i = 0; i < 5; i++) w.change('a', 'cm', { k: '6' }, { note: String(i) });
    expect(flaps()).toHaveLength(1);
  });
});
