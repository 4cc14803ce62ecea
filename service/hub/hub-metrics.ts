// Hub mode's /metrics: the process's own families (CPU, memory, the webhook, API requests) and each
// served cluster's engine families with `cluster` (its name), `cluster_id` and `server` labels, merged
// into one exposition. Every engine counts into a Metrics of its own, whose registry labels its series so
// "reloads in cluster X" is a label away, and one metric family is exported once.
import { AggregatorRegistry, Gauge, Histogram } from 'prom-client';
import { Metrics, type MetricsOptions, WRITE_WAIT_BUCKETS } from '../metrics.ts';

export class HubMetrics {
  readonly #process: Metrics;
  readonly #options: MetricsOptions;
  readonly #clusters = new Map<string, Metrics>();

  readonly #homeWriteWait: Histogram;

  constructor(process: Metrics, options: MetricsOptions) {
    this.#process = process;
    this.#options = options;
    process.registry.removeSingleMetric('gitops_reloader_hub_write_wait_seconds');
    this.#homeWriteWait = new Histogram({
      name: 'gitops_reloader_hub_write_wait_seconds',
      help: "Time each write to the hub's own API server (ledger, Job record, Event) waited for its turn under --hub-write-qps/--hub-write-burst, the budget every engine of the replica shares; 0 when a token was there.",
      buckets: WRITE_WAIT_BUCKETS,
      registers: [process.registry],
    });
  }

  /** One write to the hub's own API server passed the replica's budget after waiting this long. */
  homeWriteWaited(seconds: number): void {
    if (Number.isFinite(seconds)) this.#homeWriteWait.observe(Math.max(0, seconds));
  }

  /**
   * The hub's own gauges of refused credentials: served clusters held (no credentials used), and
   * credentials Secrets of ours refused now. Counts only: no Secret or cluster name in a label.
   */
  countHeld(held: () => number, refused: () => number): void {
    const registers = [this.#process.registry];
    for (const [name, help, count] of [
      [
        'gitops_reloader_hub_clusters_held',
        'Served clusters held because their credentials are refused (no credentials are used for them)',
        held,
      ],
      [
        'gitops_reloader_hub_credentials_refused',
        'Credentials Secrets of ours refused now (each holds its cluster, or keeps its last good credentials)',
        refused,
      ],
    ] as const) {
      this.#process.registry.removeSingleMetric(name);
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(count());
        },
      });
    }
  }

  /**
   * The Metrics of one served cluster's engine (a new one when it is served again), keyed by its id:
   * two clusters Argo CD names alike keep their own series (labels `cluster` its name, `cluster_id`,
   * `server`).
   */
  forCluster(c: { id: string; name: string; server: string }): Metrics {
    const m = new Metrics({ ...this.#options, defaultMetrics: false });
    m.registry.setDefaultLabels({ cluster: c.name || c.server, cluster_id: c.id, server: c.server });
    this.#clusters.set(c.id, m);
    return m;
  }

  /** A cluster no longer served: its series leave /metrics. */
  drop(id: string, m: Metrics): void {
    if (this.#clusters.get(id) === m) this.#clusters.delete(id);
  }

  get contentType(): string {
    return this.#process.contentType;
  }

  async text(): Promise<string> {
    const all: Array<Awaited<ReturnType<Metrics['registry']['getMetricsAsJSON']>>> = [
      await this.#process.registry.getMetricsAsJSON(),
    ];
    for (const m of this.#clusters.values()) {
      // The build-info series is the process's; the engines' own copies would only repeat it.
      const families = (await m.registry.getMetricsAsJSON()).filter(
        (f) => f.name !== 'gitops_reloader_build_info',
      );
      all.push(families);
    }
    return AggregatorRegistry.aggregate(all).metrics();
  }
}
