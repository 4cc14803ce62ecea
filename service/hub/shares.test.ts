import type { V1Lease } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { LeaseRosterApi } from '../kube/api.ts';
import { silentLogger } from '../log.ts';
import { fairShare, Liveness, ReplicaRoster } from './shares.ts';

describe('fair share', () => {
  it('is ⌈clusters ÷ live replicas⌉, with at least this replica', () => {
    expect(fairShare(10, 3)).toBe(4);
    expect(fairShare(10, 2)).toBe(5);
    expect(fairShare(10, 0)).toBe(10);
    expect(fairShare(0, 3)).toBe(0);
  });
});

describe('Liveness', () => {
  it("counts a replica live while its Lease changed within the duration, judged by this process's clock", () => {
    const l = new Liveness();
    l.see('me', 'r1', 0);
    l.see('other', 't1', 0);
    expect(l.live('me', 3_000, 4_000)).toBe(2);
    // The same renewTime seen again is no renewal, whatever it says.
    l.see('other', 't1', 3_500);
    expect(l.live('me', 4_100, 4_000)).toBe(1);
    l.see('other', 't2', 4_200);
    expect(l.live('me', 4_300, 4_000)).toBe(2);
    // Deleted (a replica that stopped): forgotten.
    l.keepOnly(new Set(['me']));
    expect(l.live('me', 4_300, 4_000)).toBe(1);
  });
});

describe('ReplicaRoster', () => {
  it('renews its Lease with one write a round, reading it again only after a conflict', async () => {
    const calls: string[] = [];
    let rv = 0;
    let conflictNext = false;
    const lease = (): V1Lease => ({ metadata: { name: 'x', resourceVersion: String(++rv) } });
    const api: LeaseRosterApi = {
      readNamespacedLease: async () => {
        calls.push('read');
        const e = Object.assign(new Error('not found'), { code: 404 });
        if (rv === 0) throw e;
        return lease();
      },
      createNamespacedLease: async () => {
        calls.push('create');
        return lease();
      },
      replaceNamespacedLease: async () => {
        calls.push('replace');
        if (conflictNext) {
          conflictNext = false;
          throw Object.assign(new Error('conflict'), { code: 409 });
        }
        return lease();
      },
      listNamespacedLease: async () => ({ items: [] }),
      deleteNamespacedLease: async () => {
        calls.push('delete');
      },
    };
    let rounds = 0;
    let done!: () => void;
    const threeRounds = new Promise<void>((r) => (done = r));
    const roster = new ReplicaRoster({
      api,
      namespace: 'ops',
      releaseName: 'gr',
      identity: 'pod-a',
      leaseDurationMs: 4_000,
      retryPeriodMs: 1,
      log: silentLogger,
      onRound: () => {
        rounds++;
        if (rounds === 2) conflictNext = true;
        if (rounds === 4) done();
      },
    });
    roster.start();
    await threeRounds;
    await roster.stop();
    expect(calls.slice(0, 6)).toEqual(['read', 'create', 'replace', 'replace', 'read', 'replace']);
    expect(calls.at(-1)).toBe('delete');
  });
});
