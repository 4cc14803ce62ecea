// The service's configuration: one validated object built at start-up from flags and env, then
// passed to every part. No module reads process.env on its own.

import type { AnnotationAliases } from '../core/annotation-keys.ts';
import { RELOAD_STRATEGIES, type ReloadStrategy } from '../core/types.ts';
import { type AlertConfig, alertConfig, alertFlags } from './alert-flags.ts';
import {
  CONFIG_RESOURCE_NAMES,
  type ConfigResourceName,
  DEFAULT_TRACKING_LABEL,
  FAILED_SYNC_POLICIES,
  type FailedSyncPolicy,
  LOG_LEVELS,
  type LogLevel,
  RELOADER_LOG_LEVELS,
  TRACKING_METHODS,
  type TrackingMethod,
  WORKLOAD_KIND_NAMES,
  type WorkloadKindName,
} from './choices.ts';
import { FlagError, type FlagSpec, type FlagValue, parseFlags } from './flags.ts';
import { readKeyFile } from './hash-key.ts';
import { reloaderFlags, reloaderSelectorFlag, translateReloaderFlags } from './reloader-flags.ts';

export type Strategy = ReloadStrategy;

export const serveFlags: readonly FlagSpec[] = [
  {
    name: 'kubeconfig',
    type: 'string',
    help: 'Path to a kubeconfig. Unset: in-cluster config, then $KUBECONFIG, then ~/.kube/config.',
  },
  {
    name: 'namespaces',
    type: 'list',
    help: 'Only watch these namespaces (comma list). Unset: all namespaces.',
  },
  {
    name: 'namespace-selector',
    type: 'list',
    help: 'Only act in namespaces whose labels match this selector, e.g. "reload=enabled". Repeatable (all must match); Reloader\'s key:value form and quoted values are read as Reloader reads them.',
  },
  { name: 'ignore-namespaces', type: 'list', help: 'Never act in these namespaces (comma list).' },
  {
    name: 'resource-label-selector',
    type: 'list',
    help: 'Only watch ConfigMaps and Secrets with labels matching this selector. Repeatable (all must match), read as --namespace-selector.',
  },
  {
    name: 'ignore-configmaps',
    type: 'list',
    help: 'ConfigMaps that never trigger a reload: names or anchored regexes (comma list).',
    default: 'kube-root-ca.crt',
  },
  {
    name: 'ignore-secrets',
    type: 'list',
    help: 'Secrets that never trigger a reload: names or anchored regexes (comma list).',
  },
  {
    name: 'ignore-resources',
    type: 'list',
    help: 'Do not watch these config kinds at all: configmaps or secrets (comma list). Also needs no RBAC on them.',
  },
  {
    name: 'ignore-workload-kinds',
    type: 'list',
    help: `Never reload workloads of these kinds, and do not watch them (comma list of ${WORKLOAD_KIND_NAMES.join(', ')}).`,
  },
  {
    name: 'auto-reload-all',
    type: 'bool',
    help: 'Treat every workload as annotated with gitops-reloader.io/auto=true unless it says auto=false.',
    default: 'false',
  },
  {
    name: 'default-strategy',
    type: 'enum',
    values: RELOAD_STRATEGIES,
    help: 'Strategy for workloads without gitops-reloader.io/strategy.',
    default: 'restart',
  },
  {
    name: 'debounce',
    type: 'duration',
    help: 'Quiet period per workload: changes within it become one reload.',
    default: '3s',
  },
  {
    name: 'max-debounce-wait',
    type: 'duration',
    help: 'Longest a change waits for the debounce to settle before the reload starts anyway.',
    default: '30s',
    min: 0,
  },
  {
    name: 'max-concurrent-reloads',
    type: 'int',
    help: 'Reloads running at once across all workloads (each holds two watches while it runs); one namespace gets at most ⌊(this − 1) / 2⌋ of them (at least 1), so two namespaces with stuck reloads always leave a slot for a third. The API server is protected by --api-write-qps, not by this.',
    default: '20',
    min: 1,
  },
  {
    name: 'api-write-qps',
    type: 'int',
    help: "Sustained API writes per second, shared by every reload (evictions, pod creates and deletes, ledger writes, Events; not Lease renewals, not reads). The kube-controller-manager's own client default is 20.",
    default: '20',
    min: 1,
  },
  {
    name: 'api-write-burst',
    type: 'int',
    help: 'API writes that may go out at once after a quiet spell, before --api-write-qps paces them.',
    default: '30',
    min: 1,
  },
  {
    name: 'min-reload-interval',
    type: 'duration',
    help: 'Least time between two reloads of one workload (protects against flapping configs); later changes wait, they are not dropped.',
    default: '10s',
  },
  {
    name: 'stall-after',
    type: 'duration',
    help: 'A reload blocked this long (e.g. by a PodDisruptionBudget) gets a ReloadStalled Event.',
    default: '30s',
  },
  {
    name: 'reload-on-delete',
    type: 'bool',
    help: "A deleted ConfigMap or Secret a workload references is a change that reloads it (Stakater Reloader's flag, same name and default). Off: a deletion changes nothing, and the config's next content is compared with the one the pods run. Either way a reload never replaces pods while a config they need (not optional) is missing: it is held, with a ReloadHeld Warning Event, until the config exists again.",
    default: 'false',
  },
  {
    name: 'run-suspended-cronjobs',
    type: 'bool',
    help: 'A reload of a suspended CronJob runs its Job anyway, as Stakater Reloader does. Off: a suspended CronJob gets no Job (a ReloadSkipped Event), and its first Job after it resumes reads the new config.',
    default: 'false',
  },
  {
    name: 'reloader-compat',
    type: 'bool',
    help: "Keep Stakater Reloader's observable surfaces for alerts and probes that key on them: the failure Event reason ReloadFail (not ReloadFailed), and the HTTP port :9090 (unless --http-address is given). /live (Reloader's liveness path) is served either way. `migrate` turns it on.",
    default: 'false',
  },
  {
    name: 'include-helm-release-secrets',
    type: 'bool',
    help: 'Also watch Secrets of type helm.sh/release.v1 (Helm release records, up to 1 MiB each). Off: the API server leaves them out of every LIST and watch.',
    default: 'false',
  },
  {
    name: 'surge-sweep-interval',
    type: 'duration',
    help: 'How often the leader deletes surge pods that no pending reload needs (left by a crash, a dropped reload, or in a namespace that left the scope); with --dry-run it only reports them.',
    default: '1m',
    min: 1000,
  },
  {
    name: 'reload-deadline',
    type: 'duration',
    help: 'A reload that makes no progress (no pod evicted, no surge pod created) for this long gives its slot back and is retried with backoff (a ReloadStalled Event each time); the pods it already replaced stay replaced. Progress starts the period again, so a slow restart that keeps replacing pods is never cut: set it above the time one pod takes to be replaced (its shutdown and its start).',
    default: '5m',
    min: 1000,
  },
  {
    name: 'restart-budget',
    type: 'int',
    help: 'Most pods the restarts replace per minute in the whole cluster (0: no ceiling), on top of --api-write-qps. A reload waiting for its turn is not stalled: --reload-deadline does not cut it.',
    default: '0',
    min: 0,
  },
  {
    name: 'restart-budget-per-namespace',
    type: 'int',
    help: 'Most pods the restarts replace per minute in one namespace (0: no ceiling).',
    default: '0',
    min: 0,
  },
  {
    name: 'flap-changes',
    type: 'int',
    help: 'A ConfigMap or Secret whose data changes this many times within --flap-window is flapping: one ConfigFlapping Warning Event on it per episode, naming the field managers that wrote it. Its workloads still restart at most once per --min-reload-interval.',
    default: '5',
    min: 2,
  },
  {
    name: 'flap-window',
    type: 'duration',
    help: 'The window of --flap-changes.',
    default: '1m',
    min: 1000,
  },
  {
    name: 'brake',
    type: 'bool',
    help: 'The emergency brake: no reload starts, in any namespace (a ReloadHeld Warning on each workload held). Changes are kept, not applied: when the brake is released (the service restarts without it), every held change is found at start-up and reloaded once, and an interrupted reload resumes from its pods.',
    default: 'false',
  },
  {
    name: 'brake-allows-requests',
    type: 'bool',
    help: 'While --brake is set, still run the reloads a person asks for with the Argo CD "reload (drift-free)" action.',
    default: 'false',
  },
  {
    name: 'progressive-reloads',
    type: 'bool',
    help: 'Reload the workloads of one config change in waves (docs/progressive-reloads.md): a first wave, then waves twice as large, each started when the one before completed, the second only after the first stayed healthy for --progressive-settle. A wave that fails (its reload makes no progress for --reload-deadline, or its pods are not Ready or restart while settling) halts the change: nothing more starts for it until a newer change of the config. A workload opts out with gitops-reloader.io/progressive: "false"; --progressive-reloads=false turns it off.',
    default: 'true',
  },
  {
    name: 'progressive-first-wave',
    type: 'int',
    help: 'Workloads in the first wave of a progressive reload (the highest gitops-reloader.io/reload-priority first, then namespace, then name).',
    default: '1',
    min: 1,
  },
  {
    name: 'progressive-settle',
    type: 'duration',
    help: "How long a progressive reload's replaced pods must stay Ready, with no container restart, before the wave passes.",
    default: '30s',
    min: 0,
  },
  {
    name: 'progressive-gather',
    type: 'duration',
    help: "How long a progressive reload waits, after a change's first reload is ready to start, for the other workloads of the change before it chooses the first wave (their batches come together when they share the debounce; raise it when workloads set their own gitops-reloader.io/debounce).",
    default: '500ms',
    min: 0,
  },
  {
    name: 'release-namespace',
    type: 'string',
    help: "The service's own namespace (ledger, lease, hash key). Defaults to $POD_NAMESPACE.",
  },
  {
    name: 'release-name',
    type: 'string',
    help: 'Prefix for the objects the service owns (ledger ConfigMaps, lease, hash-key Secret).',
    default: 'gitops-reloader',
  },
  {
    name: 'hash-key-file',
    type: 'string',
    help: 'File holding the HMAC key (≥32 bytes) for config digests. Unset: read Secret <release-name>-hash-key, key "key", in the release namespace.',
  },
  {
    name: 'create-hash-key',
    type: 'bool',
    help: 'Without --hash-key-file: create the Secret <release-name>-hash-key with a random key when it does not exist (needs create on secrets in the release namespace).',
    default: 'true',
  },
  { name: 'ledger-shards', type: 'int', help: 'Number of ledger ConfigMaps.', default: '16', min: 1 },
  {
    name: 'relist-interval',
    type: 'duration',
    help: 'Full relist of every watch, to repair anything a watch missed.',
    default: '10m',
    min: 1000,
  },
  {
    name: 'watch-idle-timeout',
    type: 'duration',
    help: 'Restart a watch that delivered nothing, not even a bookmark, for this long.',
    default: '3m',
    min: 1000,
  },
  {
    name: 'watch-http2',
    type: 'bool',
    help: 'Carry every watch of one API server as a stream of one HTTP/2 connection when the server offers h2 (TLS ALPN); a server or proxy that does not gets HTTP/1.1, a connection per watch. false: HTTP/1.1 always (docs/adr/0046).',
    default: 'true',
  },
  {
    name: 'argocd-namespaces',
    type: 'list',
    help: "Namespaces whose Argo CD Applications are watched (comma list); the first is Argo CD's own, where apps are tracked by bare name. Empty: no Application watch.",
    default: 'argocd',
  },
  {
    name: 'argocd-tracking',
    type: 'enum',
    values: TRACKING_METHODS,
    help: 'How a config is mapped to its Application: the argocd.argoproj.io/tracking-id annotation, the instance label, or the annotation with the label as fallback.',
    default: 'annotation+label',
  },
  {
    name: 'argocd-tracking-label',
    type: 'string',
    help: "The label Argo CD's label tracking writes (application.instanceLabelKey).",
    default: DEFAULT_TRACKING_LABEL,
  },
  {
    name: 'argocd-on-failed-sync',
    type: 'enum',
    values: FAILED_SYNC_POLICIES,
    help: "After a Failed or Errored sync: reload what changed anyway, or hold it until the app's next successful sync.",
    default: 'reload',
  },
  {
    name: 'hub',
    type: 'bool',
    help: 'Hub mode: serve the clusters whose Argo CD cluster Secret (in the first --argocd-namespaces) is labelled gitops-reloader.io/serve=true, each with its own engine and Lease, instead of the cluster the service runs in (docs/hub-mode.md).',
    default: 'false',
  },
  {
    name: 'hub-exec-commands',
    type: 'list',
    help: "Hub mode: the exec credential plugins (absolute paths, comma list) that the execProviderConfig of a credentials Secret of ours (release namespace) may run; a cluster Secret's is never run. Empty: none is run.",
    default: '',
  },
  {
    name: 'hub-write-qps',
    type: 'int',
    help: "Hub mode: sustained writes per second to the hub's own API server, shared by every served cluster's engine in this replica (ledger, Job records, Events there; not Lease renewals). Each served cluster's own API server keeps --api-write-qps.",
    default: '50',
    min: 1,
  },
  {
    name: 'hub-write-burst',
    type: 'int',
    help: "Hub mode: writes to the hub's own API server that may go out at once after a quiet spell, before --hub-write-qps paces them.",
    default: '100',
    min: 1,
  },
  {
    name: 'hub-standby-clusters',
    type: 'int',
    help: 'Hub mode: how many clusters led by other replicas this replica keeps a warm engine for (watches and caches synced), those it would take first if their replica died. A replica runs engines only for the clusters it leads and these; a cold one takes over within a lease duration plus one list of its cluster (docs/hub-mode.md).',
    default: '8',
    min: 0,
  },
  {
    name: 'flux-namespaces',
    type: 'list',
    help: 'Namespaces whose Flux Kustomizations, HelmReleases and sources are watched (comma list). Empty: no Flux watch.',
    default: 'flux-system',
  },
  {
    name: 'flux-depends-on-as-one',
    type: 'bool',
    help: 'Kustomizations (and HelmReleases) joined by dependsOn count as one change: what a revision changes in any of them reloads once, after the last one applied it.',
    default: 'false',
  },
  {
    name: 'flux-on-failed-apply',
    type: 'enum',
    values: FAILED_SYNC_POLICIES,
    help: 'After a failed Flux reconciliation: reload what changed anyway, or hold it until the next successful one.',
    default: 'reload',
  },
  {
    name: 'flux-webhook-token-file',
    type: 'string',
    help: "File holding the key of Flux's generic-hmac Provider (or the bearer token a generic Provider sends). Unset: the Flux event endpoint is off.",
  },
  {
    name: 'webhook-token-file',
    type: 'string',
    help: 'File holding the bearer token Argo CD notifications must send. Unset: the notification webhook is off.',
  },
  {
    name: 'notification-record-max-age',
    type: 'duration',
    help: "Age at which the leader deletes a notification inbox record whatever it says (a sync whose end never arrived); checked continuously, so such records cannot fill the inbox's 500 places. The Argo CD gate stops holding an app's changes after 10m without an end.",
    default: '10m',
    min: 1000,
  },
  {
    name: 'webhook-url',
    type: 'string',
    help: "Instead of reloading, POST each reload's details (workload, changed configs, cutoff) as JSON to this http(s) URL. Stakater Reloader's flag of the same name.",
  },
  {
    name: 'webhook-secret-file',
    type: 'string',
    help: 'File holding the HMAC-SHA256 key (≥32 bytes) that signs each --webhook-url POST in the X-Gitops-Reloader-Signature header. Unset: requests are not signed.',
  },
  {
    name: 'webhook-timeout',
    type: 'duration',
    help: 'Time one --webhook-url POST may take before it counts as failed.',
    default: '10s',
    min: 100,
  },
  {
    name: 'webhook-retries',
    type: 'int',
    help: 'Retries of a --webhook-url POST that failed (network error, timeout, HTTP 429 or 5xx), with backoff; then the reload counts as failed and is retried later.',
    default: '3',
    min: 0,
  },
  {
    name: 'metrics-count-by-namespace',
    type: 'bool',
    help: "Also export reloader_reload_executed_total_by_namespace{success,namespace} (Reloader's METRICS_COUNT_BY_NAMESPACE=enabled, which is read too). One series per namespace: mind the cardinality.",
    default: 'false',
  },
  {
    name: 'http-address',
    type: 'string',
    default: ':8080',
    help: 'Address for /metrics, /healthz, /readyz and the Argo CD webhook: [host]:port; ":8080" is every interface.',
  },
  {
    name: 'status-address',
    type: 'string',
    default: '127.0.0.1:8081',
    help: 'Address of the status endpoint (GET /status: reloads running, waiting and why, halts, the last done; read by `gitops-reloader status`). Loopback by default, reached by kubectl port-forward; "" turns it off. It names workloads and configs of every namespace: do not expose it.',
  },
  {
    name: 'leader-elect',
    type: 'bool',
    help: 'Elect one acting replica with a Lease <release-name>-leader in the release namespace. Only the leader reloads and writes the ledger; others watch and stand by.',
    default: 'true',
  },
  {
    name: 'leader-identity',
    type: 'string',
    help: 'Identity in the Lease; unique per process. Default: host name plus a random suffix.',
  },
  {
    name: 'leader-cache-sync-timeout',
    type: 'duration',
    help: 'A replica that wins the Lease but whose watches have not all listed within this time releases the Lease (log, LeaseReleased Event, gitops_reloader_leader_start_failures_total{reason="cache-sync-timeout"}) and backs off, so a replica that can act takes over.',
    default: '2m',
    min: 1000,
  },
  {
    name: 'lease-duration',
    type: 'duration',
    help: 'How long a standby waits after the last renewal before taking over.',
    default: '15s',
    min: 1000,
  },
  {
    name: 'lease-renew-deadline',
    type: 'duration',
    help: 'The leader stops acting if it cannot renew within this time.',
    default: '10s',
    min: 500,
  },
  {
    name: 'lease-retry-period',
    type: 'duration',
    help: 'How often the leader renews and standbys retry.',
    default: '2s',
    min: 100,
  },
  {
    name: 'git-credentials-dir',
    type: 'string',
    help: 'Git strategy: a directory (a mounted Secret) holding `username` and `token` (or `password`) for HTTPS, or `ssh-privatekey` (and optional `known_hosts`) for SSH. Read at every write. Used when no Argo CD repository Secret matches.',
  },
  {
    name: 'git-credentials-urls',
    type: 'list',
    help: 'Git strategy: the repositories --git-credentials-dir credentials may be sent to (comma list; required with it): URL prefixes such as https://git.example.com/team-a, matched on a path-segment boundary with the same scheme and host, or bare hosts (https and ssh to that host).',
  },
  {
    name: 'git-allow-insecure-http',
    type: 'bool',
    help: 'Git strategy: allow plain http:// repository URLs, which send credentials in clear text. For loopback or a trusted network only.',
    default: 'false',
  },
  {
    name: 'git-deadline',
    type: 'duration',
    help: 'Git strategy: the longest one write may take, clone to last push attempt; past it the write fails and is retried later.',
    default: '10m',
    min: 1000,
  },
  {
    name: 'git-max-checkout-mib',
    type: 'int',
    help: 'Git strategy: stop a write whose clone grows past this many MiB on disk, with a clear error, before it fills /tmp (the chart gives it 256 MiB).',
    default: '200',
    min: 1,
  },
  {
    name: 'git-signing-key-file',
    type: 'string',
    help: 'Git strategy: sign every commit with this SSH private key (a mounted Secret; git gpg.format=ssh). Unset: commits are unsigned, by --git-author-name/--git-author-email.',
  },
  {
    name: 'git-ca-file',
    type: 'string',
    help: "Git strategy: a PEM bundle of CA certificates that https git servers are verified against (git's http.sslCAInfo), for a server with a private CA; mount it from a ConfigMap. Unset: the system's CAs. TLS verification is never turned off.",
  },
  {
    name: 'git-argocd-credentials',
    type: 'bool',
    help: "Git strategy: use Argo CD's repository Secrets (secret-type repository-write, repo-write-creds, repository, repo-creds) in the first --argocd-namespaces namespace, matched by URL as Argo CD matches them.",
    default: 'false',
  },
  {
    name: 'git-branch',
    type: 'string',
    help: "Git strategy: the branch to push to, or base:target to push to a review branch target built on base. Unset: the Application's targetRevision.",
  },
  {
    name: 'git-author-name',
    type: 'string',
    help: 'Git strategy: commit author and committer name.',
    default: 'gitops-reloader',
  },
  {
    name: 'git-author-email',
    type: 'string',
    help: 'Git strategy: commit author and committer email.',
    default: 'gitops-reloader@localhost',
  },
  {
    name: 'git-message-template',
    type: 'string',
    help: 'Git strategy: commit message; placeholders {{namespace}} {{workload}} {{kind}} {{configs}} {{hash}}. Unset: "chore(reload): {{namespace}}/{{workload}} config changed ({{configs}})".',
  },
  {
    name: 'enable-csi-integration',
    type: 'bool',
    help: "Watch Secrets Store CSI driver SecretProviderClassPodStatus objects and reload workloads that mount a SecretProviderClass when a mounted object version changes (Reloader's flag, same name). Needs the driver's CRDs and the chart value csiIntegration.enabled for RBAC; see docs/csi.md.",
    default: 'false',
  },
  {
    name: 'dry-run',
    type: 'bool',
    help: 'Log and emit Events for what would be done; change nothing.',
    default: 'false',
  },
  {
    name: 'log-level',
    type: 'enum',
    values: [...LOG_LEVELS, ...RELOADER_LOG_LEVELS],
    help: "Log level. Reloader's trace, warning, fatal and panic read as debug, warn, error and error.",
    default: 'info',
  },
  ...alertFlags,
];

