// The ledger client when a write's response is lost (a timeout, a 5xx): the write may have been
// applied. An in-memory API server that answers like the real one, and can apply a write and then fail
// it, stands in for the network (the real-server behaviour is in test/ledger/). Found by the engine
// simulation (test/sim, seed 19): the next write, made from the entry as last seen, put back the data
// the lost write had replaced.
import { describe, expect, it } from 'vitest';
import type { CoreApi } from './api.ts';
import { Ledger } from './ledger.ts';

const ID = 'Deployment/a/web';

function server() {
  const cms = new Map<string, { metadata: Record<string, unknown>; data: Record<string, string> }>();
  const faults = { timeoutAfterApply: false, readFails: false };
  const copy = <T>(x: T) => structuredClone(x);
  const core = {
    async listNamespacedConfigMap() {
      return { items: [...cms.values()].map(copy), metadata: {} };
    },
    async readNamespacedConfigMap({ name }: { name: string }) {
      if (faults.readFails) throw new Error('the request timed out');
      const cm = cms.get(name);
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      return copy(cm);
    },
    async createNamespacedConfigMap({
      body,
    }: {
      body: { metadata: { name: string }; data: Record<string, string> };
    }) {
      if (cms.has(body.metadata.name)) throw Object.assign(new Error('exists'), { code: 409 });
      cms.set(body.metadata.name, copy(body));
      return copy(body);
    },
    async patchNamespacedConfigMap({
      name,
      body,
    }: {
      name: string;
      body: { data?: Record<string, string | null> };
    }) {
      const cm = cms.get(name);
      if (!cm) throw Object.assign(new Error('not found'), { code: 404 });
      for (const [k, v] of Object.entries(body.data ?? {})) {
        if (v === null) delete cm.data[k];
        else cm.data[k] = v;
      }
      if (faults.timeoutAfterApply) throw new Error('the request timed out');
      return copy(cm);
    },
  } as unknown as CoreApi;
  return {
    core,
    faults,
    stored: () => new Ledger({ core, namespace: 'rel', log: () => undefined, shards: 1 }),
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
