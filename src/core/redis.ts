import { Redis, type RedisOptions } from 'ioredis';

/**
 * An ioredis client set up for request paths: commands fail at once while disconnected
 * (no offline queue) and after `commandTimeoutMs` when Redis hangs, so a Redis outage turns into
 * a prompt 503 (or insurance limits), never a stuck request; it reconnects by itself.
 */
export function connectRedis(url: string, options: RedisOptions & { commandTimeoutMs?: number } = {}): Redis {
  const { commandTimeoutMs = 1000, ...rest } = options;
  return new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    ...rest,
  });
}