/** Every flag `serve` accepts: ours, then Stakater Reloader's under their own names. */
export const allServeFlags: readonly FlagSpec[] = [...serveFlags, ...reloaderFlags];

export interface Config {
  kubeconfig?: string;
  namespaces: string[];
  namespaceSelector?: string;
  ignoreNamespaces: string[];
  resourceLabelSelector?: string;
  ignoreConfigMaps: string[];
  ignoreSecrets: string[];
  /** Config kinds not watched at all. */
  ignoreResources: ConfigResourceName[];
  /** Workload kinds never reloaded (and not watched). */
  ignoreWorkloadKinds: WorkloadKindName[];
  autoReloadAll: boolean;
  defaultStrategy: Strategy;
  debounceMs: number;
  maxDebounceWaitMs: number;
  maxConcurrentReloads: number;
  apiWriteQps: number;
  apiWriteBurst: number;
  minReloadIntervalMs: number;
  stallAfterMs: number;
  reloadDeadlineMs: number;
  /** --restart-budget, --restart-budget-per-namespace: pods replaced per minute (0: no ceiling). */
  restartBudget: { perMinute: number; perNamespacePerMinute: number };
  /** --flap-changes within --flap-window: a flapping config (core/flap.ts). */
  flap: { changes: number; windowMs: number };
  /** --brake: no reload starts; --brake-allows-requests: except the Argo CD action's. */
  brake: boolean;
  brakeAllowsRequests: boolean;
  /** --progressive-reloads and its waves (docs/progressive-reloads.md); undefined when off. */
  progressive?: { firstWave: number; settleMs: number; gatherMs: number };
  /** --reload-on-delete: a deleted config a workload references is a change (Reloader's default: off). */
  reloadOnDelete: boolean;
  /**
   * --reload-on-create=true (Reloader's flag): a named config the pod template does not use, created,
   * is a change (Reloader's create handler); off, it is recorded as a new baseline. A referenced config
   * being created is a change either way (docs/migrating-from-reloader.md).
   */
  reloadOnCreate?: boolean;
  /** Reloader's custom annotation-key flags: its default key → the key read instead (core/annotation-keys.ts). */
  annotationAliases?: AnnotationAliases;
  /** --reloader-compat: Reloader's failure Event reason (ReloadFail) and port (:9090 unless --http-address). */
  reloaderCompat?: boolean;
  /** --run-suspended-cronjobs: a suspended CronJob's reload runs its Job (Reloader's behaviour). */
  runSuspendedCronJobs?: boolean;
  /** --alert-on-reload (Reloader's ALERT_* variables): chat alerts; undefined when off (docs/alerts.md). */
  alerts?: AlertConfig;
  surgeSweepIntervalMs: number;
  leaderCacheSyncTimeoutMs: number;
  notificationRecordMaxAgeMs: number;
  includeHelmReleaseSecrets: boolean;
  releaseNamespace?: string;
  releaseName: string;
  hashKeyFile?: string;
  createHashKey: boolean;
  ledgerShards: number;
  relistIntervalMs: number;
  watchIdleTimeoutMs: number;
  watchHttp2: boolean;
  argocdNamespaces: string[];
  argocdTracking: TrackingMethod;
  argocdTrackingLabel: string;
  argocdOnFailedSync: FailedSyncPolicy;
  hub: boolean;
  hubExecCommands: string[];
  /** Hub mode: clusters led elsewhere kept warm here (ADR 0043). */
  hubStandbyClusters: number;
  /** Hub mode: the replica's write budget for the hub's own API server (ADR 0043). */
  hubWriteQps: number;
  hubWriteBurst: number;
  fluxNamespaces: string[];
  fluxDependsOnAsOne: boolean;
  fluxOnFailedApply: FailedSyncPolicy;
  fluxWebhookTokenFile?: string;
  webhookTokenFile?: string;
  /** Reload webhook: POST instead of reloading. */
  webhookUrl?: string;
  webhookSecretFile?: string;
  webhookTimeoutMs: number;
  webhookRetries: number;
  metricsCountByNamespace: boolean;
  gitCredentialsDir?: string;
  gitCredentialsUrls: string[];
  gitAllowInsecureHttp: boolean;
  gitDeadlineMs: number;
  gitMaxCheckoutMib: number;
  gitSigningKeyFile?: string;
  gitCaFile?: string;
  gitArgocdCredentials: boolean;
  gitBranch?: string;
  gitAuthorName: string;
  gitAuthorEmail: string;
  gitMessageTemplate?: string;
  httpAddress: string;
  /** --status-address; undefined when "" (no status endpoint). */
  statusAddress?: string;
  leaderElect: boolean;
  leaderIdentity?: string;
  leaseDurationMs: number;
  leaseRenewDeadlineMs: number;
  leaseRetryPeriodMs: number;
  /** --enable-csi-integration: SecretProviderClasses reload the workloads that mount them. */
  enableCsiIntegration: boolean;
  dryRun: boolean;
  logLevel: LogLevel;
  /**
   * --log-format (Reloader's flag): json (ours, the default without the flag) or text (logfmt lines,
   * Reloader's default: `--log-format=` empty, `text` or `logfmt`).
   */
  logFormat?: 'json' | 'text';
  /** What each Reloader flag given became, for the start-up log. */
  reloaderNotes: string[];
}

