import type { V1Job } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { recreated } from './job-recreate.ts';

describe('recreated', () => {
  const uid = '6f1c7c0e-0000-4000-8000-000000000001';
  const old: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: 'migrate',
      namespace: 'shop',
      uid,
      resourceVersion: '42',
      creationTimestamp: '2026-12-03T06:00:00Z' as unknown as Date,
      labels: {
        team: 'db',
        'batch.kubernetes.io/controller-uid': uid,
        'batch.kubernetes.io/job-name': 'migrate',
      },
      annotations: { 'reloader.stakater.com/auto': 'true' },
    },
    spec: {
      backoffLimit: 2,
      selector: { matchLabels: { 'batch.kubernetes.io/controller-uid': uid } },
      template: {
        metadata: {
          labels: {
            app: 'migrate',
            'batch.kubernetes.io/controller-uid': uid,
            'batch.kubernetes.io/job-name': 'migrate',
            'controller-uid': uid,
            'job-name': 'migrate',
          },
          annotations: { note: 'kept' },
        },
        spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'm:1' }] },
      },
    },
    status: { succeeded: 1 },
  };

  it('keeps the spec and template, and drops only what names the old Job', () => {
    const job = recreated(old, ['ConfigMap/app'], Date.parse('2026-12-03T07:00:00Z'));
    expect(job.metadata).toEqual({
      name: 'migrate',
      namespace: 'shop',
      labels: { team: 'db' },
      annotations: {
        'reloader.stakater.com/auto': 'true',
        'gitops-reloader.io/reloaded-for': 'ConfigMap/app',
        'gitops-reloader.io/reload-cutoff': '2026-12-03T07:00:00.000Z',
      },
    });
    expect(job.status).toBeUndefined();
    expect(job.spec?.selector).toBeUndefined();
    expect(job.spec?.backoffLimit).toBe(2);
    expect(job.spec?.template).toEqual({
      metadata: { labels: { app: 'migrate' }, annotations: { note: 'kept' } },
      spec: { restartPolicy: 'Never', containers: [{ name: 'm', image: 'm:1' }] },
    });
    // The old object is not modified.
    expect(old.spec?.selector).toBeDefined();
  });

  it('keeps a manual selector and its labels as they are', () => {
    const manual = { ...old, spec: { ...(old.spec as NonNullable<V1Job['spec']>), manualSelector: true } };
    const job = recreated(manual, [], 0);
    expect(job.spec?.selector).toEqual(old.spec?.selector);
    expect(job.spec?.template.metadata?.labels).toEqual(old.spec?.template.metadata?.labels);
  });
});
