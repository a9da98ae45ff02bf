import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    setupFiles: ['test/setup/capture-output.ts'],
    // The suites share one real inference server and two cores: running files one at a time
    // keeps every deadline in the tests meaningful.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // expect.poll waits on a condition; its deadline is only a backstop. Vitest's default (1 s)
    // is one a busy 2-core box can outrun (a browser drawing a canvas, a Redis round trip), so a
    // poll without its own timeout gets 20 s: still well inside the test's own timeout, so the
    // poll reports what it last saw.
    expect: { poll: { timeout: 20_000 } },
  },
});
