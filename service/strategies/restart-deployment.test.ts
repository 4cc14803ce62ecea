import type { V1Deployment } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { replicaSetPodPrefix, SURGE_LABEL, surgePod } from './restart-deployment.ts';

const deployment: V1Deployment = {
  metadata: { name: 'web', namespace: 'shop', uid: 'd-uid' },
  spec: {
    selector: { matchLabels: { app: 'web' } },
    template: {
      metadata: { labels: { app: 'web' }, annotations: { 'prometheus.io/scrape': 'true' } },
      spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
    },
  },
};

describe('surge pods (ADR 0019 and its amendment)', () => {
  it('are named as the ReplicaSet they will be handed to names its pods', () => {
    const pod = surgePod(deployment, 'web-5d8f7c9b6');
    expect(pod.metadata?.generateName).toBe('web-5d8f7c9b6-');
    expect(pod.metadata?.name).toBeUndefined();
  });

  it('are named <deployment>-surge- only when no ReplicaSet will take them', () => {
    expect(surgePod(deployment).metadata?.generateName).toBe('web-surge-');
  });

  it("carry the template's labels and annotations, the surge label and the Deployment as owner until the handover", () => {
    const pod = surgePod(deployment, 'web-5d8f7c9b6');
    expect(pod.metadata?.labels).toEqual({ app: 'web', [SURGE_LABEL]: 'd-uid' });
    expect(pod.metadata?.annotations).toEqual({ 'prometheus.io/scrape': 'true' });
    expect(pod.metadata?.ownerReferences).toEqual([
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-uid', controller: true },
    ]);
    expect(pod.metadata?.finalizers).toBeUndefined();
  });

  it("use the ReplicaSet controller's prefix rule: name and dash, or the name alone when too long", () => {
    expect(replicaSetPodPrefix('web-abc')).toBe('web-abc-');
    const long = 'a'.repeat(253);
    expect(replicaSetPodPrefix(long)).toBe(long);
    expect(replicaSetPodPrefix('a'.repeat(252))).toBe(`${'a'.repeat(252)}-`);
  });
});
