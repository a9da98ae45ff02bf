import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../src/core/index.js';
import { RedisQuotaStore } from '../src/core/limits/quota-store.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';

describe('RedisQuotaStore leaves no counter without an expiry', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = connectRedis(server.url, { onStateChange: () => {} });
    await new Promise((r) => redis.once('ready', r));
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('a refused first charge leaves no key, or one that expires', async () => {
    const store = new RedisQuotaStore(redis, 'qx');
    expect(await store.charge('acct:2026-11', 5, 3, 3600)).toBe(false);
    const ttl = await redis.ttl('qx:quota:acct:2026-11');
    // -2: no key at all; otherwise it must expire (-1 means it would stay forever).
    expect(ttl === -2 || ttl > 0, `TTL ${ttl}`).toBe(true);
    expect(await store.used('acct:2026-11')).toBe(0);
  });

  it('an accepted charge expires after the given time, and refusals keep the count', async () => {
    const store = new RedisQuotaStore(redis, 'qy');
    expect(await store.charge('acct:2026-11', 2, 3, 3600)).toBe(true);
    expect(await store.charge('acct:2026-11', 2, 3, 3600)).toBe(false);
    expect(await store.used('acct:2026-11')).toBe(2);
    const ttl = await redis.ttl('qy:quota:acct:2026-11');
    expect(ttl).toBeGreaterThan(3500);
    expect(ttl).toBeLessThanOrEqual(3600);
  });
});
