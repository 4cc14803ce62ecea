import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.ts';

describe('canonicalJson', () => {
  it('gives the same text for the same value whatever the key order, at every depth', () => {
    const a = {
      spec: { containers: [{ name: 'app', image: 'x', env: [{ name: 'A', value: '1' }] }] },
      metadata: { labels: { b: '2', a: '1' } },
    };
    const b = {
      metadata: { labels: { a: '1', b: '2' } },
      spec: { containers: [{ env: [{ value: '1', name: 'A' }], image: 'x', name: 'app' }] },
    };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(b));
  });

  it('leaves out null values and empty objects, as a controller writing through Go types adds them', () => {
    const applied = {
      metadata: { labels: { app: 'ro' } },
      spec: { containers: [{ name: 'app', image: 'x' }] },
    };
    const typed = {
      metadata: { creationTimestamp: null, labels: { app: 'ro' } },
      spec: { containers: [{ name: 'app', image: 'x', resources: {} }] },
    };
    expect(canonicalJson(typed)).toBe(canonicalJson(applied));
  });

  it('keeps array order and tells different values apart, an emptyDir volume from another source too', () => {
    expect(canonicalJson({ a: [1, 2] })).not.toBe(canonicalJson({ a: [2, 1] }));
    expect(canonicalJson({ a: { b: 1 } })).not.toBe(canonicalJson({ a: { b: 2 } }));
    expect(canonicalJson({ v: [{ name: 'x', emptyDir: {} }] })).not.toBe(
      canonicalJson({ v: [{ name: 'x', emptyDir: { medium: 'Memory' } }] }),
    );
    expect(canonicalJson(null)).toBe('null');
  });
});
