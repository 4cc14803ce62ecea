// Fixture sizes and repetition counts per --scale. `full` is the fixture; `small` is a
// tenth of it (for CI and shared machines); `tiny` is for developing the bench itself.

export const SCALES = ['full', 'small', 'tiny'] as const;
export type ScaleName = (typeof SCALES)[number];

export interface Scale {
  name: ScaleName;
  namespaces: number;
  /** ConfigMaps in total, and as many Secrets; spread evenly over the namespaces. */
  configsPerKind: number;
  /** Approximate size of each ConfigMap and Secret (4 keys). */
  configBytes: number;
  deployments: number;
  replicas: number;
  /** Service starts measured for start-up figures (restarts over an existing ledger). */
  startupRuns: number;
  /** Idle churn before rss_steady_mib is read (the issue says 5 minutes at full). */
  steadyAfterS: number;
  /** Churn rate during that period: updates per second of unreferenced configs. */
  churnPerS: number;
  latencyChanges: number;
  latencyDefaultChanges: number;
  /** Argo CD syncs changing 3 configs of one workload each. */
  syncs: number;
  /** The same without Argo CD: 3 configs changed back to back, inside the debounce window. */
  bursts: number;
  /** Changes that must not reload anything (unreferenced configs and keys). */
  probes: number;
  /** Deployments of each bulk run; as many again, not opted in, for the native rolling update. */
  bulkDeployments: number;
  /** Bulk runs of ours, and as many of the native rolling update, alternately first. */
  bulkRuns: number;
  /** Replicas of the two 10-replica restart shapes (the third shape has 1). */
  restartReplicas: number;
  /** Pairs per restart shape (ours and native, alternately first). */
  restartPairs: number;
  flapSeconds: number;
  flapPerS: number;
  /**
   * Deployments of the progressive phase, all reading ONE ConfigMap (issue 24: 100), `replicas` each,
   * in their own namespace and on their own kwok nodes, created by the phase itself.
   */
  progressiveDeployments: number;
  /** Hub phase (issue 25): the numbers of served clusters whose start-up and memory are measured. */
  hubClusters: number[];
  /** Start-ups per number of clusters (each a first install of every cluster). */
  hubStartRuns: number;
  /** Clusters served by the two replicas of the failover (one of hubClusters). */
  hubFailoverClusters: number;
  /** Also a failover with the default lease timings (15 s), not only the short ones (4 s). */
  hubDefaultLeaseFailover: boolean;
  /** Config changes timed to 'reload complete' among the most clusters (0: none). */
  hubLatencyChanges: number;
  /** Fixture objects created in parallel. */
  inFlight: number;
}

const full: Scale = {
  name: 'full',
  namespaces: 50,
  configsPerKind: 10_000,
  configBytes: 2048,
  deployments: 2_000,
  replicas: 2,
  startupRuns: 3,
  steadyAfterS: 300,
  churnPerS: 2,
  latencyChanges: 200,
  latencyDefaultChanges: 30,
  syncs: 100,
  bursts: 100,
  probes: 50,
  bulkDeployments: 100,
  bulkRuns: 3,
  restartReplicas: 10,
  restartPairs: 3,
  flapSeconds: 60,
  flapPerS: 10,
  progressiveDeployments: 100,
  hubClusters: [1, 10, 50],
  hubStartRuns: 3,
  hubFailoverClusters: 10,
  hubDefaultLeaseFailover: true,
  hubLatencyChanges: 5,
  inFlight: 20,
};

const small: Scale = {
  ...full,
  name: 'small',
  namespaces: 5,
  configsPerKind: 1_000,
  deployments: 200,
  steadyAfterS: 60,
  latencyChanges: 20,
  latencyDefaultChanges: 10,
  syncs: 10,
  bursts: 10,
  probes: 10,
  bulkDeployments: 10,
  hubStartRuns: 1,
  hubLatencyChanges: 3,
};

const tiny: Scale = {
  ...small,
  name: 'tiny',
  namespaces: 2,
  configsPerKind: 100,
  deployments: 30,
  startupRuns: 2,
  steadyAfterS: 15,
  latencyChanges: 4,
  latencyDefaultChanges: 2,
  syncs: 2,
  bursts: 2,
  probes: 3,
  bulkDeployments: 3,
  bulkRuns: 2,
  restartPairs: 1,
  flapSeconds: 20,
  progressiveDeployments: 20,
};

export const scales: Record<ScaleName, Scale> = { full, small, tiny };

/** Per-namespace layout; throws when the scale cannot hold what the phases need. */
export function layout(s: Scale) {
  const configsPerNs = Math.floor(s.configsPerKind / s.namespaces);
  const deploymentsPerNs = Math.floor(s.deployments / s.namespaces);
  if (configsPerNs * s.namespaces !== s.configsPerKind || deploymentsPerNs * s.namespaces !== s.deployments) {
    throw new Error(
      `scale ${s.name}: configs and deployments must divide evenly over ${s.namespaces} namespaces`,
    );
  }
  // Each Deployment uses 3 config slots (a, b, c); slots past 3·D stay unreferenced (churn, probes).
  const unreferenced = configsPerNs - 3 * deploymentsPerNs;
  if (unreferenced < 2) {
    throw new Error(
      `scale ${s.name}: ${configsPerNs} configs per namespace cannot serve ${deploymentsPerNs} Deployments`,
    );
  }
  const needed =
    s.latencyChanges +
    s.latencyDefaultChanges +
    s.syncs +
    s.bursts +
    s.probes +
    // ours and the native comparison, each on its own Deployments
    2 * s.bulkDeployments * s.bulkRuns;
  if (needed > s.deployments) {
    throw new Error(
      `scale ${s.name}: the phases need ${needed} distinct Deployments, the fixture has ${s.deployments}`,
    );
  }
  return { configsPerNs, deploymentsPerNs, unreferenced };
}
