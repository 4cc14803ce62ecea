// The service's StrategiesPort: runs a reload's strategy (or sends it to --webhook-url) and reports
// how it went as a result, not as an exception the reconciler must interpret. Expected endings
// (ReloadWaiting, StrategyUnsupported) become results here, in one place; see docs/adr/0020. The API
// look-ups the engine needs answered (does a config the pods need exist, docs/adr/0024) and the
// periodic sweep (surge pods, Job reloads cut mid-way, docs/adr/0025) are here too.

import type { V1Pod } from '@kubernetes/client-node';
import type { Config } from '../config/config.ts';
import { unhealthy } from '../core/pod-health.ts';
import { selectorString } from '../core/records.ts';
import type { ExecRequest, ExecResult, StrategiesPort, SweepView } from '../engine/strategies-port.ts';
import { missingNeededConfigs } from '../kube/config-presence.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { JobSpecStore } from '../kube/job-spec-store.ts';
import { readWorkloadAt } from '../kube/read-at.ts';
import type { Metrics } from '../metrics.ts';
import type { ClusterState } from '../state.ts';
import type { GitCommitter } from './git-commit.ts';
import { JobResumer } from './job-resume.ts';
import {
  type ReloadWebhookOptions,
  redact,
  sendReloadNotice,
  WebhookDeliveryError,
} from './reload-webhook.ts';
import type { RestartBudget } from './restart-budget.ts';
import { runStrategy } from './run.ts';
import { deleteSurgePodsOf, surgeNamespacesOf, sweepSurgePods } from './surge-sweep.ts';
import { templateChangeCheck } from './template-change.ts';
import { ReloadWaiting, type StrategyContext, type StrategyResult, StrategyUnsupported } from './types.ts';

/** The strategies' API clients (their writes wait on the write rate limit), and what else they need. */
export interface ExecutorDeps
  extends Pick<StrategyContext, 'core' | 'apps' | 'batch' | 'custom' | 'kc' | 'log'> {
  cfg: Config;
  state: ClusterState;
  inScope(namespace: string): boolean;
  metrics?: Metrics;
  /** The git strategy (one GitWriter per process). */
  git?: GitCommitter;
  /** --restart-budget and --restart-budget-per-namespace (none when neither is set). */
  budget?: RestartBudget;
  /** --webhook-url: POST each reload's details there instead of reloading. */
  webhook?: ReloadWebhookOptions;
  /** Where a Job reload records the Job to create before deleting the old one (docs/adr/0025). */
  jobSpecs: JobSpecStore;
  /** The Events of Job reloads the sweep finishes. */
  events: Pick<EventRecorder, 'emit'>;
}

const fieldsOf = (r: ExecRequest) => ({
  workload: `${r.workload.rec.ref.kind}/${r.workload.rec.ref.name}`,
  namespace: r.workload.rec.ref.namespace,
});

