import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { MIRROR_GROUP, mirrorCrd } from './upstream-schema.ts';

describe('mirrorCrd', () => {
  it('moves the upstream schema to the mirror group and drops subresources so status is validated', () => {
    const upstream: V1CustomResourceDefinition = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'rollouts.argoproj.io' },
      spec: {
        group: 'argoproj.io',
        scope: 'Namespaced',
        names: { kind: 'Rollout', plural: 'rollouts', shortNames: ['ro'] },
        versions: [
          {
            name: 'v1alpha1',
            served: true,
            storage: true,
            subresources: { status: {} },
            schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object' } } } },
          },
        ],
      },
    };
    const m = mirrorCrd(upstream);
    expect(m.metadata?.name).toBe(`rollouts.${MIRROR_GROUP}`);
    expect(m.spec.group).toBe(MIRROR_GROUP);
    expect(m.spec.names.shortNames).toEqual([]);
    expect(m.spec.versions[0]?.subresources).toBeUndefined();
    expect(m.spec.versions[0]?.schema).toEqual(upstream.spec.versions[0]?.schema);
  });
});
