// Prometheus metrics, in a registry of our own. Every label has a small, fixed set of values:
// never a workload, config or namespace name, and never anything derived from Secret data.
// Stakater Reloader's families (reloader_*, rest_client_*) are in reloader-metrics.ts, on the same
// registry, so dashboards built on Reloader keep working.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { RELOAD_STRATEGIES, type ReloadStrategy, type WorkloadKind } from './core/types.ts';
import { REFUSAL_RULES, type RefusalRule } from './gitops/refusal.ts';
import type { FailureMode } from './kube/watch-logic.ts';
import { ReloaderMetrics } from './reloader-metrics.ts';

export const WORKLOAD_KINDS: readonly WorkloadKind[] = [
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'CronJob',
  'Job',
  'Rollout',
];

/**
 * How one reload attempt ended. `skipped`: nothing to do (a CronJob, an unsupported kind, a dry run).
 * `interrupted`: the service stopped or lost the Lease mid-reload; the pending action stays in the
 * ledger and the next leader resumes it. Only success and failure count in Reloader's metric.
 */
// not-needed: every pod was already newer than the change (a template rollout in the same sync
// replaced them), so nothing was restarted; it is not a reload and reloader_reload_executed_total
// does not count it.
export const RELOAD_RESULTS = ['success', 'failure', 'skipped', 'interrupted', 'not-needed'] as const;
export type ReloadResult = (typeof RELOAD_RESULTS)[number];

/** How one git write-back ended: a commit pushed, nothing to commit (value already set), or an error. */
export const GIT_COMMIT_RESULTS = ['committed', 'unchanged', 'failed'] as const;
export type GitCommitResult = (typeof GIT_COMMIT_RESULTS)[number];

const WATCH_FAILURE_MODES: readonly FailureMode[] = [
  'list-failed',
  'watch-failed',
  'gone-410',
  'idle-timeout',
  'relist',
  'reconnect',
  'handler-failed',
];

/** Reloads run from seconds (annotate, Rollout) to many minutes (a large StatefulSet). */
export const RELOAD_DURATION_BUCKETS = [0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];
/** From the first observed change to the reload starting: includes the debounce (3 s by default). */
export const EVENT_TO_ACTION_BUCKETS = [0.1, 0.5, 1, 2, 3, 5, 10, 15, 30, 60, 120, 300, 600];

