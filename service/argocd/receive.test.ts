import { describe, expect, it } from 'vitest';
import type { NotifyResult } from './gate.ts';
import type { SyncNotification } from './notification.ts';
import { type ReceiveDeps, receiveNotification } from './receive.ts';

const n: SyncNotification = {
  app: { namespace: 'argocd', name: 'shop' },
  phase: 'Succeeded',
  startedAt: '2026-12-02T10:00:00Z',
  resources: [],
};

/** A gate as the SyncGate behaves: the first call for a notification acts, any later one is a duplicate. */
function gate() {
  const seen = new Set<string>();
  const acted: string[] = [];
  const act = async (x: SyncNotification, by: string): Promise<NotifyResult> => {
    const key = `${x.app.name}@${x.startedAt}`;
    if (seen.has(key)) return { outcome: 'duplicate' };
    seen.add(key);
    acted.push(by);
    return { outcome: 'accepted', action: `sync ${x.phase}` };
  };
  return { act, acted };
}

describe('receiveNotification', () => {
  it('the leader acts on it itself even when its own record comes back through the inbox watch first', async () => {
    const g = gate();
    const deps: ReceiveDeps = {
      // The record's watch event reaches the leader's inbox reader before the create call returns.
      record: async (x) => {
        await new Promise((res) => setImmediate(res)); // the create request's round trip
        await g.act(x, 'inbox');
        return true;
      },
      act: (x) => g.act(x, 'webhook'),
      acting: () => true,
    };
    expect(await receiveNotification(n, deps)).toEqual({ outcome: 'accepted', action: 'sync Succeeded' });
    expect(g.acted).toEqual(['webhook']);
  });

  it('the leader answers only once the record is written', async () => {
    const g = gate();
    let written = false;
    const r = await receiveNotification(n, {
      record: async () => {
        await new Promise((res) => setTimeout(res, 5));
        written = true;
        return true;
      },
      act: (x) => g.act(x, 'webhook'),
      acting: () => true,
    });
    expect(r.outcome).toBe('accepted');
    expect(written).toBe(true);
  });

  it('the leader that acted answers accepted although its record failed', async () => {
    const g = gate();
    const r = await receiveNotification(n, {
      record: async () => {
        throw new Error('connect ECONNREFUSED');
      },
      act: (x) => g.act(x, 'webhook'),
      acting: () => true,
    });
    expect(r).toEqual({ outcome: 'accepted', action: 'sync Succeeded' });
  });

  it('a replica that does not act records it for the leader, and never acts', async () => {
    const g = gate();
    const deps = (created: boolean): ReceiveDeps => ({
      record: async () => created,
      act: (x) => g.act(x, 'webhook'),
      acting: () => false,
    });
    expect(await receiveNotification(n, deps(true))).toEqual({
      outcome: 'accepted',
      action: 'recorded for the leader',
    });
    expect(await receiveNotification(n, deps(false))).toEqual({ outcome: 'duplicate' });
    expect(g.acted).toEqual([]);
  });

  it('a replica that does not act passes on why it could not record', async () => {
    await expect(
      receiveNotification(n, {
        record: async () => {
          throw new Error('connect ECONNREFUSED');
        },
        act: async () => ({ outcome: 'duplicate' }),
        acting: () => false,
      }),
    ).rejects.toThrow('ECONNREFUSED');
  });
});
