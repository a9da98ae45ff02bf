#!/usr/bin/env node
// npm run mutation [-- area ...]: StrykerJS over each area (auth, limits, idempotency,
// dashboard-keys) in turn, one sandbox at a time (STRYKER_CONCURRENCY to change). Opt-in: not
// part of npm test or .ci/run. Reports: reports/mutation/<area>.json and the clear-text table.
import { spawnSync } from 'node:child_process';

const AREAS = ['auth', 'limits', 'idempotency', 'dashboard-keys'];
// Quicker subsets, run only when named: limits without the Redis concurrency leases, auth without CLI processes.
const EXTRA = ['limits-fast', 'auth-fast', 'idempotency-step'];
const asked = process.argv.slice(2);
const unknown = asked.filter((a) => !AREAS.includes(a) && !EXTRA.includes(a));
if (unknown.length) {
  console.error(`unknown area(s): ${unknown.join(', ')}; areas are ${AREAS.join(', ')}`);
  process.exit(2);
}
let failed = false;
for (const area of asked.length ? asked : AREAS) {
  const started = Date.now();
  console.log(`\n== mutation: ${area}`);
  const run = spawnSync('npx', ['stryker', 'run', `stryker/${area}.config.mjs`], { stdio: 'inherit' });
  console.log(`== ${area}: exit ${run.status}, ${((Date.now() - started) / 60_000).toFixed(1)} min`);
  failed ||= run.status !== 0;
}
process.exit(failed ? 1 : 0);
