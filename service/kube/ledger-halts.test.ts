// Halt records in the ledger's shards (docs/adr/0042): beside the workload entries under keys of
// their own, so that no write of an entry touches them; loaded again by the next term; removed when
// the halt ends. An in-memory API server answers as the real one for the calls the ledger makes.
import { describe, expect, it } from 'vitest';
import { memoryConfigMaps } from '../../test/support/memory-configmaps.ts';
import type { HaltRecord } from '../core/halt-record.ts';
import { haltKey } from '../core/halt-record.ts';
import { Ledger } from './ledger.ts';

const server = memoryConfigMaps;

const halt = (config: string): HaltRecord => ({
  config,
  digest: '0123456789abcdef0123456789abcdef',
  cutoff: '2026-12-06T10:00:00.000Z',
  wave: 1,
  workload: 'Deployment/shop/canary',
  why: 'not Ready: canary-1',
  at: '2026-12-06T10:00:31.000Z',
});

describe('halt records in the ledger', () => {
  it('live beside the entries: rewriting or removing the failing workload’s entry keeps them, a new term loads them, and they go when removed', async () => {
    const s = server();
    const warnings: string[] = [];
    const open = () =>
      new Ledger({ core: s.core, namespace: 'rel', log: (_l, msg) => void warnings.push(msg), shards: 4 });
    const ledger = open();
    await ledger.load();
    await ledger.put('Deployment/shop/canary', { configs: { 'ConfigMap/shop/shared': 'a' } });
    await ledger.putHalt(halt('ConfigMap/shop/shared'));
    await ledger.putHalt(halt('ConfigMap/shop/extra'));
    await ledger.put('Deployment/shop/canary', { configs: { 'ConfigMap/shop/own': 'b' } });
    await ledger.remove('Deployment/shop/canary');
    await ledger.removeMany(['Deployment/shop/canary']);
    const configs = (l: Ledger) =>
      l
        .halts()
        .map((h) => h.config)
        .sort();
    expect(configs(ledger)).toEqual(['ConfigMap/shop/extra', 'ConfigMap/shop/shared']);
    // Not a workload entry: a new term reads them as halts, and no entry of them.
    const next = open();
    const entries = await next.load();
    expect([...entries.keys()]).toEqual([]);
    expect(configs(next)).toEqual(['ConfigMap/shop/extra', 'ConfigMap/shop/shared']);
    expect(next.halts().find((h) => h.config === 'ConfigMap/shop/shared')).toEqual(
      halt('ConfigMap/shop/shared'),
    );
    // A newer halt of the config replaces its earlier one.
    await next.putHalt({ ...halt('ConfigMap/shop/shared'), wave: 2 });
    expect(
      next
        .halts()
        .filter((h) => h.config === 'ConfigMap/shop/shared')
        .map((h) => h.wave),
    ).toEqual([2]);
    await next.removeHalt('ConfigMap/shop/shared');
    expect(configs(next)).toEqual(['ConfigMap/shop/extra']);
    const stored = [...s.cms.values()].flatMap((cm) => Object.keys(cm.data));
    expect(stored).toEqual([haltKey('ConfigMap/shop/extra')]);
    expect(warnings).toEqual([]);
  });

  it('skips, with a warning, a halt value someone else wrote, and still loads the rest', async () => {
    const s = server();
    const warnings: Array<Record<string, unknown>> = [];
    const open = () =>
      new Ledger({
        core: s.core,
        namespace: 'rel',
        log: (_l, msg, f) => void warnings.push({ msg, ...f }),
        shards: 1,
      });
    const ledger = open();
    await ledger.load();
    await ledger.putHalt(halt('ConfigMap/shop/shared'));
    const cm = s.cms.get('gitops-reloader-ledger-0');
    if (cm) cm.data[haltKey('ConfigMap/shop/x')] = '{"c":1}';
    const next = open();
    await next.load();
    expect(next.halts().map((h) => h.config)).toEqual(['ConfigMap/shop/shared']);
    expect(warnings).toEqual([
      expect.objectContaining({ msg: 'ledger halt record skipped', key: haltKey('ConfigMap/shop/x') }),
    ]);
  });
});