const str = (v: FlagValue) => (typeof v === 'string' && v !== '' ? v : undefined);
const list = (v: FlagValue) => (Array.isArray(v) ? v : []);
const num = (v: FlagValue) => v as number;

// Kubernetes label selector syntax, checked loosely here so a typo fails at start-up instead of at
// the first LIST: key=value, key!=value, key in (a,b), key notin (a), key, !key.
const selectorTerm =
  /^\s*(!?[A-Za-z0-9./_-]+|[A-Za-z0-9./_-]+\s*(==?|!=)\s*[A-Za-z0-9._-]*|[A-Za-z0-9./_-]+\s+(in|notin)\s+\([A-Za-z0-9._,\s-]*\))\s*$/;

export function validSelector(sel: string): boolean {
  // Split on commas that are not inside parentheses.
  const terms = sel.split(/,(?![^(]*\))/);
  return terms.every((t) => selectorTerm.test(t));
}

/**
 * A selector flag, in Kubernetes syntax or Reloader's `key:value` list form, given once or more (all
 * must match) and quoted or not, as Reloader's pflag slice reads it.
 */
const selector = (flag: string, v: FlagValue) => {
  const given = typeof v === 'string' ? [v] : Array.isArray(v) ? v : [];
  if (given.every((g) => g.trim() === '')) return undefined;
  try {
    // A list flag arrives split on commas; pflag splits the whole value as CSV, quotes and all.
    return reloaderSelectorFlag([given.join(',')]);
  } catch (e) {
    throw new FlagError(`invalid value for --${flag}: ${(e as Error).message}`);
  }
};

