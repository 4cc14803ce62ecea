import { describe, expect, it } from 'vitest';
import { pending, waitFor } from './wait-for.ts';

describe('waitFor', () => {
  it('returns the value once the condition holds', async () => {
    let calls = 0;
    const v = await waitFor(() => (++calls >= 3 ? 'done' : pending(`call ${calls}`)), {
      describe: 'three calls',
      interval: 1,
    });
    expect(v).toBe('done');
    expect(calls).toBe(3);
  });

  it('names what it waited for and the last thing it saw on timeout', async () => {
    await expect(
      waitFor(() => pending({ ready: 1 }), { describe: '3 Ready pods', timeout: 30, interval: 5 }),
    ).rejects.toThrow(/waiting for 3 Ready pods; last seen: \{"ready":1\}/);
  });

  it('keeps polling through errors and reports the last one', async () => {
    await expect(
      waitFor(
        () => {
          throw new Error('connection refused');
        },
        { describe: 'the API server', timeout: 30, interval: 5 },
      ),
    ).rejects.toThrow(/last seen: connection refused/);
  });
});
