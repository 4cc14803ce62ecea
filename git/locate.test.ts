import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { editCheckout } from './edit-checkout.ts';
import { type LocateTarget, locateWorkload } from './locate.ts';

const KEY = 'gitops-reloader.io/config-hash';
let root: string;

async function files(tree: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(tree)) {
    await mkdir(path.dirname(path.join(root, name)), { recursive: true });
    await writeFile(path.join(root, name), text);
  }
}

const deploy = (name: string, ns?: string) =>
  `apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: ${name}\n${ns ? `  namespace: ${ns}\n` : ''}spec:\n  template:\n    spec: {}\n`;

const target = (t: Partial<LocateTarget> & { name: string }): LocateTarget => ({
  kind: 'Deployment',
  annotationKey: KEY,
  ...t,
});

beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'locate-test-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('locateWorkload: plain directories', () => {
  it('with namespaceRequired, matches only a manifest that names the namespace itself (a Flux Kustomization without targetNamespace)', async () => {
    await files({ 'apps/a.yaml': deploy('web'), 'apps/b.yaml': deploy('web', 'team-b') });
    await expect(
      locateWorkload(root, 'apps', target({ name: 'web', namespace: 'team-a', namespaceRequired: true })),
    ).rejects.toThrow(/not defined in any manifest/);
    await files({ 'apps/c.yaml': deploy('web', 'team-a') });
    expect(
      await locateWorkload(
        root,
        'apps',
        target({ name: 'web', namespace: 'team-a', namespaceRequired: true }),
      ),
    ).toMatchObject({ file: 'apps/c.yaml', select: { namespace: 'team-a', namespaceRequired: true } });
  });

  it('with namespaceRequired, a Kustomize namespace above the manifest still gives it its namespace', async () => {
    await files({
      'k/kustomization.yaml': 'namespace: team-a\nresources:\n- web.yaml\n',
      'k/web.yaml': deploy('web'),
      'j/kustomization.yaml': 'resources:\n- web.yaml\n',
      'j/web.yaml': deploy('web'),
    });
    const t = target({ name: 'web', namespace: 'team-a', namespaceRequired: true });
    expect(await locateWorkload(root, 'k', t)).toMatchObject({ file: 'k/web.yaml' });
    await expect(locateWorkload(root, 'j', t)).rejects.toThrow(/not defined by the kustomization/);
  });

  it('finds a workload in a nested multi-document file', async () => {
    await files({
      'apps/web/svc.yaml': 'apiVersion: v1\nkind: Service\nmetadata: {name: web}\n',
      'apps/web/deep/er/all.yaml': `${deploy('api')}---\n${deploy('web')}`,
      'apps/web/.hidden/web.yaml': deploy('web'),
      'apps/web/broken.yaml': 'a: [\n',
    });
    expect(await locateWorkload(root, 'apps/web', target({ name: 'web', namespace: 'shop' }))).toEqual({
      type: 'manifest',
      file: 'apps/web/deep/er/all.yaml',
      select: { kind: 'Deployment', name: 'web', namespace: 'shop' },
      source: 'directory',
    });
  });

  it('prefers the file naming the namespace, and reports real ambiguity and absence', async () => {
    await files({ 'a.yaml': deploy('web'), 'b.yaml': deploy('web', 'shop'), 'c.yaml': deploy('web', 'dev') });
    expect(await locateWorkload(root, '.', target({ name: 'web', namespace: 'shop' }))).toMatchObject({
      file: 'b.yaml',
    });
    await expect(locateWorkload(root, '', target({ name: 'web' }))).rejects.toThrow(
      /several files: a.yaml, b.yaml, c.yaml/,
    );
    await files({ 'broken.yaml': 'x: [' });
    await expect(locateWorkload(root, '', target({ name: 'nope' }))).rejects.toThrow(
      /Deployment nope is not defined in any manifest \(not valid YAML, skipped: broken.yaml\)/,
    );
  });

  it('refuses a path out of the checkout', async () => {
    await expect(locateWorkload(root, '../etc', target({ name: 'web' }))).rejects.toThrow(
      /leaves the repository/,
    );
  });
});

