import { unitConfig } from './vitest-base.js';

export default unitConfig(['test/unit/limits.test.ts', 'test/unit/redis-outage.test.ts', 'test/unit/rate-limits-redis.test.ts', 'test/enforcer-options.test.ts', 'test/budget.test.ts', 'test/unit/budget-priority.test.ts', 'test/concurrency-lease.test.ts', 'test/quota-store-expiry.test.ts', 'test/unit/quota-usage-redis.test.ts', 'test/unit/concurrency-store.test.ts']);
