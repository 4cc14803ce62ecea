// The bench fixture: ConfigMaps and Secrets of about 2 KiB, Deployments that each use three of them
// (envFrom, a valueFrom key ref, a volume), the Argo CD Applications that track some of them, and
// the Deployment pairs of the restart comparison. Names and roles are pure functions of
// the scale, so every phase can find its objects without listing.
import { randomBytes } from 'node:crypto';
import type {
  V1ConfigMap,
  V1Container,
  V1Deployment,
  V1DeploymentStrategy,
  V1Secret,
  V1Volume,
} from '@kubernetes/client-node';
import type { Scale } from './scale.ts';
import { layout } from './scale.ts';

export const BENCH_LABEL = 'gitops-reloader.io/bench';
export const RUN_POD_LABEL = 'grb-run';
export const AUTO = { 'gitops-reloader.io/auto': 'true' };
export const TRACKING_ANNOTATION = 'argocd.argoproj.io/tracking-id';

export type ConfigKind = 'ConfigMap' | 'Secret';

export interface ConfigName {
  kind: ConfigKind;
  namespace: string;
  name: string;
}

/** One fixture Deployment and the three configs it uses, by role. */
export interface Workload {
  /** Global index: 0..deployments-1, interleaved over namespaces. */
  index: number;
  namespace: string;
  name: string;
  /** envFrom: every key matters. */
  envFrom: ConfigName;
  /** valueFrom: only key k0 matters. */
  keyRef: ConfigName;
  /** a volume: every key matters. */
  volume: ConfigName;
}

export interface Names {
  run: string;
  /** Namespaces holding the configs and Deployments. */
  workNamespaces: string[];
  /** The service's release namespace (ledger, lease). */
  system: string;
  /** Where the Argo CD Applications live (--argocd-namespaces). */
  argocd: string;
  /** The restart comparison and the flapping config. */
  extra: string;
  /** The progressive phase: Deployments sharing one ConfigMap. */
  progressive: string;
  all(): string[];
}

