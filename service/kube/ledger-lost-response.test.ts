// The ledger client when a write's response is lost (a timeout, a 5xx): the write may have been
// applied. An in-memory API server that answers like the real one, and can apply a write and then fail
// it, stands in for the network (the real-server behaviour is in test/ledger/). Found by the engine
// simulation (test/sim, seed 19): the next write, made from the entry as last seen, put back the data
// the lost write had replaced.
import { describe, expect, it } from 'vitest';
import { memoryConfigMaps } from '../../test/support/memory-configmaps.ts';
import { Ledger } from './ledger.ts';

const ID = 'Deployment/a/web';

function server() {
  const s = memoryConfigMaps();
  return {
    ...s,
    stored: () => new Ledger({ core: s.core, namespace: 'rel', log: () => undefined, shards: 1 }),
  };
}

describe('ledger writes whose response is lost', () => {
  it('reads the shard back, so the entry the caller sees next is the one the server holds', async () => {
    const s = server();
    const ledger = new Ledger({ core: s.core, namespace: 'rel', log: () => undefined, shards: 1 });
    await ledger.load();
    await ledger.put(ID, { configs: { 'ConfigMap/a/cm': 'v1' } });
    s.faults.timeoutAfterApply = true;
    await expect(ledger.put(ID, { configs: { 'ConfigMap/a/cm': 'v2' } })).rejects.toThrow(/timed out/);
    s.faults.timeoutAfterApply = false;
    expect(ledger.get(ID)?.configs).toEqual({ 'ConfigMap/a/cm': 'v2' });
  });

  it('refuses a write made from an entry older than the shard holds, when the shard could not be read back', async () => {
    const s = server();
    const ledger = new Ledger({ core: s.core, namespace: 'rel', log: () => undefined, shards: 1 });
    await ledger.load();
    await ledger.put(ID, { configs: { 'ConfigMap/a/cm': 'v1' } });
    s.faults.timeoutAfterApply = true;
    s.faults.readFails = true;
    await expect(ledger.put(ID, { configs: { 'ConfigMap/a/cm': 'v2' } })).rejects.toThrow(/timed out/);
    s.faults.timeoutAfterApply = false;
    s.faults.readFails = false;
    // The caller still sees v1, and writes from it (a reload's pending entry keeps the recorded configs).
    const stale = ledger.get(ID);
    expect(stale?.configs).toEqual({ 'ConfigMap/a/cm': 'v1' });
    await expect(
      ledger.put(ID, {
        ...stale,
        configs: stale?.configs ?? {},
        pending: {
          cutoff: '2026-01-01T00:00:00.000Z',
          target: { 'ConfigMap/a/cm': 'v2' },
          changed: ['ConfigMap/a/cm'],
          startedAt: '2026-01-01T00:00:00.000Z',
        },
      }),
    ).rejects.toThrow(/changed since/);
    const fresh = s.stored();
    await fresh.load();
    expect(fresh.get(ID)?.configs).toEqual({ 'ConfigMap/a/cm': 'v2' });
    // Read again, the caller's next write goes out.
    expect(ledger.get(ID)?.configs).toEqual({ 'ConfigMap/a/cm': 'v2' });
    await ledger.put(ID, { configs: { 'ConfigMap/a/cm': 'v3' } });
    await fresh.load();
    expect(fresh.get(ID)?.configs).toEqual({ 'ConfigMap/a/cm': 'v3' });
  });
});
