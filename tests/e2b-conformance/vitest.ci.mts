// hutch's runner for the tests of E2B's code interpreter SDK (js/tests at
// the pinned commit), unchanged, as its own vitest.config.mts runs them but
// for the Bun and Deno runtimes. The server comes from the environment.
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    fileParallelism: false,
    include: ['tests/**/*.test.ts'],
    exclude: ['tests/runtimes/**'],
    globals: false,
    testTimeout: 30_000,
    environment: 'node',
    deps: { interopDefault: true },
  },
})