function logLevel(v: string): LogLevel {
  const map: Record<string, LogLevel> = { trace: 'debug', warning: 'warn', fatal: 'error', panic: 'error' };
  return map[v] ?? (v as LogLevel);
}

/** Checks each entry of a list flag against its allowed values (after `norm`), naming the flag. */
function oneOf<T extends string>(
  flag: string,
  given: string[],
  allowed: readonly T[],
  norm: (v: string) => string = (v) => v,
): T[] {
  const out = given.map(norm);
  const bad = out.find((v) => !(allowed as readonly string[]).includes(v));
  if (bad !== undefined) {
    throw new FlagError(`invalid value ${JSON.stringify(bad)} for --${flag}: expected ${allowed.join(', ')}`);
  }
  return [...new Set(out)] as T[];
}

const namespaceName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function buildConfig(
  values: Record<string, FlagValue>,
  env: Readonly<Record<string, string | undefined>>,
): Config {
  const cfg: Config = {
    kubeconfig: str(values.kubeconfig),
    namespaces: list(values.namespaces),
    namespaceSelector: selector('namespace-selector', values['namespace-selector']),
    ignoreNamespaces: list(values['ignore-namespaces']),
    resourceLabelSelector: selector('resource-label-selector', values['resource-label-selector']),
    ignoreConfigMaps: list(values['ignore-configmaps']),
    ignoreSecrets: list(values['ignore-secrets']),
    ignoreResources: oneOf('ignore-resources', list(values['ignore-resources']), CONFIG_RESOURCE_NAMES, (v) =>
      v.toLowerCase(),
    ),
    ignoreWorkloadKinds: oneOf(
      'ignore-workload-kinds',
      list(values['ignore-workload-kinds']),
      WORKLOAD_KIND_NAMES,
    ),
    autoReloadAll: values['auto-reload-all'] === true,
    defaultStrategy: values['default-strategy'] as Strategy,
    debounceMs: num(values.debounce),
    maxDebounceWaitMs: num(values['max-debounce-wait']),
    maxConcurrentReloads: num(values['max-concurrent-reloads']),
    apiWriteQps: num(values['api-write-qps']),
    apiWriteBurst: num(values['api-write-burst']),
    minReloadIntervalMs: num(values['min-reload-interval']),
    stallAfterMs: num(values['stall-after']),
    reloadDeadlineMs: num(values['reload-deadline']),
    restartBudget: {
      perMinute: num(values['restart-budget']),
      perNamespacePerMinute: num(values['restart-budget-per-namespace']),
    },
    flap: { changes: num(values['flap-changes']), windowMs: num(values['flap-window']) },
    brake: values.brake === true,
    brakeAllowsRequests: values['brake-allows-requests'] === true,
    ...(values['progressive-reloads'] === true
      ? {
          progressive: {
            firstWave: num(values['progressive-first-wave']),
            settleMs: num(values['progressive-settle']),
            gatherMs: num(values['progressive-gather']),
          },
        }
      : {}),
    reloadOnDelete: values['reload-on-delete'] === true,
    ...(values['run-suspended-cronjobs'] === true ? { runSuspendedCronJobs: true } : {}),
    reloadOnCreate:
      String(values['reload-on-create'] ?? '')
        .trim()
        .toLowerCase() === 'true',
    surgeSweepIntervalMs: num(values['surge-sweep-interval']),
    leaderCacheSyncTimeoutMs: num(values['leader-cache-sync-timeout']),
    notificationRecordMaxAgeMs: num(values['notification-record-max-age']),
    includeHelmReleaseSecrets: values['include-helm-release-secrets'] === true,
    releaseNamespace: str(values['release-namespace']) ?? str(env.POD_NAMESPACE),
    releaseName: str(values['release-name']) as string,
    hashKeyFile: str(values['hash-key-file']),
    createHashKey: values['create-hash-key'] === true,
    ledgerShards: num(values['ledger-shards']),
    relistIntervalMs: num(values['relist-interval']),
    watchIdleTimeoutMs: num(values['watch-idle-timeout']),
    watchHttp2: values['watch-http2'] === true,
    argocdNamespaces: list(values['argocd-namespaces']),
    argocdTracking: values['argocd-tracking'] as TrackingMethod,
    argocdTrackingLabel: str(values['argocd-tracking-label']) ?? DEFAULT_TRACKING_LABEL,
    argocdOnFailedSync: values['argocd-on-failed-sync'] as FailedSyncPolicy,
    hub: values.hub === true,
    hubExecCommands: list(values['hub-exec-commands']),
    hubStandbyClusters: num(values['hub-standby-clusters']),
    hubWriteQps: num(values['hub-write-qps']),
    hubWriteBurst: num(values['hub-write-burst']),
    fluxNamespaces: list(values['flux-namespaces']),
    fluxDependsOnAsOne: values['flux-depends-on-as-one'] === true,
    fluxOnFailedApply: values['flux-on-failed-apply'] as FailedSyncPolicy,
    fluxWebhookTokenFile: str(values['flux-webhook-token-file']),
    webhookTokenFile: str(values['webhook-token-file']),
    webhookUrl: str(values['webhook-url']),
    webhookSecretFile: str(values['webhook-secret-file']),
    webhookTimeoutMs: num(values['webhook-timeout']),
    webhookRetries: num(values['webhook-retries']),
    metricsCountByNamespace:
      values['metrics-count-by-namespace'] === true || env.METRICS_COUNT_BY_NAMESPACE === 'enabled',
    gitCredentialsDir: str(values['git-credentials-dir']),
    gitCredentialsUrls: list(values['git-credentials-urls']),
    gitAllowInsecureHttp: values['git-allow-insecure-http'] === true,
    gitDeadlineMs: num(values['git-deadline']),
    gitMaxCheckoutMib: num(values['git-max-checkout-mib']),
    gitSigningKeyFile: str(values['git-signing-key-file']),
    gitCaFile: str(values['git-ca-file']),
    gitArgocdCredentials: values['git-argocd-credentials'] === true,
    gitBranch: str(values['git-branch']),
    gitAuthorName: str(values['git-author-name']) ?? 'gitops-reloader',
    gitAuthorEmail: str(values['git-author-email']) ?? 'gitops-reloader@localhost',
    gitMessageTemplate: str(values['git-message-template']),
    httpAddress: str(values['http-address']) ?? ':8080',
    statusAddress: str(values['status-address']),
    leaderElect: values['leader-elect'] === true,
    leaderIdentity: str(values['leader-identity']),
    leaseDurationMs: num(values['lease-duration']),
    leaseRenewDeadlineMs: num(values['lease-renew-deadline']),
    leaseRetryPeriodMs: num(values['lease-retry-period']),
    enableCsiIntegration: values['enable-csi-integration'] === true,
    dryRun: values['dry-run'] === true,
    logLevel: logLevel(values['log-level'] as string),
    logFormat: values['log-format'] === 'text' ? 'text' : 'json',
    reloaderNotes: [],
  };
  for (const [flag, sel] of [
    ['namespace-selector', cfg.namespaceSelector],
    ['resource-label-selector', cfg.resourceLabelSelector],
  ] as const) {
    if (sel !== undefined && !validSelector(sel)) {
      throw new FlagError(`invalid value ${JSON.stringify(sel)} for --${flag}: not a label selector`);
    }
  }
  for (const [flag, names] of [
    ['namespaces', cfg.namespaces],
    ['ignore-namespaces', cfg.ignoreNamespaces],
    ['argocd-namespaces', cfg.argocdNamespaces],
    ['flux-namespaces', cfg.fluxNamespaces],
  ] as const) {
    const bad = names.find((n) => !namespaceName.test(n));
    if (bad !== undefined)
      throw new FlagError(`invalid value ${JSON.stringify(bad)} for --${flag}: not a namespace name`);
  }
  const relative = cfg.hubExecCommands.find((c) => !c.startsWith('/'));
  if (relative !== undefined) {
    throw new FlagError(
      `invalid value ${JSON.stringify(relative)} for --hub-exec-commands: not an absolute path (a plugin is never looked up in PATH)`,
    );
  }
  if (cfg.hubStandbyClusters > 1000) {
    throw new FlagError(
      `invalid value ${cfg.hubStandbyClusters} for --hub-standby-clusters: at most 1000 (each is a cluster's watches and caches)`,
    );
  }
  if (cfg.ignoreResources.length > 1) {
    throw new FlagError(
      'invalid value for --ignore-resources: configmaps and secrets cannot both be ignored',
    );
  }
  if (cfg.webhookUrl !== undefined && !/^https?:\/\/[^\s/]+/.test(cfg.webhookUrl)) {
    throw new FlagError(
      `invalid value ${JSON.stringify(cfg.webhookUrl)} for --webhook-url: expected an http:// or https:// URL`,
    );
  }
  if (cfg.webhookSecretFile !== undefined && cfg.webhookUrl === undefined) {
    throw new FlagError('--webhook-secret-file needs --webhook-url');
  }
  if (cfg.maxDebounceWaitMs < cfg.debounceMs) {
    throw new FlagError(
      `invalid value for --max-debounce-wait: ${cfg.maxDebounceWaitMs}ms is shorter than --debounce ${cfg.debounceMs}ms`,
    );
  }
  for (const [flag, address] of [
    ['http-address', cfg.httpAddress],
    ['status-address', cfg.statusAddress ?? ':0'],
  ] as const) {
    if (
      !/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):\d{1,5}$/.test(address) ||
      Number(address.split(':').pop()) > 65535
    ) {
      throw new FlagError(
        `invalid value ${JSON.stringify(address)} for --${flag}: expected [host]:port, e.g. :8080`,
      );
    }
  }
  if (cfg.leaseRenewDeadlineMs >= cfg.leaseDurationMs || cfg.leaseRetryPeriodMs >= cfg.leaseRenewDeadlineMs) {
    throw new FlagError(
      'invalid lease timings: need --lease-retry-period < --lease-renew-deadline < --lease-duration',
    );
  }
  if (cfg.releaseName !== undefined && !namespaceName.test(cfg.releaseName)) {
    throw new FlagError(
      `invalid value ${JSON.stringify(cfg.releaseName)} for --release-name: must be a DNS label`,
    );
  }
  return cfg;
}

export function loadConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Config {
  const { values, explicit } = parseFlags(allServeFlags, argv, env);
  const { notes, aliases } = translateReloaderFlags(values, explicit);
  // Reloader serves /metrics and /live on :9090; ours defaults to :8080.
  if (values['reloader-compat'] === true && !explicit.has('http-address')) values['http-address'] = ':9090';
  const alerts = alertConfig(values, explicit, env);
  return {
    ...buildConfig(values, env),
    reloaderCompat: values['reloader-compat'] === true,
    ...(alerts ? { alerts } : {}),
    ...(Object.keys(aliases).length > 0 ? { annotationAliases: aliases } : {}),
    reloaderNotes: notes,
  };
}

/** Reads --hash-key-file; a bad file stops start-up with a message naming the flag. */
export function readHashKeyFile(file: string): Buffer {
  try {
    return readKeyFile(file, '--hash-key-file');
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
}

/** Reads --webhook-secret-file; a bad file stops start-up with a message naming the flag. */
export function readWebhookKeyFile(file: string): Buffer {
  try {
    return readKeyFile(file, '--webhook-secret-file');
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
}
