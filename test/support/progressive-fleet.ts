// The fleet the progressive-reload tests share (test/progressive/): a ConfigMap `shared` whose
// `health` key the pods read at start (bad: the pods admitted meanwhile never become Ready, see
// app-health.ts), workloads that read it (and any other configs), the canary first by priority, all
// Ready, their pods tracked.
import { onTestFinished } from 'vitest';
import { readsConfigAtStart } from './app-health.ts';
import type { Kube } from './kube.ts';
import { PodTracker, type PodView, waitReadyPods } from './observe.ts';
import { configMap, deployment, statefulSet } from './workloads.ts';

/** The pod label of the app that reads `shared` at start. */
export const READS = { key: 'reads-config', value: 'shared' };
const AUTO = { 'reloader.stakater.com/auto': 'true' };

/** Replaces a ConfigMap's data. */
export async function setConfig(kube: Kube, namespace: string, name: string, data: Record<string, string>) {
  await kube.core.replaceNamespacedConfigMap({ name, namespace, body: configMap(name, data) });
}

/** Sets `shared`'s health: `bad` makes the pods admitted from now on fail readiness. */
export async function setHealth(kube: Kube, namespace: string, value: string) {
  await setConfig(kube, namespace, 'shared', { health: value });
}

/** `shared` (good), and the app of the pods labelled READS reading its health at start (until the test ends). */
export async function sharedHealth(kube: Kube, namespace: string): Promise<void> {
  await kube.core.createNamespacedConfigMap({ namespace, body: configMap('shared', { health: 'good' }) });
  const health = await readsConfigAtStart(kube, namespace, {
    config: 'shared',
    key: 'health',
    bad: 'bad',
    podLabel: READS,
  });
  onTestFinished(health.remove);
}

export interface FleetApp {
  name: string;
  /** The ConfigMaps it reads (envFrom). Default: `shared`. Only readers of `shared` read its health. */
  configs?: string[];
  kind?: 'Deployment' | 'StatefulSet';
}

export interface FleetOptions {
  /** The first wave: reload-priority 100. */
  canary: string;
  replicas: number;
  /** Other ConfigMaps to create first, by name. */
  configs?: Record<string, Record<string, string>>;
}

export interface Fleet {
  /** Each app's pods before any change, Ready. */
  before: Map<string, PodView[]>;
  trackers: Map<string, PodTracker>;
}

/** `shared` (good), the other configs, the app that reads `shared` at start, and the apps Ready. */
export async function progressiveFleet(
  kube: Kube,
  namespace: string,
  apps: ReadonlyArray<string | FleetApp>,
  o: FleetOptions,
): Promise<Fleet> {
  for (const [name, data] of Object.entries(o.configs ?? {}))
    await kube.core.createNamespacedConfigMap({ namespace, body: configMap(name, data) });
  await sharedHealth(kube, namespace);
  const list = apps.map((a) => (typeof a === 'string' ? { name: a } : a));
  for (const app of list) {
    const configs = app.configs ?? ['shared'];
    const annotations = {
      ...AUTO,
      ...(app.name === o.canary ? { 'gitops-reloader.io/reload-priority': '100' } : {}),
    };
    const container = { envFrom: configs.map((name) => ({ configMapRef: { name } })) };
    const reads = configs.includes('shared') ? { [READS.key]: READS.value } : {};
    if (app.kind === 'StatefulSet') {
      const body = statefulSet(app.name, o.replicas, { annotations, container });
      const template = body.spec?.template.metadata;
      if (template) template.labels = { ...template.labels, ...reads };
      await kube.apps.createNamespacedStatefulSet({ namespace, body });
    } else
      await kube.apps.createNamespacedDeployment({
        namespace,
        body: deployment(app.name, { replicas: o.replicas, labels: reads, annotations, container }),
      });
  }
  const before = new Map<string, PodView[]>();
  for (const app of list) before.set(app.name, await waitReadyPods(kube, namespace, app.name, o.replicas));
  const trackers = new Map<string, PodTracker>();
  for (const app of list) trackers.set(app.name, await PodTracker.start(kube, namespace, app.name));
  onTestFinished(() => {
    for (const t of trackers.values()) t.stop();
  });
  return { before, trackers };
}
