// A service started with a Reloader Deployment's flags, as Reloader's chart renders them, behaves as
// those flags say on the real control plane: only selected namespaces, Secrets not watched, no
// Rollout watch with --is-Argo-Rollouts=false.
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, inject } from 'vitest';
import { plan } from '../../service/plan-command.ts';
import { changeOf, decidedNoReload } from '../support/decisions.ts';
import { it, type Kube } from '../support/kube.ts';
import { events, waitForEvent, waitReadyPods } from '../support/observe.ts';
import { hashKeyFile, killAll, serviceArgs, startService } from '../support/service.ts';
import { configMap, deployment } from '../support/workloads.ts';

afterEach(killAll);

async function app(kube: Kube, namespace: string) {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
  await kube.core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'creds' }, stringData: { p: '1' } },
  });
  await kube.apps.createNamespacedDeployment({
    namespace,
    body: deployment('web', {
      annotations: { 'reloader.stakater.com/auto': 'true' },
      container: { envFrom: [{ configMapRef: { name: 'app' } }, { secretRef: { name: 'creds' } }] },
    }),
  });
  await waitReadyPods(kube, namespace, 'web', 1);
}

describe("Reloader's flags", () => {
  it('select namespaces, leave Secrets and Rollouts unwatched, and are logged as translated', async ({
    kube,
    namespace,
  }) => {
    const team = `t${randomBytes(3).toString('hex')}`;
    const mk = async (labels: Record<string, string>) =>
      (await kube.core.createNamespace({ body: { metadata: { generateName: 'rflags-', labels } } })).metadata
        ?.name as string;
    const selected = await mk({ team });
    const ignored = await mk({ team });
    try {
      for (const ns of [selected, ignored]) await app(kube, ns);
      const args = serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        // As Reloader's chart 2.2.16 writes them: the namespace selector inside literal quotes.
        `--namespace-selector="team:${team}"`,
        `--namespaces-to-ignore=${ignored}`,
        '--resources-to-ignore=secrets',
        '--is-Argo-Rollouts=false',
        '--reload-strategy=env-vars',
        '--enable-ha=false',
        '--log-format=json',
        '--log-level=trace',
      ]).filter((a) => !a.startsWith('--namespaces=') && !a.startsWith('--log-level=debug'));
      const svc = startService(args);
      await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
      const translated = svc.logs
        .filter((l) => l.msg === 'Stakater Reloader flag translated')
        .map((l) => l.flag);
      expect(translated).toEqual(
        expect.arrayContaining([
          expect.stringMatching(/^--resources-to-ignore=secrets → --ignore-resources=secrets/),
          '--is-Argo-Rollouts=false → --ignore-workload-kinds=Rollout',
          expect.stringMatching(/^--enable-ha=false → --leader-elect=false/),
        ]),
      );
      expect(svc.logs.some((l) => l.msg.startsWith('workload kind ignored') && l.kind === 'Rollout')).toBe(
        true,
      );
      // A Secret change reloads nothing: Secrets are not watched.
      await kube.core.replaceNamespacedSecret({
        name: 'creds',
        namespace: selected,
        body: { metadata: { name: 'creds' }, stringData: { p: '2' } },
      });
      // A ConfigMap change reloads in the selected namespace only.
      for (const ns of [ignored, selected]) {
        await kube.core.replaceNamespacedConfigMap({
          name: 'app',
          namespace: ns,
          body: configMap('app', { k: '2' }),
        });
      }
      const ev = await waitForEvent(kube, selected, 'Reloaded', 'web');
      expect(ev.message).toMatch(/^ConfigMap\/app changed;/);
      expect(ev.message).not.toContain('Secret/creds');
      expect(await events(kube, ignored, 'Reloaded')).toHaveLength(0);
      expect(await events(kube, selected, 'Reloaded')).toHaveLength(1);
    } finally {
      for (const ns of [selected, ignored]) await kube.core.deleteNamespace({ name: ns });
    }
  });

  it('stop start-up with a message naming what to do instead', async ({ namespace }) => {
    const svc = startService(serviceArgs(namespace, await hashKeyFile(), ['--enable-pprof=true']));
    expect(await svc.exited).toBe(2);
    expect(svc.text.join('')).toMatch(/--enable-pprof=true is refused: there is no Go pprof/);
  });

  it('read a custom annotation key (--configmap-annotation) instead of the default one', async ({
    kube,
    namespace,
  }) => {
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap('app', { k: '1' }) });
    for (const [name, key] of [
      ['custom', 'example.io/reload'],
      ['default', 'configmap.reloader.stakater.com/reload'],
    ] as const) {
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(name, {
          annotations: { [key]: 'app' },
          container: { envFrom: [{ configMapRef: { name: 'app' } }] },
        }),
      });
      await waitReadyPods(kube, namespace, name, 1);
    }
    const svc = startService(
      serviceArgs(namespace, await hashKeyFile(), [
        '--debounce=0s',
        '--configmap-annotation=example.io/reload',
      ]),
    );
    await svc.waitForLog('ready', (l) => l.msg === 'ready', 60_000);
    const change = await kube.core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: configMap('app', { k: '2' }),
    });
    await waitForEvent(kube, namespace, 'Reloaded', 'custom');
    // The default key is no longer read, as in Reloader with the flag.
    await decidedNoReload(svc, changeOf('ConfigMap', change), { workload: 'Deployment/default' });
    expect(await events(kube, namespace, 'Reloaded', 'default')).toHaveLength(0);

    // `plan` given the same flag reads the workloads as the service did.
    let out = '';
    await plan(
      [
        `--kubeconfig=${inject('kubeconfig')}`,
        `--namespace=${namespace}`,
        '--configmap=app',
        '--configmap-annotation=example.io/reload',
      ],
      {},
      (s) => {
        out += s;
      },
    );
    expect(out).toMatch(/Deployment\/custom +restart +named in configmap\.reloader\.stakater\.com\/reload/);
    expect(out).toMatch(/Deployment\/default +skip +not opted in/);
  });
});
