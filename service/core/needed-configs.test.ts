import { describe, expect, it } from 'vitest';
import { heldMessage, missingNeeded } from './needed-configs.ts';
import { extractReferences } from './references.ts';
import { type ConfigRef, configId } from './types.ts';

const present =
  (...ids: string[]) =>
  (c: ConfigRef) =>
    ids.includes(configId(c));

describe('missingNeeded', () => {
  const uses = extractReferences('ns', {
    containers: [
      {
        envFrom: [{ configMapRef: { name: 'required' } }, { secretRef: { name: 'opt', optional: true } }],
        env: [{ valueFrom: { configMapKeyRef: { name: 'mixed', key: 'k', optional: true } } }],
      },
    ],
    volumes: [
      { configMap: { name: 'mixed' } },
      { csi: { driver: 'secrets-store.csi.k8s.io', volumeAttributes: { secretProviderClass: 'vault' } } },
    ],
  });

  it('names every missing config some use requires, and none that every use marks optional', () => {
    expect(missingNeeded(uses, present()).map(configId)).toEqual([
      'ConfigMap/ns/mixed',
      'ConfigMap/ns/required',
    ]);
  });

  it('names nothing once the required configs exist, whatever the optional ones do', () => {
    expect(missingNeeded(uses, present('ConfigMap/ns/mixed', 'ConfigMap/ns/required'))).toEqual([]);
  });

  it('never names a SecretProviderClass: the driver mounts from an external store', () => {
    expect(missingNeeded(uses, present()).some((c) => c.kind === 'SecretProviderClass')).toBe(false);
  });

  it('names the configs in the held message, in the singular or the plural', () => {
    expect(heldMessage(['ConfigMap/other'], ['ConfigMap/app'])).toBe(
      'ConfigMap/other changed; reload held: ConfigMap/app does not exist and the pods need it (not optional), so a replaced pod could not start. The reload runs when it exists again.',
    );
    expect(heldMessage(['Secret/s'], ['ConfigMap/a', 'Secret/s'])).toMatch(
      /ConfigMap\/a, Secret\/s do not exist and the pods need them .* when they exist again\.$/,
    );
  });
});
