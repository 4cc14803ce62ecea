// The timings every integration suite runs the service with, in one place: as short as the behaviour
// under test allows, since no suite here tests these values themselves. A test about a timing sets
// its own value next to the check and says so (for example test/restart/leader.test.ts, whose claim
// is the hand-over within lease + 2 s).
export const TEST_TIMINGS = {
  /** Every observed change is handled at once, and a workload may reload again at once. */
  service: ['--min-reload-interval=0s', '--progressive-settle=2s'],
  /** Sync-aware batching with the real Argo CD: a short gather after a sync ends. */
  argocd: ['--debounce=1s', '--max-debounce-wait=2s'],
  /** Leader election for suites with several replicas: a hand-over within about 4 s. */
  lease: ['--lease-duration=4s', '--lease-renew-deadline=3s', '--lease-retry-period=500ms'],
} as const;
