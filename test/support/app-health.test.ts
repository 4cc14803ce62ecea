import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { health, healthPolicy } from './app-health.ts';

const pod = (status: V1Pod['status']): V1Pod => ({ status });
const running = (ready: 'True' | 'False', started = true): V1Pod['status'] => ({
  phase: 'Running',
  podIP: '10.0.0.1',
  conditions: [{ type: 'Ready', status: ready }],
  containerStatuses: [
    {
      name: 'app',
      image: 'i',
      imageID: '',
      ready: ready === 'True',
      started,
      restartCount: 0,
      state: { running: {} },
    },
  ],
});

describe('health', () => {
  it('tells a pod kwok has not started from a Ready and an unready one', () => {
    expect(health(pod(undefined))).toBe('waiting');
    expect(health(pod({ phase: 'Pending' }))).toBe('waiting');
    expect(health(pod(running('True')))).toBe('ready');
    expect(health(pod(running('False')))).toBe('unready');
    expect(health(pod(running('False', false)))).toBe('waiting');
  });
});

describe('healthPolicy', () => {
  it('quotes the key and the bad value as CEL string literals', () => {
    const { policy, binding } = healthPolicy('ns', {
      config: 'shared',
      key: 'a.b',
      bad: 'x" || true || "',
      podLabel: { key: 'reads', value: 'yes' },
    });
    const expr = policy.spec.matchConditions[0]?.expression ?? '';
    expect(expr).toContain('params.data["a.b"] == "x\\" || true || \\""');
    expect(policy.metadata.name).toBe('gr-health-ns-shared');
    expect(binding.spec.paramRef).toEqual({ name: 'shared', parameterNotFoundAction: 'Allow' });
    expect(policy.spec.matchConstraints.namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'ns' },
    });
  });
});
