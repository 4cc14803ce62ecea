import { describe, expect, it } from 'vitest';
import { workloadRecord } from './to-record.ts';

const meta = { name: 'ro', namespace: 'shop', uid: 'u1', resourceVersion: '1' };

describe('workloadRecord', () => {
  it('hashes a pod template by meaning, not by the key order or empty fields of its last writer', () => {
    // What the API server returned for one Rollout before and after Argo CD applied it unchanged.
    const before = workloadRecord('Rollout', {
      metadata: meta,
      spec: {
        replicas: 2,
        template: {
          metadata: { labels: { app: 'ro' } },
          spec: {
            containers: [
              { name: 'app', image: 'registry.invalid/app:1', envFrom: [{ configMapRef: { name: 'app' } }] },
            ],
          },
        },
      },
    });
    const after = workloadRecord('Rollout', {
      metadata: { ...meta, resourceVersion: '2' },
      spec: {
        template: {
          // As the Argo Rollouts controller writes it back through its Go types.
          spec: {
            containers: [
              {
                envFrom: [{ configMapRef: { name: 'app' } }],
                image: 'registry.invalid/app:1',
                name: 'app',
                resources: {},
              },
            ],
          },
          metadata: { creationTimestamp: null, labels: { app: 'ro' } },
        },
        replicas: 2,
      },
    });
    expect(after?.templateHash).toBe(before?.templateHash);
    const changed = workloadRecord('Rollout', {
      metadata: meta,
      spec: {
        template: {
          metadata: { labels: { app: 'ro' } },
          spec: { containers: [{ name: 'app', image: 'registry.invalid/app:2' }] },
        },
      },
    });
    expect(changed?.templateHash).not.toBe(before?.templateHash);
  });
});
