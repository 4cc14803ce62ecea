// The closed sets of values some flags accept, shared by the configuration that validates them and
// the modules that act on them. They live here, below both, so configuration imports no feature.

/** How a config is mapped to its Argo CD Application (--argocd-tracking). */
export const TRACKING_METHODS = ['annotation', 'label', 'annotation+label'] as const;
export type TrackingMethod = (typeof TRACKING_METHODS)[number];

/** The label Argo CD's label tracking writes by default (application.instanceLabelKey). */
export const DEFAULT_TRACKING_LABEL = 'app.kubernetes.io/instance';

/** What a Failed or Errored sync does to the changes it held (--argocd-on-failed-sync). */
export const FAILED_SYNC_POLICIES = ['reload', 'hold'] as const;
export type FailedSyncPolicy = (typeof FAILED_SYNC_POLICIES)[number];

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/** Stakater Reloader's extra --log-level values (logrus), read as the nearest of ours. */
export const RELOADER_LOG_LEVELS = ['trace', 'warning', 'fatal', 'panic'] as const;

/** Config kinds --ignore-resources may leave unwatched (Reloader's --resources-to-ignore values). */
export const CONFIG_RESOURCE_NAMES = ['configmaps', 'secrets'] as const;
export type ConfigResourceName = (typeof CONFIG_RESOURCE_NAMES)[number];

/** Workload kinds --ignore-workload-kinds accepts. */
export const WORKLOAD_KIND_NAMES = [
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'CronJob',
  'Job',
  'Rollout',
] as const;
export type WorkloadKindName = (typeof WORKLOAD_KIND_NAMES)[number];
