import { defineConfig } from 'vitest/config';

/**
 * Vitest for mutation runs: an area's fast, dedicated unit tests only, with no global setup (no
 * inference server, no output capture) so StrykerJS can run them hundreds of times in minutes.
 */
export function unitConfig(include: string[]) {
  return defineConfig({
    root: new URL('..', import.meta.url).pathname,
    test: {
      include,
      fileParallelism: false,
      // Redis-backed stores on one server, not also on a Cluster (test/helpers/redis-topologies.ts).
      env: { BGCUT_TEST_REDIS_TOPOLOGY: 'server' },
      testTimeout: 30_000,
      hookTimeout: 60_000,
    },
  });
}
