// Creates the fixture: namespaces, the run's kwok nodes, ConfigMaps and Secrets, the Argo CD
// Applications of the sync phase, the Deployments; then waits until every pod runs and is Ready.

import { application, createApplication } from '../argocd.ts';
import { forEachBounded } from '../bounded.ts';
import { createNamespaces, createNodes, nodesFor } from '../cluster.ts';
import type { Context } from '../context.ts';
import { until } from '../context.ts';
import {
  appName,
  type ConfigName,
  configName,
  configObject,
  expectedPods,
  extraDeployments,
  FLAP_CONFIG,
  restartShapes,
  TRACKING_ANNOTATION,
  trackingId,
  workload,
  workloadDeployment,
} from '../fixture.ts';
import { layout } from '../scale.ts';

export interface SetupResult {
  nodes: number;
  configs_s: number;
  deployments_s: number;
  pods_ready_s: number;
  total_s: number;
}

export async function setUp(ctx: Context): Promise<SetupResult> {
  const { kube, scale: s, names: n } = ctx;
  const t0 = Date.now();
  const { configsPerNs } = layout(s);
  await createNamespaces(kube, n.run, n.all());
  const nodeCount = nodesFor(expectedPods(s));
  await createNodes(kube, n.run, nodeCount);
  ctx.say(`created ${n.all().length} namespaces and ${nodeCount} kwok nodes (tainted for this run)`);
  await ctx.pods.start();

  // Configs of the sync workloads carry their Application's tracking id.
  const tracked = new Map<string, string>();
  for (const i of ctx.alloc.syncs) {
    const w = workload(n, s, i);
    for (const c of [w.envFrom, w.keyRef, w.volume])
      tracked.set(`${c.kind}/${c.namespace}/${c.name}`, trackingId(appName(w), c));
  }
  const configs: ConfigName[] = [];
  for (const namespace of n.workNamespaces) {
    for (let slot = 0; slot < configsPerNs; slot++) {
      configs.push({ kind: 'ConfigMap', namespace, name: configName('ConfigMap', slot) });
      configs.push({ kind: 'Secret', namespace, name: configName('Secret', slot) });
    }
  }
  for (const shape of restartShapes(s))
    configs.push({ kind: 'ConfigMap', namespace: n.extra, name: shape.config });
  configs.push({ kind: 'ConfigMap', namespace: n.extra, name: FLAP_CONFIG });
  let last = Date.now();
  await forEachBounded(
    configs,
    s.inFlight,
    async (c) => {
      const id = tracked.get(`${c.kind}/${c.namespace}/${c.name}`);
      const body = configObject(c, s.configBytes, id ? { [TRACKING_ANNOTATION]: id } : undefined);
      if (c.kind === 'ConfigMap') await kube.core.createNamespacedConfigMap({ namespace: c.namespace, body });
      else await kube.core.createNamespacedSecret({ namespace: c.namespace, body });
    },
    (done) => {
      if (Date.now() - last > 5000) {
        last = Date.now();
        ctx.say(`configs: ${done}/${configs.length}`);
      }
    },
  );
  const configsAt = Date.now();
  ctx.say(`created ${configs.length} ConfigMaps and Secrets in ${((configsAt - t0) / 1000).toFixed(1)}s`);

  for (const i of ctx.alloc.syncs) {
    const w = workload(n, s, i);
    await createApplication(kube, application(appName(w), n.argocd, w.namespace));
  }

  // The native side of the bulk comparison: identical Deployments, not opted in.
  const native = new Set(ctx.alloc.bulkNative.flat());
  const deployments = [
    ...Array.from({ length: s.deployments }, (_, i) =>
      workloadDeployment(n.run, workload(n, s, i), s.replicas, !native.has(i)),
    ),
    ...extraDeployments(n, s),
  ];
  await forEachBounded(
    deployments,
    s.inFlight,
    async (d) => {
      await kube.apps.createNamespacedDeployment({ namespace: d.metadata?.namespace as string, body: d });
    },
    (done) => {
      if (Date.now() - last > 5000) {
        last = Date.now();
        ctx.say(`deployments: ${done}/${deployments.length}`);
      }
    },
  );
  const deploymentsAt = Date.now();
  ctx.say(`created ${deployments.length} Deployments in ${((deploymentsAt - configsAt) / 1000).toFixed(1)}s`);

  const want = expectedPods(s);
  last = Date.now();
  await until(`${want} Ready pods`, 60 * 60_000, () => {
    const c = ctx.pods.liveCount();
    if (Date.now() - last > 5000) {
      last = Date.now();
      ctx.say(`pods: ${c.ready}/${want} Ready (${c.live} exist)`);
    }
    return c.ready === want && c.live === want ? c : undefined;
  });
  const podsAt = Date.now();
  ctx.say(`${want} pods Ready after ${((podsAt - deploymentsAt) / 1000).toFixed(1)}s`);
  return {
    nodes: nodeCount,
    configs_s: (configsAt - t0) / 1000,
    deployments_s: (deploymentsAt - configsAt) / 1000,
    pods_ready_s: (podsAt - deploymentsAt) / 1000,
    total_s: (podsAt - t0) / 1000,
  };
}
