import { area } from './base.mjs';

// The limits area less the Redis concurrency leases (concurrency.ts, test/concurrency-lease.test.ts):
// minutes instead of an hour on a busy 2-core machine.
export default area('limits-fast', { mutate: ['src/core/limits/**/*.ts', '!src/core/limits/concurrency.ts'], high: 90, low: 90 });
