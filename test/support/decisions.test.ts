import { describe, expect, it } from 'vitest';
import { decidedNoReload, decides } from './decisions.ts';
import type { LogLine } from './service.ts';

const change = { config: 'ConfigMap/ns/app', resourceVersion: '120' };
const line = (msg: string, f: Record<string, unknown>): LogLine => ({ level: 'info', msg, ...f });

describe('decides', () => {
  it('takes a line that names the config at that resourceVersion or a later one', () => {
    const held = (rv: string) =>
      line('config change held until the Argo CD sync ends', {
        workload: 'Deployment/ns/web',
        configs: ['ConfigMap/ns/app'],
        resourceVersion: rv,
      });
    expect(decides(held('120'), change)).toBe(true);
    expect(decides(held('121'), change)).toBe(true);
    expect(decides(held('119'), change), 'an older version of the config').toBe(false);
    expect(decides(held('120'), { ...change, config: 'ConfigMap/ns/other' })).toBe(false);
  });

  it('reads a batch line by its resourceVersions, and names the workload as kind/name or its id', () => {
    const l = line('no reload needed', {
      workload: 'Deployment/web',
      namespace: 'ns',
      configs: ['ConfigMap/ns/app'],
      resourceVersions: { 'ConfigMap/ns/app': '120' },
    });
    expect(decides(l, change, 'Deployment/ns/web')).toBe(true);
    expect(decides(l, change, 'Deployment/web')).toBe(true);
    expect(decides(l, change, 'Deployment/ns/api')).toBe(false);
  });

  it('takes "config changed" only when no workload reloads on the config', () => {
    const l = (affected: number) =>
      line('config changed', { config: 'ConfigMap/ns/app', resourceVersion: '120', affected });
    expect(decides(l(0), change)).toBe(true);
    expect(decides(l(1), change)).toBe(false);
  });

  it('takes a reload that names the config as the decision, so a negative check fails on it', async () => {
    const started = line('reload started', {
      workload: 'Deployment/web',
      configs: ['ConfigMap/app'],
      changeRV: '120',
    });
    expect(decides(started, change)).toBe(true);
    expect(decides({ ...started, changeRV: '100' }, change), 'a reload of an earlier change').toBe(false);
    await expect(decidedNoReload({ logs: [started] }, change, { timeout: 10 })).rejects.toThrow(
      /expected no reload of ConfigMap\/ns\/app@120/,
    );
  });
});