export function names(run: string, s: Scale): Names {
  const workNamespaces = Array.from({ length: s.namespaces }, (_, k) => `grb-${run}-w${pad(k, 2)}`);
  const system = `grb-${run}-sys`;
  const argocd = `grb-${run}-argocd`;
  const extra = `grb-${run}-x`;
  const progressive = `grb-${run}-p`;
  return {
    run,
    workNamespaces,
    system,
    argocd,
    extra,
    progressive,
    all: () => [...workNamespaces, system, argocd, extra, progressive],
  };
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

export const configName = (kind: ConfigKind, slot: number) =>
  `${kind === 'ConfigMap' ? 'cm' : 'sec'}-${pad(slot, 4)}`;

export function workload(n: Names, s: Scale, index: number): Workload {
  const { deploymentsPerNs: d } = layout(s);
  const namespace = n.workNamespaces[index % s.namespaces] as string;
  const i = Math.floor(index / s.namespaces);
  const c = (kind: ConfigKind, slot: number): ConfigName => ({
    kind,
    namespace,
    name: configName(kind, slot),
  });
  return {
    index,
    namespace,
    name: `d-${pad(i, 4)}`,
    envFrom: c(i % 2 === 0 ? 'ConfigMap' : 'Secret', i),
    keyRef: c(i % 2 === 0 ? 'Secret' : 'ConfigMap', d + i),
    volume: c(i % 4 < 2 ? 'ConfigMap' : 'Secret', 2 * d + i),
  };
}

/** Which workloads each phase uses: disjoint ranges, so no phase sees another's reloads. */
export interface Allocation {
  latency: number[];
  latencyDefault: number[];
  syncs: number[];
  bursts: number[];
  probes: number[];
  bulk: number[][];
  /** Not opted in: the native rolling update of an identical set, one set per run. */
  bulkNative: number[][];
}

export function allocate(s: Scale): Allocation {
  layout(s);
  let next = 0;
  const take = (n: number) => Array.from({ length: n }, () => next++);
  return {
    latency: take(s.latencyChanges),
    latencyDefault: take(s.latencyDefaultChanges),
    syncs: take(s.syncs),
    bursts: take(s.bursts),
    probes: take(s.probes),
    bulk: Array.from({ length: s.bulkRuns }, () => take(s.bulkDeployments)),
    bulkNative: Array.from({ length: s.bulkRuns }, () => take(s.bulkDeployments)),
  };
}

export const appName = (w: Workload) => `grb-app-${pad(w.index, 4)}`;

export function trackingId(app: string, c: ConfigName): string {
  return `${app}:/${c.kind}:${c.namespace}/${c.name}`;
}

/** About `bytes` of printable filler: 4 keys k0..k3. */
export function configData(bytes: number, salt = ''): Record<string, string> {
  const per = Math.max(16, Math.floor(bytes / 4));
  const out: Record<string, string> = {};
  for (let k = 0; k < 4; k++) out[`k${k}`] = `${salt}${randomBytes(per).toString('base64')}`.slice(0, per);
  return out;
}

export function configObject(
  c: ConfigName,
  bytes: number,
  annotations?: Record<string, string>,
): V1ConfigMap | V1Secret {
  const metadata = { name: c.name, namespace: c.namespace, ...(annotations ? { annotations } : {}) };
  const data = configData(bytes);
  if (c.kind === 'ConfigMap') return { apiVersion: 'v1', kind: 'ConfigMap', metadata, data };
  // Secret data is base64 on the wire; keep the encoded size near `bytes` too.
  const b64: Record<string, string> = {};
  for (const [k, v] of Object.entries(data))
    b64[k] = Buffer.from(v.slice(0, Math.floor((v.length * 3) / 4))).toString('base64');
  return { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata, data: b64 };
}

/** Pods of the run land only on the run's own kwok nodes (tainted, so nobody else's pods do). */
export function placement(run: string) {
  return {
    nodeSelector: { [BENCH_LABEL]: run },
    tolerations: [{ key: BENCH_LABEL, operator: 'Equal', value: run, effect: 'NoSchedule' }],
  };
}

export interface DeploymentSpec {
  run: string;
  namespace: string;
  name: string;
  replicas: number;
  annotations?: Record<string, string>;
  strategy?: V1DeploymentStrategy;
  container: Partial<V1Container>;
  volumes?: V1Volume[];
}

export function deploymentObject(o: DeploymentSpec): V1Deployment {
  const labels = { app: o.name, [RUN_POD_LABEL]: o.run };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: o.name,
      namespace: o.namespace,
      labels,
      ...(o.annotations ? { annotations: o.annotations } : {}),
    },
    spec: {
      replicas: o.replicas,
      ...(o.strategy ? { strategy: o.strategy } : {}),
      selector: { matchLabels: { app: o.name } },
      template: {
        metadata: { labels },
        spec: {
          ...placement(o.run),
          containers: [{ name: 'app', image: 'registry.invalid/app:1', ...o.container }],
          ...(o.volumes ? { volumes: o.volumes } : {}),
        },
      },
    },
  };
}

/** A fixture Deployment; `optIn` false leaves out the opt-in annotation (the native comparison's). */
export function workloadDeployment(run: string, w: Workload, replicas: number, optIn = true): V1Deployment {
  const envFrom =
    w.envFrom.kind === 'ConfigMap'
      ? { configMapRef: { name: w.envFrom.name } }
      : { secretRef: { name: w.envFrom.name } };
  const valueFrom =
    w.keyRef.kind === 'ConfigMap'
      ? { configMapKeyRef: { name: w.keyRef.name, key: 'k0' } }
      : { secretKeyRef: { name: w.keyRef.name, key: 'k0' } };
  const volume: V1Volume =
    w.volume.kind === 'ConfigMap'
      ? { name: 'files', configMap: { name: w.volume.name } }
      : { name: 'files', secret: { secretName: w.volume.name } };
  return deploymentObject({
    run,
    namespace: w.namespace,
    name: w.name,
    replicas,
    ...(optIn ? { annotations: AUTO } : {}),
    container: {
      envFrom: [envFrom],
      env: [{ name: 'K0', valueFrom }],
      volumeMounts: [{ name: 'files', mountPath: '/etc/files' }],
    },
    volumes: [volume],
  });
}

