// Builders for the workload objects tests create. Images are never pulled: kwok fakes the kubelet.
import type {
  V1ConfigMap,
  V1Container,
  V1Deployment,
  V1Pod,
  V1StatefulSet,
  V1Volume,
} from '@kubernetes/client-node';

export interface DeploymentOptions {
  replicas?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  podAnnotations?: Record<string, string>;
  maxUnavailable?: number | string;
  maxSurge?: number | string;
  /** Merged into the single container: env, envFrom, volumeMounts… */
  container?: Partial<V1Container>;
  volumes?: V1Volume[];
}

export function deployment(name: string, o: DeploymentOptions = {}): V1Deployment {
  const labels = { app: name, ...o.labels };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      replicas: o.replicas ?? 1,
      selector: { matchLabels: { app: name } },
      ...(o.maxUnavailable !== undefined || o.maxSurge !== undefined
        ? {
            strategy: {
              type: 'RollingUpdate',
              rollingUpdate: {
                ...(o.maxUnavailable !== undefined ? { maxUnavailable: o.maxUnavailable } : {}),
                ...(o.maxSurge !== undefined ? { maxSurge: o.maxSurge } : {}),
              },
            },
          }
        : {}),
      template: {
        metadata: { labels, ...(o.podAnnotations ? { annotations: o.podAnnotations } : {}) },
        spec: {
          containers: [{ name: 'app', image: 'registry.invalid/app:1', ...o.container }],
          ...(o.volumes ? { volumes: o.volumes } : {}),
        },
      },
    },
  };
}

export function isReady(pod: V1Pod): boolean {
  return (
    !pod.metadata?.deletionTimestamp &&
    Boolean(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'))
  );
}

export function configMap(
  name: string,
  data: Record<string, string>,
  annotations?: Record<string, string>,
): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, ...(annotations ? { annotations } : {}) },
    data,
  };
}

export function statefulSet(
  name: string,
  replicas: number,
  o: {
    annotations?: Record<string, string>;
    podAnnotations?: Record<string, string>;
    container?: Partial<V1Container>;
  } = {},
): V1StatefulSet {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name, labels, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      replicas,
      serviceName: name,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, ...(o.podAnnotations ? { annotations: o.podAnnotations } : {}) },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1', ...o.container }] },
      },
    },
  };
}
