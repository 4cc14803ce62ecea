import { describe, expect, it } from 'vitest';
import { FlagError } from './config/flags.ts';
import { resume, resumeTarget } from './resume-command.ts';

describe('gitops-reloader resume', () => {
  it('parses configmap/NAMESPACE/NAME and secret/NAMESPACE/NAME once, into the API path it patches', () => {
    expect(resumeTarget('configmap/shop/feature-flags')).toEqual({
      path: '/api/v1/namespaces/shop/configmaps/feature-flags',
      label: 'ConfigMap shop/feature-flags',
    });
    expect(resumeTarget('Secret/shop/db.creds').path).toBe('/api/v1/namespaces/shop/secrets/db.creds');
  });

  it('refuses anything else with a sentence naming the argument: no other kind, no path tricks', () => {
    for (const bad of [
      'deployment/shop/web',
      'configmap/shop',
      'configmap/shop/a/b',
      'configmap/../kube-system/x',
      'configmap/shop/..',
      'configmap/Shop/x',
      'configmap/shop/x?dryRun=All',
      '',
    ])
      expect(() => resumeTarget(bad), bad).toThrow(FlagError);
    expect(() => resumeTarget('configmap/shop')).toThrow(/expected configmap\/NAMESPACE\/NAME/);
  });

  it('takes exactly one config', async () => {
    const quiet = () => undefined;
    await expect(resume([], {}, quiet, quiet)).rejects.toThrow(/resume takes one config/);
    await expect(resume(['configmap/a/b', 'configmap/a/c'], {}, quiet, quiet)).rejects.toThrow(
      /resume takes one config/,
    );
  });
});
