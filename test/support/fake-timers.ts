// A hand-driven clock and timer set for unit tests of code that takes `{ now, set, clear }` timers
// (the work queue, the token bucket): time moves only when the test says so.
export function fakeTimers() {
  const clock = { now: 0 };
  const pending: Array<{ at: number; fn: () => void }> = [];
  const timers = {
    now: () => clock.now,
    set: (fn: () => void, ms: number) => {
      const t = { at: clock.now + ms, fn };
      pending.push(t);
      return t;
    },
    clear: (h: unknown) => {
      const i = pending.indexOf(h as (typeof pending)[number]);
      if (i >= 0) pending.splice(i, 1);
    },
  };
  /** Moves the clock to `to`, firing every timer due on the way, in order. */
  const advance = async (to: number) => {
    for (;;) {
      pending.sort((a, b) => a.at - b.at);
      const next = pending[0];
      if (!next || next.at > to) break;
      pending.shift();
      clock.now = next.at;
      next.fn();
      await Promise.resolve();
      await Promise.resolve();
    }
    clock.now = to;
    await Promise.resolve();
  };
  return { clock, timers, pending, advance };
}
