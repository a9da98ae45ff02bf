/**
 * StrykerJS over one area at a time, with that area's fast, dedicated tests (no inference
 * server: see vitest-base.ts). `npm run mutation` runs every area; `npm run mutation -- auth`
 * one of them. Scores and the survivors left are in docs/testing.md.
 */
export function area(name, { mutate, high, low }) {
  return {
    testRunner: 'vitest',
    plugins: ['@stryker-mutator/vitest-runner'],
    vitest: { configFile: `stryker/vitest.${name}.config.ts`, related: false },
    mutate,
    coverageAnalysis: 'perTest',
    // A shared 2-core machine: one sandbox at a time unless STRYKER_CONCURRENCY says otherwise.
    concurrency: Number(process.env.STRYKER_CONCURRENCY ?? 1),
    // A mutant that hangs (a promise never settled) counts as detected: give it seconds, not minutes.
    timeoutMS: Number(process.env.STRYKER_TIMEOUT_MS ?? 5000),
    timeoutFactor: 1.5,
    reporters: ['clear-text', 'progress-append-only', 'json'],
    jsonReporter: { fileName: `reports/mutation/${name}.json` },
    tempDirName: `.stryker-tmp-${name}`,
    cleanTempDir: 'always',
    // dist stays: some tests run the built CLI (unmutated; they cannot kill mutants, only pass).
    ignorePatterns: ['bench-results', 'reports', 'docs/screenshots', '.data', '.stryker-tmp*'],
    thresholds: { high, low, break: null },
  };
}
