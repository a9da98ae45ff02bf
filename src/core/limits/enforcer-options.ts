import { nodeOptionsOf, type RedisClient } from '../redis.js';
import { Cluster } from 'ioredis';
import type { RedisFailureMode } from './insurance.js';
import type { Plans } from './plans.js';
import type { QuotaStore } from './quota-store.js';
import type { UsageMeter } from './usage-meter.js';

/**
 * Where one instance keeps the month's quota counters and usage without Redis (in memory by
 * default, lost on restart). FileDashboardStore's `usage` keeps them in its file, beside the
 * daily history the dashboard charts from the same records.
 */
export type LocalUsageStore = QuotaStore & UsageMeter;

export interface PlanEnforcerOptions {
  plans: Plans;
  /** Shared state for many API instances; absent for in-memory limits (one instance). */
  redis?: RedisClient | undefined;
  redisFailureMode?: RedisFailureMode | undefined;
  /** Without `redis`: where the month's quota and usage are kept. Default: memory. Ignored with `redis`. */
  usageStore?: LocalUsageStore | undefined;
  /** How many API instances share the limits, for sizing insurance limits. Default 1. */
  insuranceInstances?: number | undefined;
  /** Prefix of every Redis key. Default `bgcut`. */
  keyPrefix?: string | undefined;
  /**
   * Lease of a concurrency slot in Redis: its holder renews it every third of this time, and a
   * slot whose release was lost (a Redis blip, a crashed instance) is free again after it.
   * Default 10 000 ms.
   */
  concurrencyLeaseMs?: number | undefined;
  /**
   * Checks of the configuration that warn rather than fail (express-rate-limit's `validate`):
   * `false` turns them off. Each warning is given once per enforcer. Default true.
   */
  validate?: boolean | undefined;
  /** Where warnings go. Default: one line on stderr. */
  onWarning?: ((warning: EnforcerWarning) => void) | undefined;
}

export interface EnforcerWarning {
  /** Stable name of the check, e.g. `redis-resends-commands`. */
  code: string;
  message: string;
}

/**
 * Fails (RangeError) on a value that cannot work and warns on one that works worse than the
 * operator probably thinks: options that do nothing without Redis, and an ioredis client that
 * resends or queues commands (a resent quota write could count twice; a queued one waits instead
 * of failing over).
 */
export function validateEnforcerOptions(options: PlanEnforcerOptions): void {
  const { redis, redisFailureMode, insuranceInstances, concurrencyLeaseMs } = options;
  if (redisFailureMode !== undefined && redisFailureMode !== 'fail-closed' && redisFailureMode !== 'insurance') {
    throw new RangeError('redisFailureMode must be "fail-closed" or "insurance"');
  }
  if (insuranceInstances !== undefined && !(Number.isInteger(insuranceInstances) && insuranceInstances >= 1)) {
    throw new RangeError('insuranceInstances must be an integer >= 1');
  }
  if (concurrencyLeaseMs !== undefined && !(Number.isFinite(concurrencyLeaseMs) && concurrencyLeaseMs >= 1000)) {
    throw new RangeError('concurrencyLeaseMs must be at least 1000');
  }
  if (options.validate === false) return;
  const warn = options.onWarning ?? ((w: EnforcerWarning) => console.warn(`bgcut: ${w.message} [${w.code}]`));
  if (!redis) {
    for (const name of ['redisFailureMode', 'insuranceInstances', 'concurrencyLeaseMs'] as const) {
      if (options[name] !== undefined) warn({ code: 'needs-redis', message: `${name} has no effect without redis (the limits are in memory)` });
    }
    return;
  }
  if (options.usageStore) warn({ code: 'usage-store-ignored', message: 'usageStore is not used with redis (the quota and usage are kept in Redis)' });
  const client = nodeOptionsOf(redis);
  if (client.autoResendUnfulfilledCommands !== false) {
    warn({ code: 'redis-resends-commands', message: 'the Redis client resends unanswered commands after a reconnect, so a quota or usage write could apply twice: create it with connectRedis() or autoResendUnfulfilledCommands: false' });
  }
  if (client.enableOfflineQueue !== false) {
    warn({ code: 'redis-offline-queue', message: 'the Redis client queues commands while disconnected, so requests wait for Redis instead of failing over: create it with connectRedis() or enableOfflineQueue: false' });
  }
  // ioredis fills in its default (100) for an option left out, and resends only when it is > 0.
  if (redis instanceof Cluster && Number(redis.options.retryDelayOnFailover) > 0) {
    warn({ code: 'redis-cluster-resends-commands', message: 'the Redis Cluster client sends a command again when its node\'s connection closed before the reply, so a quota or usage write could apply twice: create it with connectRedis() or retryDelayOnFailover: 0' });
  }
  if (!client.commandTimeout) {
    warn({ code: 'redis-no-command-timeout', message: 'the Redis client has no commandTimeout, so a Redis that hangs holds requests: create it with connectRedis() or set commandTimeout' });
  }
}
