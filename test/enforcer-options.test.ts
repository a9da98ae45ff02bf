import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectRedis } from '../src/core/redis.js';
import type { Plans } from '../src/core/limits/plans.js';
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

  it('a plain ioredis Cluster: the same warnings, read from its redisOptions, and that it resends a command whose node connection closed', () => {
    const redis = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    expect(warningsOf({ redis })).toEqual(['redis-resends-commands', 'redis-offline-queue', 'redis-cluster-resends-commands', 'redis-no-command-timeout']);
  });

  it('a Cluster from connectRedis (redis+cluster://): no warning (its settings are under redisOptions, not options)', () => {
    const redis = connectRedis('redis+cluster://127.0.0.1:1,127.0.0.1:2', { lazyConnect: true, onStateChange: () => {} });
    expect(redis).toBeInstanceOf(Cluster);
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
