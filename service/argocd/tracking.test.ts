import { describe, expect, it } from 'vitest';
import {
  instanceName,
  parseInstanceName,
  parseTrackingId,
  type TrackedObject,
  type TrackingOptions,
  trackedBy,
} from './tracking.ts';

const cm = (
  annotations: Record<string, string> = {},
  labels: Record<string, string> = {},
): TrackedObject => ({
  group: '',
  kind: 'ConfigMap',
  namespace: 'web',
  name: 'app-config',
  annotations,
  labels,
});
const opts: TrackingOptions = {
  method: 'annotation+label',
  labelKey: 'app.kubernetes.io/instance',
  controlNamespace: 'argocd',
};
const ID = 'argocd.argoproj.io/tracking-id';

describe('parseTrackingId', () => {
  it('parses the Argo CD format, the core group being empty', () => {
    expect(parseTrackingId('shop:/ConfigMap:web/app-config')).toEqual({
      instance: 'shop',
      group: '',
      kind: 'ConfigMap',
      namespace: 'web',
      name: 'app-config',
    });
    expect(parseTrackingId('team-a_shop:apps/Deployment:web/api')?.instance).toBe('team-a_shop');
  });

  it('keeps colons of the last part in the name, as Argo CD splits into at most three parts', () => {
    expect(parseTrackingId('ops:rbac.authorization.k8s.io/ClusterRole:/system:foo')).toEqual({
      instance: 'ops',
      group: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      namespace: '',
      name: 'system:foo',
    });
  });

  it.each([
    'shop',
    'shop:/ConfigMap',
    'shop:ConfigMap:web/app-config',
    'shop:/ConfigMap:app-config',
    'shop:a/b/ConfigMap:web/app-config',
    'shop:/ConfigMap:web/x/app-config',
  ])('rejects %j', (v) => expect(parseTrackingId(v)).toBeUndefined());
});

describe('instance names', () => {
  it('round-trips apps inside and outside Argo CD namespace', () => {
    expect(instanceName({ namespace: 'argocd', name: 'shop' }, 'argocd')).toBe('shop');
    expect(instanceName({ namespace: 'team-a', name: 'shop' }, 'argocd')).toBe('team-a_shop');
    expect(parseInstanceName('shop', 'argocd')).toEqual({ namespace: 'argocd', name: 'shop' });
    expect(parseInstanceName('team-a_shop', 'argocd')).toEqual({ namespace: 'team-a', name: 'shop' });
    expect(parseInstanceName('_shop', 'argocd')).toBeUndefined();
    expect(parseInstanceName('', 'argocd')).toBeUndefined();
  });
});

describe('trackedBy', () => {
  it('maps a config to its app by the tracking annotation', () => {
    expect(trackedBy(cm({ [ID]: 'shop:/ConfigMap:web/app-config' }), opts)).toEqual({
      app: { namespace: 'argocd', name: 'shop' },
      by: 'annotation',
    });
    expect(trackedBy(cm({ [ID]: 'team-a_shop:/ConfigMap:web/app-config' }), opts).app).toEqual({
      namespace: 'team-a',
      name: 'shop',
    });
  });

  it('ignores an annotation that describes another object, as Argo CD does', () => {
    for (const v of [
      'shop:/ConfigMap:web/other',
      'shop:/Secret:web/app-config',
      'shop:/ConfigMap:other-ns/app-config',
      'shop:apps/ConfigMap:web/app-config',
    ]) {
      const r = trackedBy(cm({ [ID]: v }, { 'app.kubernetes.io/instance': 'shop' }), opts);
      expect(r.app, v).toBeUndefined();
      expect(r).toHaveProperty('ignored');
    }
  });

  it('ignores a malformed annotation and does not fall back to a label it came with', () => {
    const r = trackedBy(cm({ [ID]: 'shop' }, { 'app.kubernetes.io/instance': 'shop' }), opts);
    expect(r.app).toBeUndefined();
  });

  it('falls back to the label when there is no annotation (annotation+label)', () => {
    expect(trackedBy(cm({}, { 'app.kubernetes.io/instance': 'shop' }), opts)).toEqual({
      app: { namespace: 'argocd', name: 'shop' },
      by: 'label',
    });
  });

  it('reads only what the method says', () => {
    const both = cm({ [ID]: 'a:/ConfigMap:web/app-config' }, { 'app.kubernetes.io/instance': 'b' });
    expect(trackedBy(both, { ...opts, method: 'annotation' }).app?.name).toBe('a');
    expect(trackedBy(both, { ...opts, method: 'label' }).app?.name).toBe('b');
    expect(
      trackedBy(cm({}, { 'app.kubernetes.io/instance': 'b' }), { ...opts, method: 'annotation' }).app,
    ).toBeUndefined();
    expect(trackedBy(cm({}, { team: 'b' }), { ...opts, labelKey: 'team' }).app?.name).toBe('b');
  });
});
