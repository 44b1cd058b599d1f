// hutch's runner for the tests of E2B's JS SDK (packages/js-sdk/tests at the
// pinned commit), unchanged: the same projects as the SDK's own
// vitest.config.mts, but for the browser one (it downloads a browser) and
// the Cloudflare runtimes. The server comes from the environment
// (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY), set by ./run.
import { defineConfig } from 'vitest/config'

const node = {
  globals: false,
  environment: 'node',
  setupFiles: ['tests/globalFetchFallback.setup.ts'],
  deps: { interopDefault: true },
}

export default defineConfig({
  test: {
    // Two cores: a file at a time keeps the sandboxes' start times honest.
    fileParallelism: false,
    projects: [
      {
        test: {
          ...node,
          name: 'unit',
          include: ['tests/**/*.test.ts'],
          exclude: ['tests/runtimes/**', 'tests/template/**', 'tests/connectionConfig.test.ts'],
          isolate: true,
          testTimeout: 30_000,
        },
      },
      { test: { ...node, name: 'template', include: ['tests/template/**/*.test.ts'], testTimeout: 180_000 } },
      {
        test: {
          globals: false,
          environment: 'node',
          name: 'connectionConfig',
          include: ['tests/connectionConfig.test.ts'],
          isolate: true,
          testTimeout: 10_000,
        },
      },
    ],
  },
})
