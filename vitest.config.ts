import { defineConfig } from 'vitest/config';
import { runAloneFiles } from './test/run-alone.ts';

// Integration files spend most of their time waiting on the control plane, Argo CD and Flux, not
// computing, so they run side by side: this many workers, chosen by measurement on 2 cores
// (docs/CONTRIBUTING.md, "How fast"). TEST_WORKERS overrides it for a run.
const workers = Number(process.env.TEST_WORKERS ?? 4);

const unitInclude = [
  'service/**/*.test.ts',
  'git/**/*.test.ts',
  'argocd-plugin/**/*.test.ts',
  'test/cluster/**/*.test.ts',
  'test/support/**/*.test.ts',
  'test/reporters/**/*.test.ts',
  'bench/**/*.test.ts',
  'scripts/**/*.test.ts',
  'test/compat/table.test.ts',
];
const notIntegration = [
  'test/cluster/**',
  'test/support/**',
  'test/sim/**',
  'test/reporters/**',
  'test/compat/table.test.ts',
];

// Four projects. `unit` (pure tests next to the code) and `sim` (the deterministic simulations) need
// no control plane: `npm run test:quick` runs those two. `integration` runs against the one real
// control plane (started or reused by test/global-setup.ts), its files side by side; the files of
// test/run-alone.ts form `integration-alone`, one at a time after all the others.
export default defineConfig({
  test: {
    maxWorkers: workers,
    reporters: ['default', './test/reporters/slowest-files.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          maxWorkers: workers,
          // Builds the gopher-lua runner the Lua checks need, after checking the prerequisites.
          globalSetup: ['test/unit-setup.ts'],
          // Unit tests share the machine with the integration suites and the real Argo CD they run
          // against; on 2 busy cores a CPU-heavy case (a year of restart windows, a git fixture) can
          // take more than vitest's default 5 s without anything being wrong.
          testTimeout: 30_000,
          include: unitInclude,
        },
      },
      {
        test: {
          name: 'sim',
          maxWorkers: workers,
          globalSetup: ['test/unit-setup.ts'],
          testTimeout: 30_000,
          include: ['test/sim/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          maxWorkers: workers,
          include: ['test/**/*.test.ts'],
          exclude: [...notIntegration, ...runAloneFiles()],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          name: 'integration-alone',
          // One worker and the default group: vitest runs these after every other file, one by one.
          maxWorkers: 1,
          include: runAloneFiles().length > 0 ? runAloneFiles() : ['test/none-runs-alone'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