describe('locateWorkload: Kustomize', () => {
  beforeEach(async () => {
    await files({
      'base/kustomization.yaml': 'resources:\n- deployment.yaml\n',
      'base/deployment.yaml': deploy('web'),
      'overlays/prod/kustomization.yaml':
        'namespace: shop\nnamePrefix: prod-\nresources:\n- ../../base\n- cron.yaml\npatches:\n- path: size.yaml\n',
      'overlays/prod/cron.yaml':
        'apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: report}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec: {}\n',
      'overlays/prod/size.yaml':
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n',
    });
  });

  it('edits a resource file that belongs to the app path, through namePrefix', async () => {
    expect(
      await locateWorkload(
        root,
        'overlays/prod',
        target({ kind: 'CronJob', name: 'prod-report', namespace: 'shop' }),
      ),
    ).toEqual({
      type: 'manifest',
      file: 'overlays/prod/cron.yaml',
      select: { kind: 'CronJob', name: 'report' },
      source: 'kustomize-resource',
    });
  });

  it('adds the annotation to an existing patch of the workload when the resource is a shared base', async () => {
    expect(
      await locateWorkload(root, 'overlays/prod', target({ name: 'prod-web', namespace: 'shop' })),
    ).toEqual({
      type: 'manifest',
      file: 'overlays/prod/size.yaml',
      select: { kind: 'Deployment', name: 'web' },
      source: 'kustomize-patch',
    });
  });

  it('creates a patch when the base is shared and no patch exists, or the resource is remote', async () => {
    await files({ 'overlays/prod/kustomization.yaml': 'namePrefix: prod-\nresources:\n- ../../base\n' });
    expect(await locateWorkload(root, 'overlays/prod', target({ name: 'prod-web' }))).toEqual({
      type: 'kustomize-new-patch',
      kustomization: 'overlays/prod/kustomization.yaml',
      patchFile: 'overlays/prod/gitops-reloader-deployment-web.yaml',
      select: { kind: 'Deployment', name: 'web' },
      apiVersion: 'apps/v1',
    });
    await files({
      'remote/kustomization.yaml': 'resources:\n- https://github.com/acme/app//deploy?ref=v1.2.0\n',
    });
    expect(await locateWorkload(root, 'remote', target({ kind: 'StatefulSet', name: 'db' }))).toMatchObject({
      type: 'kustomize-new-patch',
      patchFile: 'remote/gitops-reloader-statefulset-db.yaml',
      apiVersion: 'apps/v1',
    });
  });

  it('prefers a patch that already sets the annotation over the resource', async () => {
    await files({
      'app/kustomization.yaml': 'resources: [d.yaml]\npatchesStrategicMerge: [p.yaml]\n',
      'app/d.yaml': deploy('web'),
      'app/p.yaml': `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    metadata:\n      annotations:\n        ${KEY}: old\n`,
    });
    expect(await locateWorkload(root, 'app', target({ name: 'web' }))).toMatchObject({
      file: 'app/p.yaml',
      source: 'kustomize-patch',
    });
  });
});

describe('locateWorkload: Helm', () => {
  it('names the values key, configurable per workload', async () => {
    await files({
      'chart/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 1.0.0\n',
      'chart/values.yaml': '{}\n',
    });
    expect(await locateWorkload(root, 'chart', target({ name: 'web' }))).toEqual({
      type: 'helm-values',
      file: 'chart/values.yaml',
      valuesPath: ['podAnnotations', KEY],
    });
    expect(
      await locateWorkload(
        root,
        'chart',
        target({ name: 'w', valuesPath: 'worker.podAnnotations', valuesFile: 'values-prod.yaml' }),
      ),
    ).toEqual({
      type: 'helm-values',
      file: 'chart/values-prod.yaml',
      valuesPath: ['worker', 'podAnnotations', KEY],
    });
  });

  it('rejects a values path for a source that is not a chart', async () => {
    await files({ 'plain/d.yaml': deploy('web') });
    await expect(
      locateWorkload(root, 'plain', target({ name: 'web', valuesPath: 'podAnnotations' })),
    ).rejects.toThrow(/not a Helm chart/);
  });
});

describe('editCheckout', () => {
  it('gives workloads of one chart that share a values key one combined value', async () => {
    await files({ 'chart/Chart.yaml': 'name: c\n', 'chart/values.yaml': 'podAnnotations: {}\n' });
    const out = await editCheckout(root, 'chart', [
      { ...target({ name: 'web' }), hash: 'a'.repeat(32) },
      { ...target({ kind: 'CronJob', name: 'job' }), hash: 'b'.repeat(32) },
    ]);
    expect(out.map((o) => o.status)).toEqual(['updated', 'updated']);
    const again = await editCheckout(root, 'chart', [
      { ...target({ name: 'web' }), hash: 'a'.repeat(32) },
      { ...target({ kind: 'CronJob', name: 'job' }), hash: 'b'.repeat(32) },
    ]);
    expect(again.map((o) => o.status)).toEqual(['unchanged', 'unchanged']);
  });

  it('never writes through a symlink out of the checkout', async () => {
    const outside = await mkdtemp(path.join(tmpdir(), 'outside-'));
    try {
      await files({ 'chart/Chart.yaml': 'name: c\n' });
      await writeFile(path.join(outside, 'values.yaml'), 'x: 1\n');
      await symlink(path.join(outside, 'values.yaml'), path.join(root, 'chart', 'values.yaml'));
      const [o] = await editCheckout(root, 'chart', [{ ...target({ name: 'web' }), hash: 'h' }]);
      expect(o).toMatchObject({ status: 'failed', error: expect.stringMatching(/symlink/) });
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  });

  it('reports a workload it cannot find and still edits the others', async () => {
    await files({ 'd.yaml': deploy('web') });
    const out = await editCheckout(root, '', [
      { ...target({ name: 'web' }), hash: 'h1' },
      { ...target({ name: 'gone' }), hash: 'h2' },
    ]);
    expect(out.map((o) => o.status)).toEqual(['updated', 'failed']);
  });
});
