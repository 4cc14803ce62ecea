// The integration files that cannot share the control plane with other files: each runs by itself,
// after every other file (the `integration-alone` project of vitest.config.ts). Every other
// integration file runs side by side with others, each in its own namespaces and on its own ports.
// A file belongs here only for something it shares by a fixed name, takes over for a while, or
// measures that concurrent load would distort; the reason says what, so it can leave the list once
// that is gone.
export const RUN_ALONE: ReadonlyArray<{ file: string; why: string }> = [
  {
    file: 'test/argocd/real/notifications.test.ts',
    why: "its scenarios need Argo CD's notification to come after the Deployment controller started the rollout (or a later wave's pod to be created before the reload); load from other files reorders them",
  },
  {
    file: 'test/progressive/brake.test.ts',
    why: 'sets the brake (SIGTERM) mid-reload; once in three side-by-side runs the braked start-up logged no hold for a reload interrupted 2 s in (cause not yet found; a silent hold of a workload not in the cache now logs)',
  },
  {
    file: 'test/engine/bulk.test.ts',
    why: 'measures the API write rate on the wire; a CPU stall from another file bunches writes together',
  },
  {
    file: 'test/hub/hub-mode.test.ts',
    why: 'starts the spokes hub-b and hub-c and flips the serve label on their fixed cluster Secrets in argocd',
  },
  {
    file: 'test/hub/spoke.test.ts',
    why: 'starts the spoke hub-b, which hub-mode.test.ts also uses, and replaces it after one failed probe',
  },
  {
    file: 'test/leader/leader.test.ts',
    why: 'asserts sub-second leader hand-overs and stalls its own event loop on purpose',
  },
  {
    file: 'test/restart/leader.test.ts',
    why: 'asserts that the standby takes over within lease + 2 s of the kill',
  },
];

export const runAloneFiles = (): string[] => RUN_ALONE.map((f) => f.file);