/** A write waits 0 s (a token was there) up to several seconds when many reloads run at once. */
export const WRITE_WAIT_BUCKETS = [0.005, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

const PLURAL = /^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$/;

/**
 * The resource a watch path is for: `/api/v1/namespaces/team-a/configmaps` → `configmaps`. Only the
 * plural is kept, so a per-namespace watch does not put the namespace name into a label.
 */
export function resourceOf(pathOrResource: string): string {
  const last = pathOrResource.split('?')[0]?.split('/').filter(Boolean).pop() ?? '';
  return PLURAL.test(last) ? last : 'other';
}

function statusLabel(code: number): string {
  return Number.isInteger(code) && code >= 100 && code <= 599 ? String(code) : 'other';
}

/** What the progressive-reload gauges show: changes halted, and reloads waiting for a wave or held by a halt. */
export interface ProgressiveCounts {
  halted: number;
  wave: number;
  halt: number;
}

/** One reload attempt, from start to finish. Every method is safe to call more than once. */
export interface ReloadTimer {
  /** The reload has been blocked for --stall-after (a ReloadStalled Event was emitted). */
  stalled(): void;
  /** The attempt ended. `podsReplaced` counts pods evicted or deleted (restart strategy). */
  finish(result: ReloadResult, podsReplaced?: number): void;
}

export interface MetricsOptions {
  /** Also export prom-client's process_* and nodejs_* metrics (CPU, memory, event-loop lag, GC). Default true. */
  defaultMetrics?: boolean;
  /** The service version and the git commit it was built from, for gitops_reloader_build_info. */
  version?: string;
  commit?: string;
  /** Clock in ms, for reload durations. Default performance.now. */
  now?: () => number;
  /** Export reloader_reload_executed_total_by_namespace (--metrics-count-by-namespace). */
  countByNamespace?: boolean;
}

type WatchedSource = () => Iterable<readonly [resource: string, count: number]>;

export class Metrics {
  readonly registry = new Registry();
  readonly #now: () => number;
  /** Stakater Reloader's families. */
  readonly reloader: ReloaderMetrics;
  readonly #reloads: Counter<'strategy' | 'kind' | 'result'>;
  readonly #duration: Histogram<'strategy' | 'kind' | 'result'>;
  readonly #podsReplaced: Counter<'kind'>;
  readonly #inProgress: Gauge;
  readonly #stalled: Gauge;
  readonly #eventToAction: Histogram;
  readonly #webhook: Counter<'code'>;
  readonly #alerts: Counter<'sink' | 'result'>;
  readonly #gitCommits: Counter<'result'>;
  readonly #gitPushRetries: Counter;
  readonly #gitRefused: Counter<'rule'>;
  readonly #leader: Gauge;
  readonly #leaderStartFailures: Counter<'reason'>;
  readonly #surgeSwept: Counter<'dry_run'>;
  readonly #keyChanges: Counter;
  readonly #stalls: Counter<'why'>;
  readonly #held: Counter<'why'>;
  readonly #halts: Counter;
  readonly #flaps: Counter;
  readonly #budgetWaits: Counter<'scope'>;
  #progressive: () => ProgressiveCounts = () => ({ halted: 0, wave: 0, halt: 0 });
  #braked: (() => number) | undefined;
  readonly #rebaselined: Counter;
  readonly #recreated: Counter<'object'>;
  readonly #caughtUp: Counter<'result'>;
  readonly #watchFailures: Counter<'resource' | 'mode'>;
  readonly #writeWait: Histogram;
  #watchedSources: WatchedSource[] = [];
  #writesWaiting: () => number = () => 0;

  constructor(o: MetricsOptions = {}) {
    this.#now = o.now ?? (() => performance.now());
    const registers = [this.registry];
    if (o.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });

    new Gauge({
      name: 'gitops_reloader_build_info',
      help: 'Always 1; the labels say which version, git commit and Node.js runtime are running.',
      labelNames: ['version', 'commit', 'node'],
      registers,
    }).set(
      { version: o.version ?? 'unknown', commit: o.commit ?? 'unknown', node: process.versions.node },
      1,
    );

    this.reloader = new ReloaderMetrics({ registers, countByNamespace: o.countByNamespace ?? false });
    this.#reloads = new Counter({
      name: 'gitops_reloader_reloads_total',
      help: 'Reload attempts, by strategy, workload kind and result. A retried failure counts once per attempt.',
      labelNames: ['strategy', 'kind', 'result'],
      registers,
    });
    this.#duration = new Histogram({
      name: 'gitops_reloader_reload_duration_seconds',
      help: 'Time from a reload attempt starting to it ending, by strategy, workload kind and result.',
      labelNames: ['strategy', 'kind', 'result'],
      buckets: RELOAD_DURATION_BUCKETS,
      registers,
    });
    this.#podsReplaced = new Counter({
      name: 'gitops_reloader_pods_replaced_total',
      help: 'Pods replaced (evicted or deleted) by restart-strategy reloads, by workload kind.',
      labelNames: ['kind'],
      registers,
    });
    this.#inProgress = new Gauge({
      name: 'gitops_reloader_reloads_in_progress',
      help: 'Reloads running now.',
      registers,
    });
    this.#stalled = new Gauge({
      name: 'gitops_reloader_reloads_stalled',
      help: 'Reloads running now that have been blocked for longer than --stall-after (e.g. by a PodDisruptionBudget).',
      registers,
    });
    this.#eventToAction = new Histogram({
      name: 'gitops_reloader_event_to_action_seconds',
      help: 'Time from the first observed config change (or sync end) to the reload starting; includes the debounce.',
      buckets: EVENT_TO_ACTION_BUCKETS,
      registers,
    });
    this.#webhook = new Counter({
      name: 'gitops_reloader_webhook_requests_total',
      help: 'Argo CD notification webhook requests, by HTTP status code.',
      labelNames: ['code'],
      registers,
    });
    this.#alerts = new Counter({
      name: 'gitops_reloader_alerts_total',
      help: 'Chat alerts (--alert-on-reload), by sink and result: sent, failed (not accepted, unreachable or timed out) or dropped (the queue was full).',
      labelNames: ['sink', 'result'],
      registers,
    });
    this.#gitCommits = new Counter({
      name: 'gitops_reloader_git_commits_total',
      help: 'Git-mode write-backs, by result: committed, unchanged (nothing to commit) or failed.',
      labelNames: ['result'],
      registers,
    });
    this.#gitPushRetries = new Counter({
      name: 'gitops_reloader_git_push_retries_total',
      help: 'Git pushes retried after the remote rejected them (fetch, rebase, push again).',
      registers,
    });
    this.#gitRefused = new Counter({
      name: 'gitops_reloader_git_refused_total',
      help: 'Git-mode writes refused before any clone, by rule (docs/security.md): an Application that does not manage the workload, unbound credentials, a clear-text transport.',
      labelNames: ['rule'],
      registers,
    });
    this.#leader = new Gauge({
      name: 'gitops_reloader_leader',
      help: '1 while this replica holds the leader Lease and acts on it (its start-up succeeded), else 0.',
      registers,
    });
    this.#stalls = new Counter({
      name: 'gitops_reloader_reload_stalls_total',
      help: 'Reload attempts reported stalled (a ReloadStalled Event each): blocked past --stall-after, or stopped after no progress for --reload-deadline and re-queued.',
      labelNames: ['why'],
      registers,
    });
    this.#held = new Counter({
      name: 'gitops_reloader_reloads_held_total',
      help: 'Reloads held instead of run (a ReloadHeld Warning Event each): config-missing, a config the pods need does not exist, so a replaced pod could not start.',
      labelNames: ['why'],
      registers,
    });
    this.#budgetWaits = new Counter({
      name: 'gitops_reloader_restart_budget_waits_total',
      help: 'Pod replacements that waited for the restart budget (--restart-budget, --restart-budget-per-namespace), by the scope that made them wait: cluster or namespace.',
      labelNames: ['scope'],
      registers,
    });
    this.#flaps = new Counter({
      name: 'gitops_reloader_config_flaps_total',
      help: 'Flapping configs reported (a ConfigFlapping Warning Event each): changed --flap-changes times within --flap-window.',
      registers,
    });
    this.#halts = new Counter({
      name: 'gitops_reloader_progressive_halts_total',
      help: 'Config changes halted by progressive reloads (a ReloadHalted Warning Event on the config each): a wave failed, so nothing more started for the change.',
      registers,
    });
    const progressive = () => this.#progressive();
    new Gauge({
      name: 'gitops_reloader_progressive_halted',
      help: 'Config changes halted now (until a newer change of the config supersedes them).',
      registers,
      collect() {
        this.set(progressive().halted);
      },
    });
    new Gauge({
      name: 'gitops_reloader_progressive_waiting',
      help: 'Reloads waiting now in progressive reloads: for their wave to open (wave), or held by a halted change (halt).',
      labelNames: ['why'],
      registers,
      collect() {
        const c = progressive();
        this.set({ why: 'wave' }, c.wave);
        this.set({ why: 'halt' }, c.halt);
      },
    });
    const braked = () => this.#braked;
    new Gauge({
      name: 'gitops_reloader_brake',
      help: '1 while the leader runs with --brake (no reload starts), else 0.',
      registers,
      collect() {
        this.set(braked() ? 1 : 0);
      },
    });
    new Gauge({
      name: 'gitops_reloader_brake_held',
      help: 'Workloads whose reload the brake holds now.',
      registers,
      collect() {
        this.set(braked()?.() ?? 0);
      },
    });
    this.#keyChanges = new Counter({
      name: 'gitops_reloader_key_changes_total',
      help: 'Starts that found the ledger written with another HMAC key (each re-baselines every workload).',
      registers,
    });
    this.#rebaselined = new Counter({
      name: 'gitops_reloader_key_rebaselined_workloads_total',
      help: 'Workloads re-baselined (recorded, not reloaded) because the HMAC key changed.',
      registers,
    });
    this.#recreated = new Counter({
      name: 'gitops_reloader_recreated_objects_total',
      help: 'Workloads and configs found at start with another uid than the ledger recorded: new objects of old names (docs/catch-up.md).',
      labelNames: ['object'],
      registers,
    });
    this.#caughtUp = new Counter({
      name: 'gitops_reloader_catch_up_total',
      help: 'Workloads whose configs differ from the ledger at start, by result: reload (some pod predates a change) or current (every pod is newer; recorded, not reloaded).',
      labelNames: ['result'],
      registers,
    });
    this.#leaderStartFailures = new Counter({
      name: 'gitops_reloader_leader_start_failures_total',
      help: 'Terms as leader that ended because starting to act failed (reason: start-failed, cache-sync-timeout); the Lease was released each time.',
      labelNames: ['reason'],
      registers,
    });
    this.#surgeSwept = new Counter({
      name: 'gitops_reloader_surge_pods_swept_total',
      help: 'Surge pods no reload needed that the sweep deleted (dry_run="true": found and reported, not deleted).',
      labelNames: ['dry_run'],
      registers,
    });
    this.#watchFailures = new Counter({
      name: 'gitops_reloader_watch_failures_total',
      help: 'Watch loop failures and recoveries, by resource and mode (relist and reconnect are recoveries).',
      labelNames: ['resource', 'mode'],
      registers,
    });
    this.#writeWait = new Histogram({
      name: 'gitops_reloader_api_write_wait_seconds',
      help: 'Time each API write (eviction, pod create or delete, ledger write, Event) waited for its turn under --api-write-qps/--api-write-burst; 0 when a token was there.',
      buckets: WRITE_WAIT_BUCKETS,
      registers,
    });
    const waiting = () => this.#writesWaiting();
    new Gauge({
      name: 'gitops_reloader_api_writes_waiting',
      help: 'API writes waiting now for their turn under the write rate limit.',
      registers,
      collect() {
        this.set(waiting());
      },
    });
    const sources = () => this.#watchedSources;
    new Gauge({
      name: 'gitops_reloader_watched_items',
      help: 'Objects held in the watch caches, by resource (ConfigMaps and Secrets are held as hashes only).',
      labelNames: ['resource'],
      registers,
      collect() {
        this.reset();
        const sums = new Map<string, number>();
        for (const source of sources()) {
          for (const [resource, count] of source()) {
            const r = resourceOf(resource);
            sums.set(r, (sums.get(r) ?? 0) + count);
          }
        }
        for (const [resource, count] of sums) this.set({ resource }, count);
      },
    });

    // Every series an alert reads starts at 0, so increase() sees the first failure.
    for (const strategy of RELOAD_STRATEGIES) {
      for (const kind of WORKLOAD_KINDS) {
        for (const result of RELOAD_RESULTS) {
          // Informational: no alert reads it, so it appears only once it happens.
          if (result !== 'not-needed') this.#reloads.inc({ strategy, kind, result }, 0);
        }
      }
    }
    for (const kind of WORKLOAD_KINDS) this.#podsReplaced.inc({ kind }, 0);
    for (const result of GIT_COMMIT_RESULTS) this.#gitCommits.inc({ result }, 0);
    this.#gitPushRetries.inc(0);
    for (const reason of ['start-failed', 'cache-sync-timeout']) this.#leaderStartFailures.inc({ reason }, 0);
    for (const dry of ['true', 'false']) this.#surgeSwept.inc({ dry_run: dry }, 0);
    this.#keyChanges.inc(0);
    for (const why of ['blocked', 'deadline']) this.#stalls.inc({ why }, 0);
    this.#held.inc({ why: 'config-missing' }, 0);
    this.#rebaselined.inc(0);
    for (const object of ['workload', 'config']) this.#recreated.inc({ object }, 0);
    for (const result of ['reload', 'current']) this.#caughtUp.inc({ result }, 0);
    for (const rule of REFUSAL_RULES) this.#gitRefused.inc({ rule }, 0);
    this.#leader.set(0);
    this.#inProgress.set(0);
    this.#stalled.set(0);
  }

  /** Starts timing one reload attempt; call finish() on the result exactly when it ends. */
  reloadStarted(strategy: ReloadStrategy, kind: WorkloadKind, namespace = ''): ReloadTimer {
    const started = this.#now();
    let stalled = false;
    let finished = false;
    this.#inProgress.inc();
    return {
      stalled: () => {
        if (stalled || finished) return;
        stalled = true;
        this.#stalled.inc();
      },
      finish: (result, podsReplaced = 0) => {
        if (finished) return;
        finished = true;
        this.#inProgress.dec();
        if (stalled) this.#stalled.dec();
        const seconds = Math.max(0, (this.#now() - started) / 1000);
        this.#reloads.inc({ strategy, kind, result });
        this.#duration.observe({ strategy, kind, result }, seconds);
        if (result === 'success' || result === 'failure') {
          this.reloader.reloadExecuted(result === 'success', kind, namespace);
        }
        if (podsReplaced > 0) this.#podsReplaced.inc({ kind }, podsReplaced);
      },
    };
  }

  /** Seconds from the first observed change behind a reload to that reload starting. */
  /** One API write passed the write rate limit after waiting this long. */
  apiWriteWaited(seconds: number): void {
    if (Number.isFinite(seconds)) this.#writeWait.observe(Math.max(0, seconds));
  }

  /** Where gitops_reloader_api_writes_waiting reads from. */
  apiWritesWaitingFrom(count: () => number): void {
    this.#writesWaiting = count;
  }

  eventToAction(seconds: number): void {
    if (Number.isFinite(seconds)) this.#eventToAction.observe(Math.max(0, seconds));
  }

  /**
   * Adds a source of cache sizes, read at every scrape. Resources may be given as watch paths;
   * counts for the same resource (several namespaces) are summed. Returns a function that removes it.
   */
  watchedItemsFrom(source: WatchedSource): () => void {
    this.#watchedSources.push(source);
    return () => {
      this.#watchedSources = this.#watchedSources.filter((s) => s !== source);
    };
  }

  /** One report of a watch loop's failure hook: `watch` is the watch path or the resource plural. */
  watchFailure(watch: string, mode: FailureMode): void {
    if (mode !== 'relist' && mode !== 'reconnect') this.reloader.error('watch');
    this.#watchFailures.inc({
      resource: resourceOf(watch),
      mode: WATCH_FAILURE_MODES.includes(mode) ? mode : 'other',
    });
  }

  webhookRequest(code: number): void {
    this.#webhook.inc({ code: statusLabel(code) });
  }

  alert(sink: string, result: 'sent' | 'failed' | 'dropped'): void {
    this.#alerts.inc({ sink, result });
  }

  gitCommit(result: GitCommitResult): void {
    this.#gitCommits.inc({ result });
  }

  gitRefused(rule: RefusalRule): void {
    this.#gitRefused.inc({ rule });
  }

  gitPushRetry(): void {
    this.#gitPushRetries.inc();
  }

  /** A reload was reported stalled: blocked past --stall-after, or stopped after no progress for --reload-deadline. */
  reloadStall(why: 'blocked' | 'deadline'): void {
    this.#stalls.inc({ why });
  }

  /** A reload was held instead of run: a config its pods need is missing. */
  reloadHeld(why: 'config-missing'): void {
    this.#held.inc({ why });
  }

  /** A pod replacement waited for the restart budget. */
  restartBudgetWaited(scope: 'cluster' | 'namespace'): void {
    this.#budgetWaits.inc({ scope });
  }

  /** A config was reported flapping. */
  configFlapped(): void {
    this.#flaps.inc();
  }

  /** A wave failed: a config change was halted. */
  progressiveHalted(): void {
    this.#halts.inc();
  }

  /** --brake is set: the brake gauges read the reloads it holds from `held`. */
  brakeFrom(held: () => number): () => void {
    this.#braked = held;
    return () => {
      if (this.#braked === held) this.#braked = undefined;
    };
  }

  /** Where the progressive-reload gauges read from (the leader's engine). */
  progressiveFrom(counts: () => ProgressiveCounts): () => void {
    this.#progressive = counts;
    return () => {
      if (this.#progressive === counts) this.#progressive = () => ({ halted: 0, wave: 0, halt: 0 });
    };
  }

  /** The ledger was written with another HMAC key: `workloads` were re-baselined instead of reloaded. */
  keyChanged(workloads: number): void {
    this.#keyChanges.inc();
    this.#rebaselined.inc(workloads);
  }

  /** A new object of an old name, found at start (its uid differs from the ledger's). */
  recreated(object: 'workload' | 'config', n = 1): void {
    this.#recreated.inc({ object }, n);
  }

  /** A start found a workload's configs differ from the ledger; the pods decided `result`. */
  caughtUp(result: 'reload' | 'current'): void {
    this.#caughtUp.inc({ result });
  }

  /** A term as leader ended because starting to act failed (the lease is released). */
  leaderStartFailed(reason: 'start-failed' | 'cache-sync-timeout'): void {
    this.#leaderStartFailures.inc({ reason });
  }

  /** A surge pod no reload needed was deleted by the sweep (or, in a dry run, found). */
  surgePodSwept(dryRun: boolean): void {
    this.#surgeSwept.inc({ dry_run: String(dryRun) });
  }

  /** Set once acting as leader (start-up succeeded) and on losing the Lease; a replica without leader election sets true. */
  setLeader(leader: boolean): void {
    this.#leader.set(leader ? 1 : 0);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The exposition text for /metrics. */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}
