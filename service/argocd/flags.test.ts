// The Argo CD flags of `serve`: defaults, and bad values stopping start-up with the flag's name.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/config.ts';

const base = ['--release-namespace=gr'];

describe('Argo CD flags', () => {
  it('default to watching argocd, reading both tracking methods, reloading after failed syncs, no webhook', () => {
    const cfg = loadConfig(base, {});
    expect(cfg.argocdNamespaces).toEqual(['argocd']);
    expect(cfg.argocdTracking).toBe('annotation+label');
    expect(cfg.argocdTrackingLabel).toBe('app.kubernetes.io/instance');
    expect(cfg.argocdOnFailedSync).toBe('reload');
    expect(cfg.webhookTokenFile).toBeUndefined();
  });

  it('read flags and GITOPS_RELOADER_* env', () => {
    const cfg = loadConfig(
      [...base, '--argocd-namespaces=argocd,team-a', '--argocd-tracking=label', '--webhook-token-file=/t'],
      {
        GITOPS_RELOADER_ARGOCD_ON_FAILED_SYNC: 'hold',
        GITOPS_RELOADER_ARGOCD_TRACKING_LABEL: 'argocd.example/app',
      },
    );
    expect(cfg.argocdNamespaces).toEqual(['argocd', 'team-a']);
    expect(cfg.argocdTracking).toBe('label');
    expect(cfg.argocdOnFailedSync).toBe('hold');
    expect(cfg.argocdTrackingLabel).toBe('argocd.example/app');
    expect(cfg.webhookTokenFile).toBe('/t');
  });

  it('turn the Application watch off with an empty namespace list', () => {
    expect(loadConfig([...base, '--argocd-namespaces='], {}).argocdNamespaces).toEqual([]);
  });

  it.each([
    ['--argocd-tracking=labels', /--argocd-tracking/],
    ['--argocd-on-failed-sync=ignore', /--argocd-on-failed-sync/],
    ['--argocd-namespaces=Argo_CD', /--argocd-namespaces/],
  ])('reject %s', (flag, message) => {
    expect(() => loadConfig([...base, flag], {})).toThrow(message);
  });
});
