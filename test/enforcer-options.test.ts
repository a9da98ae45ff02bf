import { Cluster, Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { connectRedis } from '../src/core/redis.js';
import type { Plans } from '../src/core/limits/plans.js';
import type { EnforcerWarning } from '../src/core/limits/enforcer-options.js';
import { PlanEnforcer } from '../src/core/limits/plan-enforcer.js';

const PLANS: Plans = { p: { requestsPerMinute: 10 } };

/** The warnings an enforcer with these options gives. */
function fullWarningsOf(options: Partial<ConstructorParameters<typeof PlanEnforcer>[0]>): EnforcerWarning[] {
  const warnings: EnforcerWarning[] = [];
  void new PlanEnforcer({ plans: PLANS, onWarning: (w) => warnings.push(w), ...options }).close();
  return warnings;
}

/** The warnings an enforcer with these options gives, by code. */
function warningsOf(options: Partial<ConstructorParameters<typeof PlanEnforcer>[0]>): string[] {
  return fullWarningsOf(options).map((w) => w.code);
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

  it('each warning says what to set instead', () => {
    const messages = Object.fromEntries(fullWarningsOf({ redis: new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }) }).map((w) => [w.code, w.message]));
    expect(messages['redis-resends-commands']).toMatch(/could apply twice.*connectRedis\(\) or autoResendUnfulfilledCommands: false/);
    expect(messages['redis-offline-queue']).toMatch(/queues commands while disconnected.*connectRedis\(\) or enableOfflineQueue: false/);
    expect(messages['redis-cluster-resends-commands']).toMatch(/could apply twice.*connectRedis\(\) or retryDelayOnFailover: 0/);
    expect(messages['redis-no-command-timeout']).toMatch(/no commandTimeout.*connectRedis\(\) or set commandTimeout/);
    const [needsRedis] = fullWarningsOf({ concurrencyLeaseMs: 5000 });
    expect(needsRedis).toEqual({ code: 'needs-redis', message: 'concurrencyLeaseMs has no effect without redis (the limits are in memory)' });
  });

  it('a usageStore beside redis: warned that Redis keeps the quota and usage instead', () => {
    const redis = connectRedis('redis://127.0.0.1:1', { lazyConnect: true, onStateChange: () => {} });
    const usageStore = {} as ConstructorParameters<typeof PlanEnforcer>[0]['usageStore'];
    expect(fullWarningsOf({ redis, usageStore })).toEqual([{ code: 'usage-store-ignored', message: 'usageStore is not used with redis (the quota and usage are kept in Redis)' }]);
    redis.disconnect();
  });

  it('without onWarning, each warning is one line on stderr (console.warn) naming its code', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      void new PlanEnforcer({ plans: PLANS, insuranceInstances: 2 }).close();
      expect(warn.mock.calls).toEqual([['bgcut: insuranceInstances has no effect without redis (the limits are in memory) [needs-redis]']]);
    } finally {
      warn.mockRestore();
    }
  });

  it('the smallest values that work are accepted: 1 instance, a 1000 ms lease', () => {
    const redis = connectRedis('redis://127.0.0.1:1', { lazyConnect: true, onStateChange: () => {} });
    expect(warningsOf({ redis, insuranceInstances: 1, concurrencyLeaseMs: 1000, redisFailureMode: 'insurance' })).toEqual([]);
    expect(warningsOf({ redis, redisFailureMode: 'fail-closed' })).toEqual([]);
    expect(() => new PlanEnforcer({ plans: PLANS, concurrencyLeaseMs: 999 })).toThrow(/concurrencyLeaseMs must be at least 1000/);
    expect(() => new PlanEnforcer({ plans: PLANS, insuranceInstances: 1.5 })).toThrow(/insuranceInstances must be an integer >= 1/);
    expect(() => new PlanEnforcer({ plans: PLANS, concurrencyLeaseMs: Infinity })).toThrow(/concurrencyLeaseMs/);
    redis.disconnect();
  });
});
