import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectRedis, type Plans } from '../src/core/index.js';
import type { EnforcerWarning } from '../src/core/limits/enforcer-options.js';
import { PlanEnforcer } from '../src/core/limits/plan-enforcer.js';

const PLANS: Plans = { p: { requestsPerMinute: 10 } };

/** The warnings an enforcer with these options gives, by code. */
function warningsOf(options: Partial<ConstructorParameters<typeof PlanEnforcer>[0]>): string[] {
  const warnings: EnforcerWarning[] = [];
  void new PlanEnforcer({ plans: PLANS, onWarning: (w) => warnings.push(w), ...options }).close();
  return warnings.map((w) => w.code);
}

describe('PlanEnforcer checks its options: fails on what cannot work, warns on what works worse than meant', () => {
  it('a plain ioredis client: warned that it resends commands, queues them offline and has no command timeout', () => {
    const redis = new Redis({ lazyConnect: true });
    expect(warningsOf({ redis })).toEqual(['redis-resends-commands', 'redis-offline-queue', 'redis-no-command-timeout']);
  });

  it('a client from connectRedis: no warning', () => {
    const redis = connectRedis('redis://127.0.0.1:1', { lazyConnect: true, onStateChange: () => {} });
    expect(warningsOf({ redis })).toEqual([]);
    redis.disconnect();
  });

  it('Redis-only settings without Redis: one warning each; validate: false silences them', () => {
    expect(warningsOf({ insuranceInstances: 3, redisFailureMode: 'insurance' })).toEqual(['needs-redis', 'needs-redis']);
    expect(warningsOf({ insuranceInstances: 3, validate: false })).toEqual([]);
  });

  it.each([
    [{ redisFailureMode: 'open' as never }, /redisFailureMode/],
    [{ insuranceInstances: 0 }, /insuranceInstances/],
    [{ concurrencyLeaseMs: 10 }, /concurrencyLeaseMs/],
  ])('a value that cannot work is a RangeError naming it (%o)', (options, message) => {
    expect(() => new PlanEnforcer({ plans: PLANS, ...options })).toThrow(message);
  });
});