/** What the health of a wave is judged by, of one pod. */
function podHealthFacts(p: V1Pod) {
  const statuses = p.status?.containerStatuses ?? [];
  return {
    name: p.metadata?.name ?? '',
    createdMs: new Date(p.metadata?.creationTimestamp ?? 0).getTime(),
    ready: (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    restarts: statuses.reduce((n, c) => n + (c.restartCount ?? 0), 0),
    terminating: p.metadata?.deletionTimestamp !== undefined,
    started: statuses.length > 0 && statuses.every((c) => c.state?.running !== undefined),
  };
}

export function strategyExecutor(d: ExecutorDeps): StrategiesPort {
  const webhook = d.webhook;
  const jobs = new JobResumer({ batch: d.batch, store: d.jobSpecs, events: d.events, log: d.log });
  /** Finishes Job reloads cut between the delete and the create (strategies/job-resume.ts). */
  const resumeJobs = (v: SweepView, signal: AbortSignal) =>
    d.cfg.dryRun ? Promise.resolve() : jobs.run({ signal, busy: v.running, pending: v.pending });
  const run = async (r: ExecRequest): Promise<StrategyResult> => {
    const t = r.workload;
    const a = r.action;
    if (webhook) return notify(webhook, r);
    return runStrategy(r.strategy, t.rec, {
      ...(d.budget ? { budget: d.budget } : {}),
      ...(d.cfg.runSuspendedCronJobs ? { runSuspendedCronJobs: true } : {}),
      core: d.core,
      apps: d.apps,
      batch: d.batch,
      custom: d.custom,
      kc: d.kc,
      begin: r.begin,
      jobSpecs: d.jobSpecs,
      log: r.log,
      signal: r.signal,
      stallAfterMs: r.stallAfterMs,
      ...(r.canary ? { canary: true } : {}),
      onStall: r.onStall,
      ...(r.onWait ? { onWait: r.onWait } : {}),
      progress: r.onProgress,
      cutoffMs: a.cutoffMs,
      ...(a.targets ? { targets: a.targets } : {}),
      configHash: r.configHash,
      ...(d.git ? { git: d.git } : {}),
      changed: r.changed,
      templateChangedSince: templateChangeCheck({
        kind: t.rec.ref.kind,
        changeRV: a.changeRV,
        watched: () => {
          const w = d.state.workloads.get(a.workload);
          return w && { templateHash: w.rec.templateHash, templateRV: w.templateRV };
        },
        readAt: (rv) => readWorkloadAt(d.kc, t.rec.ref, rv, r.signal),
        onUnknown: (why) =>
          r.log.warn(
            { ...fieldsOf(r), strategy: r.strategy, configs: r.changed, why },
            'could not read the pod template at the change; pods are judged by the cutoff',
          ),
      }),
    });
  };

  /** --webhook-url: the reload's details go to the webhook, and nothing in the cluster changes. */
  const notify = async (o: ReloadWebhookOptions, r: ExecRequest): Promise<StrategyResult> => {
    const ref = r.workload.rec.ref;
    const sent = await sendReloadNotice(
      o,
      {
        event: 'reload',
        workload: { kind: ref.kind, namespace: ref.namespace, name: ref.name },
        strategy: r.strategy,
        changed: r.changed,
        cutoff: new Date(r.action.cutoffMs).toISOString(),
        configHash: r.configHash,
        timestamp: new Date().toISOString(),
      },
      r.term,
      (attempt, why) => {
        d.metrics?.reloader.retry();
        d.log.warn({ ...fieldsOf(r), attempt, why }, 'reload webhook failed; retrying');
      },
    );
    return {
      replaced: 0,
      summary: `sent to the webhook ${redact(o.url)} (HTTP ${sent.status}, attempt ${sent.attempts}); not restarted`,
    };
  };

  return {
    notifies: webhook !== undefined,
    async run(r: ExecRequest): Promise<ExecResult> {
      try {
        const res = await run(r);
        return { kind: 'done', ...res };
      } catch (err) {
        if (err instanceof ReloadWaiting) return { kind: 'waiting', why: err.message, retryMs: err.retryMs };
        if (err instanceof StrategyUnsupported) return { kind: 'unsupported', why: err.message };
        return {
          kind: 'failed',
          error: err instanceof Error ? err : new Error(String(err)),
          errorKind: err instanceof WebhookDeliveryError ? 'webhook_send' : 'update_workload',
        };
      }
    },
    async missingNeeded(t, signal) {
      const missing = await missingNeededConfigs(t.rec.uses, {
        kc: d.kc,
        cached: (c) => d.state.get(c) !== undefined,
        ignoreResources: d.cfg.ignoreResources,
        partialCache: d.cfg.resourceLabelSelector !== undefined,
        signal,
      });
      return missing.map((c) => `${c.kind}/${c.name}`);
    },
    async sweep(v, signal) {
      try {
        const ids = new Set(v.reloaded());
        await sweepSurgePods({
          core: d.core,
          namespaces: d.cfg.namespaces,
          formerNamespaces: surgeNamespacesOf(ids).filter((ns) => !d.cfg.namespaces.includes(ns)),
          inScope: d.inScope,
          reloaded: (ns, name) => ids.has(`Deployment/${ns}/${name}`),
          pendingOwners: v.pendingOwners,
          dryRun: d.cfg.dryRun,
          onSwept: () => d.metrics?.surgePodSwept(d.cfg.dryRun),
          signal,
          log: d.log,
        });
      } finally {
        // Whatever became of the surge pods (it never throws); nothing in a dry run.
        await resumeJobs(v, signal);
      }
    },
    resumeJobs,
    async health(t, sinceMs) {
      const labelSelector = selectorString(t.rec.selector);
      if (labelSelector === '') return undefined; // a CronJob or Job: no pods that stay to judge
      const list = await d.core.listNamespacedPod({ namespace: t.rec.ref.namespace, labelSelector });
      return unhealthy(list.items.map(podHealthFacts), sinceMs);
    },
    async pods(t) {
      const labelSelector = selectorString(t.rec.selector);
      if (labelSelector === '') return undefined; // a CronJob or Job: no pods that stay to judge
      const list = await d.core.listNamespacedPod({ namespace: t.rec.ref.namespace, labelSelector });
      return list.items.map(podHealthFacts);
    },
    async dropSurgePods(t, signal) {
      if (t.rec.ref.kind !== 'Deployment' || d.cfg.dryRun) return;
      const f = { workload: `${t.rec.ref.kind}/${t.rec.ref.name}`, namespace: t.rec.ref.namespace };
      await deleteSurgePodsOf(d.core, t.rec.ref.namespace, t.rec.ref.uid, signal, d.log, f);
    },
  };
}
