import { describe, expect, it } from 'vitest';
import { MemoryLedger } from '../../test/support/engine-fakes.ts';
import { MISSING } from '../core/config-hash.ts';
import type { LedgerEntry } from '../core/ledger-entry.ts';
import type { ReloadAction } from '../core/reload-action.ts';
import { silentLogger } from '../log.ts';
import { ClusterState } from '../state.ts';
import { forgetGone, Recorder } from './recorder.ts';

const W = 'Deployment/a/web';
const action = (cutoffMs: number, target: string): ReloadAction => ({
  workload: W,
  cutoffMs,
  changeRV: '0',
  target: { 'ConfigMap/a/cm': target },
  changed: ['ConfigMap/a/cm'],
});

describe('Recorder', () => {
  it('records no deletion without --reload-on-delete: a config deleted before the run keeps the digest last applied (simulation seed 121)', async () => {
    // Recorded "missing", its return with the data the pods read would count as a change and
    // replace them again.
    const ledger = new MemoryLedger();
    await ledger.put(W, { configs: { 'ConfigMap/a/cm': 'T1', 'ConfigMap/a/db': 'D1' } });
    const a = { ...action(100, 'T2'), target: { 'ConfigMap/a/cm': 'T2', 'ConfigMap/a/db': MISSING } };
    await new Recorder(ledger, { reloadOnDelete: false }).done(a);
    expect(ledger.get(W)?.configs).toEqual({ 'ConfigMap/a/cm': 'T2', 'ConfigMap/a/db': 'D1' });
    await new Recorder(ledger, { reloadOnDelete: true }).done({ ...a, cutoffMs: 200 });
    expect(ledger.get(W)?.configs).toEqual({ 'ConfigMap/a/cm': 'T2', 'ConfigMap/a/db': MISSING });
  });

  it('never records a target older than the one it recorded', async () => {
    const ledger = new MemoryLedger();
    const r = new Recorder(ledger);
    expect(await r.done(action(200, 'T2'), '2026-01-01T00:00:02.000Z')).toBe(true);
    // The older reload ends after the newer one: its pending entry goes, the newer target stays.
    await ledger.put(W, {
      ...(ledger.get(W) as LedgerEntry),
      pending: {
        cutoff: new Date(100).toISOString(),
        target: { 'ConfigMap/a/cm': 'T1' },
        changed: [],
        startedAt: new Date(100).toISOString(),
      },
    });
    expect(await r.done(action(100, 'T1'), '2026-01-01T00:00:03.000Z')).toBe(false);
    expect(ledger.get(W)).toEqual({
      configs: { 'ConfigMap/a/cm': 'T2' },
      reloadedAt: '2026-01-01T00:00:03.000Z',
    });
  });

  it('keeps a newer action pending while it records an older one that completed', async () => {
    const ledger = new MemoryLedger();
    const r = new Recorder(ledger);
    const pending = {
      cutoff: new Date(300).toISOString(),
      target: { 'ConfigMap/a/cm': 'T3' },
      changed: [],
      startedAt: new Date(300).toISOString(),
    };
    await ledger.put(W, { configs: { 'ConfigMap/a/cm': 'T0' }, pending });
    expect(await r.done(action(200, 'T2'))).toBe(true);
    expect(ledger.get(W)).toEqual({ configs: { 'ConfigMap/a/cm': 'T2' }, pending });
  });
});

describe('forgetGone', () => {
  it('removes the entries of gone workloads at a sweep, but not a running reload, nor a Job to resume (simulation seed 12)', async () => {
    const ledger = new MemoryLedger();
    const state = new ClusterState('restart', false);
    const pending = {
      cutoff: '2026-01-01T00:00:00.000Z',
      target: {},
      changed: [],
      startedAt: '2026-01-01T00:00:00.000Z',
    };
    await ledger.put('Deployment/a/gone', { configs: {} });
    await ledger.put('Deployment/a/gone-pending', { configs: {}, pending });
    await ledger.put('Deployment/a/running', { configs: {} });
    await ledger.put('Job/a/resume', { configs: {}, pending });
    await forgetGone({ state, ledger, log: silentLogger }, new Set(['Deployment/a/running']));
    expect([...ledger.entries().keys()].sort()).toEqual(['Deployment/a/running', 'Job/a/resume']);
  });
});