/**
 * The restart comparison, one pair of identical Deployments per shape: ours is opted in and reloaded
 * by the service when its config changes, native is not opted in and is rolled by a template patch.
 */
export interface RestartShape {
  /** The key of the figures: the strategy and size, as issue 15 names them. */
  key: string;
  ours: string;
  native: string;
  /** The ConfigMap both use; only ours reacts to it. */
  config: string;
  replicas: number;
  /** spec.strategy.rollingUpdate, or undefined for the default (25 % / 25 %). */
  rollingUpdate?: { maxSurge: number | string; maxUnavailable: number | string };
}

export function restartShapes(s: Scale): RestartShape[] {
  return [
    // The original pair keeps its names, so earlier results stay comparable.
    {
      key: 'maxSurge=25%/maxUnavailable=25%',
      ours: 'restart-ours',
      native: 'restart-native',
      config: 'restart-config',
      replicas: s.restartReplicas,
      rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' },
    },
    {
      key: 'maxSurge=1/maxUnavailable=0',
      ours: 'restart-surge1-ours',
      native: 'restart-surge1-native',
      config: 'restart-surge1-config',
      replicas: s.restartReplicas,
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    },
    {
      key: 'replicas=1',
      ours: 'restart-single-ours',
      native: 'restart-single-native',
      config: 'restart-single-config',
      replicas: 1,
    },
  ];
}

/** The ConfigMap that every Deployment of the progressive phase reads (envFrom). */
export const PROGRESSIVE_CONFIG = 'shared-config';
/** Its key that the pods read at start; the value `bad` makes the pods admitted meanwhile never Ready. */
export const PROGRESSIVE_KEY = 'health';

export const progressiveName = (i: number) => `p-${pad(i, 3)}`;

/** One Deployment of the progressive phase: default strategy, opted in, reads the shared ConfigMap. */
export function progressiveDeployment(n: Names, s: Scale, i: number): V1Deployment {
  return deploymentObject({
    run: n.run,
    namespace: n.progressive,
    name: progressiveName(i),
    replicas: s.replicas,
    annotations: AUTO,
    container: { envFrom: [{ configMapRef: { name: PROGRESSIVE_CONFIG } }] },
  });
}

export const FLAP = 'flap';
export const FLAP_CONFIG = 'flap-config';

export function extraDeployments(n: Names, s: Scale): V1Deployment[] {
  const uses = (cfg: string) => ({
    container: { envFrom: [{ configMapRef: { name: cfg } }] },
  });
  const strategy = (r: RestartShape['rollingUpdate']) =>
    r ? { strategy: { type: 'RollingUpdate', rollingUpdate: r } } : {};
  return [
    ...restartShapes(s).flatMap((shape) => [
      deploymentObject({
        run: n.run,
        namespace: n.extra,
        name: shape.ours,
        replicas: shape.replicas,
        annotations: AUTO,
        ...strategy(shape.rollingUpdate),
        ...uses(shape.config),
      }),
      // Identical pod template and strategy, but not opted in: only its template patch rolls it.
      deploymentObject({
        run: n.run,
        namespace: n.extra,
        name: shape.native,
        replicas: shape.replicas,
        ...strategy(shape.rollingUpdate),
        ...uses(shape.config),
      }),
    ]),
    deploymentObject({
      run: n.run,
      namespace: n.extra,
      name: FLAP,
      replicas: s.replicas,
      annotations: AUTO,
      ...uses(FLAP_CONFIG),
    }),
  ];
}

/** Pods the fixture runs when settled: the workloads, both sides of each restart shape, flap. */
export function expectedPods(s: Scale): number {
  const restart = restartShapes(s).reduce((a, shape) => a + 2 * shape.replicas, 0);
  return s.deployments * s.replicas + restart + s.replicas;
}
