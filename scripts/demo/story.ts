// The demo's story, the same for either engine: the app deployed from git, gitops-reloader started,
// one commit changing a ConfigMap and a Secret, the engine applying it, the pods replaced once, live,
// and a summary.
import { AppsV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { modulesFor } from '../../test/cluster/control-plane.ts';
import { clusterPaths } from '../../test/cluster/paths.ts';
import { requirePrerequisites } from '../../test/cluster/prerequisites.ts';
import { onCleanUp } from './cleanup.ts';
import type { Clients, Engine } from './engine.ts';
import { ensureEnvironment } from './environment.ts';
import { bold, dim, say, short } from './output.ts';
import { APP_NAMESPACE, pods, readyPods, showReplacement } from './pods.ts';
import { createAppRepo } from './repo.ts';
import { startService } from './service.ts';
import { summarize } from './summary.ts';
import { until } from './wait.ts';

const RELEASE_NAMESPACE = 'gitops-reloader';

export async function tell(engine: Engine): Promise<void> {
  const startedMs = Date.now();
  const paths = clusterPaths();
  say(bold('gitops-reloader demo'));
  // Everything the machine must provide, checked in seconds, before a first build of 15 to 20 minutes.
  await requirePrerequisites(paths, { modules: modulesFor(engine.needs) });
  say(`1/6 ${engine.environment}`);
  const state = await ensureEnvironment(paths, engine.needs, engine.name);
  const kc = new KubeConfig();
  kc.loadFromFile(paths.kubeconfig);
  const clients: Clients = {
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
  };
  const { core, apps } = clients;
  const run = engine.open(state, clients);
  // Both engines read the app's repository from the git server the Argo CD part of the environment runs.
  const gitServer = state.argocd;
  if (!gitServer) throw new Error('Argo CD did not start');
  const repoUrl = `${gitServer.git}/demo-shop.git`;

  say(`2/6 push examples/demo to ${repoUrl} and let ${engine.name} ${engine.words.deployIt}`);
  await run.clearLeftovers();
  for (const ns of [APP_NAMESPACE, RELEASE_NAMESPACE]) {
    // Start clean: a namespace left by an earlier run is deleted (and awaited) first.
    await core.deleteNamespace({ name: ns }).catch(() => undefined);
    await until(`namespace ${ns} from an earlier run to be gone`, () =>
      core.readNamespace({ name: ns }).then(
        () => undefined,
        (e: { code?: number }) => (e.code === 404 ? true : undefined),
      ),
    );
  }
  await core.createNamespace({ body: { metadata: { name: RELEASE_NAMESPACE } } });
  onCleanUp(() => core.deleteNamespace({ name: RELEASE_NAMESPACE }));
  const repo = await createAppRepo(gitServer.gitRoot);
  const deployed = await run.deploy(repoUrl, repo.first);
  const before = await readyPods(core);
  const deploymentBefore = await apps.readNamespacedDeployment({ name: 'web', namespace: APP_NAMESPACE });
  say(dim(`    ${deployed}; 3/3 Ready: ${before.map((p) => p.name).join(', ')}`));

  say('3/6 start gitops-reloader serve');
  const svc = await startService({
    kubeconfig: paths.kubeconfig,
    releaseNamespace: RELEASE_NAMESPACE,
    flags: [...run.serviceFlags, '--debounce=1s', `--namespaces=${APP_NAMESPACE}`],
  });
  say(dim(`    ready; metrics at ${svc.url}/metrics; baseline recorded, nothing restarted`));

  say(`4/6 commit a change to the ConfigMap and the Secret; ${engine.name} ${engine.words.appliesIt}`);
  const second = await repo.changeConfigs();
  say(
    dim(
      `    committed ${short(second)}: web-config (feature.checkout=true) and web-secret (api-token rotated)`,
    ),
  );
  const applied = await run.apply(second);
  const unchanged = (await pods(core)).filter((p) => before.some((b) => b.uid === p.uid)).length;
  say(dim(`    ${applied}; ${unchanged}/3 old pods still serving (${engine.words.heldUntil})`));
  const appliedMs = Date.now();

  say('5/6 reload: each old pod replaced once, Ready count shown live');
  await showReplacement(core, before, appliedMs);
  const tookS = (Date.now() - appliedMs) / 1000;
  const engineState = await run.settled(second);

  say('6/6 summary');
  await summarize({
    clients,
    engine: { name: engine.name, oneChange: engine.words.oneChange },
    engineState,
    sha: second,
    before,
    generationBefore: deploymentBefore.metadata?.generation,
    templateBefore: JSON.stringify(deploymentBefore.spec?.template),
    metricsUrl: svc.url,
    tookS,
    startedMs,
  });
}
