import { defineConfig } from 'vitest/config';

// Two projects: pure unit tests next to the code, and integration suites in test/ that share one
// real control plane (started or reused by test/global-setup.ts).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            'service/**/*.test.ts',
            'git/**/*.test.ts',
            'argocd-plugin/**/*.test.ts',
            'test/cluster/**/*.test.ts',
            'test/support/**/*.test.ts',
            'bench/**/*.test.ts',
          ],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/cluster/**', 'test/support/**'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
