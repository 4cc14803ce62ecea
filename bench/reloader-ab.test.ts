// The one piece of reloader-ab that is pure: reading the reload counter both tools export.
import { describe, expect, it } from 'vitest';
import { reloadsIn } from './phases/reloader-ab.ts';

describe('reloader-ab', () => {
  it('counts successful reloads from either tool, not failed ones or other series', () => {
    const reloader = [
      '# HELP reloader_reload_executed_total Counter of reloads executed by Reloader.',
      '# TYPE reloader_reload_executed_total counter',
      'reloader_reload_executed_total{success="false"} 2',
      'reloader_reload_executed_total{success="true"} 51',
      'reloader_reload_executed_total_by_namespace{namespace="a",success="true"} 51',
    ].join('\n');
    expect(reloadsIn(reloader)).toBe(51);
    expect(reloadsIn('reloader_reload_executed_total{success="true",x="y"} 3\n')).toBe(3);
    expect(reloadsIn('')).toBe(0);
  });
});
