import { defineConfig } from 'vitest/config';

// Two projects: pure unit tests next to the code, and integration suites in test/ that share one
// real control plane (started or reused by test/global-setup.ts).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // Builds the gopher-lua runner the Lua checks need, after checking the prerequisites.
          globalSetup: ['test/unit-setup.ts'],
          // Unit tests share the machine with the integration suites and the real Argo CD they run
          // against; on 2 busy cores a CPU-heavy case (a year of restart windows, a git fixture) can
          // take more than vitest's default 5 s without anything being wrong.
          testTimeout: 30_000,
          include: [
            'service/**/*.test.ts',
            'git/**/*.test.ts',
            'argocd-plugin/**/*.test.ts',
            'test/cluster/**/*.test.ts',
            'test/support/**/*.test.ts',
            'test/sim/**/*.test.ts',
            'bench/**/*.test.ts',
            'scripts/**/*.test.ts',
          ],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/cluster/**', 'test/support/**', 'test/sim/**'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
