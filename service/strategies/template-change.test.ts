import { describe, expect, it } from 'vitest';
import { templateHashOf } from '../kube/to-record.ts';
import type { RawObject } from '../kube/watch-logic.ts';
import { type TemplateChangeInput, templateChangeCheck } from './template-change.ts';

const deployment = (image: string, rv = '1'): RawObject => ({
  metadata: { name: 'web', namespace: 'ns', uid: 'u1', resourceVersion: rv },
  spec: { template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image }] } } },
});
const OLD = deployment('app:1');
const NEW = deployment('app:2');
const hash = (o: RawObject) => templateHashOf('Deployment', o);

function check(o: Partial<TemplateChangeInput> & { past?: RawObject | Error }) {
  const reads: string[] = [];
  const unknown: string[] = [];
  const run = templateChangeCheck({
    kind: 'Deployment',
    changeRV: '100',
    watched: () => undefined,
    readAt: async (rv) => {
      reads.push(rv);
      if (o.past instanceof Error) throw o.past;
      return o.past;
    },
    onUnknown: (why) => unknown.push(why),
    ...o,
  });
  return { run, reads, unknown };
}

describe('templateChangeCheck', () => {
  it('says yes without a request when the watched state already saw a later template', async () => {
    const c = check({ watched: () => ({ templateHash: hash(NEW), templateRV: '105' }) });
    expect(await c.run(NEW)).toBe(true);
    expect(c.reads).toEqual([]);
  });

  it('says no without a request when the watched template is the live one and changed before', async () => {
    const c = check({ watched: () => ({ templateHash: hash(NEW), templateRV: '90' }) });
    expect(await c.run(NEW)).toBe(false);
    expect(c.reads).toEqual([]);
  });

  it('a lagging watch: the live template differs, and the API server had the old one at the change', async () => {
    // The watch still shows the old template (templateRV '0': no change seen); the sync changed it after the config.
    const c = check({ watched: () => ({ templateHash: hash(OLD), templateRV: '0' }), past: OLD });
    expect(await c.run(NEW)).toBe(true);
    expect(c.reads).toEqual(['100']);
  });

  it('a lagging watch: the template changed before the config, so the pods are judged by the cutoff', async () => {
    const c = check({ watched: () => ({ templateHash: hash(OLD), templateRV: '0' }), past: NEW });
    expect(await c.run(NEW)).toBe(false);
  });

  it('asks the API server once per live template', async () => {
    const c = check({ watched: () => ({ templateHash: hash(OLD), templateRV: '0' }), past: OLD });
    await c.run(NEW);
    await c.run(NEW);
    expect(c.reads).toEqual(['100']);
  });

  it('answers no when the past cannot be read (compacted), and says why', async () => {
    const c = check({
      watched: () => ({ templateHash: hash(OLD), templateRV: '0' }),
      past: new Error('410 Gone: too old resource version'),
    });
    expect(await c.run(NEW)).toBe(false);
    expect(c.unknown).toEqual(['410 Gone: too old resource version']);
  });

  it('answers no when the change has no resourceVersion', async () => {
    const c = check({ changeRV: '0', past: OLD });
    expect(await c.run(NEW)).toBe(false);
    expect(c.reads).toEqual([]);
  });

  it('a workload the watch has not seen yet is read at the change', async () => {
    const c = check({ past: OLD });
    expect(await c.run(NEW)).toBe(true);
    expect(c.reads).toEqual(['100']);
  });
});
