import { describe, expect, it } from 'vitest';
import { configRecord, workloadRecord } from './to-record.ts';

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

  it("keeps the labels a decision reads, the Flux Kustomization's name and namespace among them (git mode's claim), and no others", () => {
    const labels = {
      app: 'web',
      'app.kubernetes.io/instance': 'shop',
      'kustomize.toolkit.fluxcd.io/name': 'apps',
      'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
      'kustomize.toolkit.fluxcd.io/other': 'x',
      'helm.toolkit.fluxcd.io/name': 'web',
    };
    const rec = workloadRecord('Deployment', {
      metadata: { ...meta, labels },
      spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] } } },
    });
    expect(rec?.labels).toEqual({
      'app.kubernetes.io/instance': 'shop',
      'kustomize.toolkit.fluxcd.io/name': 'apps',
      'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
    });
    // A config keeps none of them: nothing reads a config's Flux labels.
    const config = configRecord(
      'ConfigMap',
      { metadata: { ...meta, labels }, data: {} },
      Buffer.alloc(32, 7),
    );
    expect(config?.labels).toEqual({ 'app.kubernetes.io/instance': 'shop' });
  });
});

describe('configRecord', () => {
  const key = Buffer.alloc(32, 7);
  it('keeps the newest write of the object (managedFields or creation) for the start-up catch-up', () => {
    const rec = configRecord(
      'ConfigMap',
      {
        metadata: {
          name: 'cfg',
          namespace: 'ns',
          uid: 'u1',
          creationTimestamp: '2026-12-04T09:00:00Z',
          managedFields: [{ time: '2026-12-04T09:30:00Z' }, { time: '2026-12-04T09:10:00Z' }],
        },
        data: { k: 'v' },
      },
      key,
    );
    expect(rec?.writtenAtMs).toBe(Date.parse('2026-12-04T09:30:00Z'));
    expect(rec?.uid).toBe('u1');
  });

  it('keeps none when the object carries no managedFields', () => {
    const rec = configRecord(
      'ConfigMap',
      { metadata: { name: 'cfg', namespace: 'ns', creationTimestamp: '2026-12-04T09:00:00Z' }, data: {} },
      key,
    );
    expect(rec && 'writtenAtMs' in rec).toBe(false);
  });

  it('keeps the field manager of the newest write, short and on one line', () => {
    const rec = configRecord(
      'ConfigMap',
      {
        metadata: {
          name: 'cfg',
          namespace: 'ns',
          managedFields: [
            { time: '2026-12-04T09:10:00Z', manager: 'kubectl' },
            { time: '2026-12-04T09:30:00Z', manager: `flapper\n${'x'.repeat(300)}` },
            { manager: 'no-time' },
          ],
        },
        data: {},
      },
      key,
    );
    expect(rec?.writer).toBe(`flapper?${'x'.repeat(120)}`);
  });
});

describe("Reloader's custom annotation keys on records", () => {
  const aliases = {
    'reloader.stakater.com/auto': 'example.com/auto',
    'reloader.stakater.com/ignore': 'example.com/ignore',
  };

  it('reads a custom key as the default one, on the workload and its pod template, and drops the default', () => {
    const rec = workloadRecord(
      'Deployment',
      {
        metadata: {
          ...meta,
          annotations: { 'example.com/auto': 'true', 'reloader.stakater.com/auto': 'false' },
        },
        spec: {
          template: { metadata: { annotations: { 'example.com/auto': 'true' } }, spec: { containers: [] } },
        },
      },
      aliases,
    );
    expect(rec?.annotations).toEqual({ 'reloader.stakater.com/auto': 'true' });
    expect(rec?.templateAnnotations).toEqual({ 'reloader.stakater.com/auto': 'true' });
  });

  it('reads a custom key on a config', () => {
    const rec = configRecord(
      'ConfigMap',
      { metadata: { ...meta, annotations: { 'example.com/ignore': 'true' } }, data: {} },
      Buffer.alloc(32, 1),
      aliases,
    );
    expect(rec?.annotations).toEqual({ 'reloader.stakater.com/ignore': 'true' });
  });
});
