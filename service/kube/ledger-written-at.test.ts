// Ledger#writtenAtMs: the ledger's newest write, by which the start-up catch-up tells a workload created
// while the service was down (core/catch-up.ts createdWhileDown). Read from the shards' managedFields.
import { describe, expect, it } from 'vitest';
import type { CoreApi } from './api.ts';
import { LEDGER_LABELS, Ledger } from './ledger.ts';

type Shard = { metadata: Record<string, unknown>; data: Record<string, string> };

function ledgerOver(shards: Shard[]): Ledger {
  const core = {
    async listNamespacedConfigMap() {
      return { items: structuredClone(shards), metadata: {} };
    },
  } as unknown as CoreApi;
  return new Ledger({ core, log: () => undefined, namespace: 'rel', shards: 2 });
}

const shard = (i: number, times: string[] | undefined, labels = LEDGER_LABELS): Shard => ({
  metadata: {
    name: `gitops-reloader-ledger-${i}`,
    labels,
    creationTimestamp: '2026-12-04T08:00:00Z',
    ...(times ? { managedFields: times.map((time) => ({ manager: 'gitops-reloader', time })) } : {}),
  },
  data: {},
});

describe('the ledger’s newest write', () => {
  it('is the newest managedFields time over its shards, emptied ones included', async () => {
    const l = ledgerOver([
      shard(0, ['2026-12-04T09:00:00Z', '2026-12-04T10:00:05Z']),
      shard(1, ['2026-12-04T09:30:00Z']),
    ]);
    await l.load();
    expect(l.writtenAtMs()).toBe(Date.parse('2026-12-04T10:00:05Z'));
  });

  it('is unknown when no shard exists (a first install) or one has no write times', async () => {
    const none = ledgerOver([]);
    await none.load();
    expect(none.writtenAtMs()).toBeUndefined();
    const cleared = ledgerOver([shard(0, ['2026-12-04T09:00:00Z']), shard(1, undefined)]);
    await cleared.load();
    expect(cleared.writtenAtMs()).toBeUndefined();
  });

  it('ignores a ConfigMap of a shard’s name that is not ours', async () => {
    const l = ledgerOver([
      shard(0, ['2026-12-04T11:00:00Z'], { ...LEDGER_LABELS, 'app.kubernetes.io/name': 'another' }),
    ]);
    await l.load();
    expect(l.writtenAtMs()).toBeUndefined();
  });
});
