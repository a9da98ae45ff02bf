import { describe, expect, it } from 'vitest';
import { RedisQuotaStore } from '../src/core/limits/quota-store.js';
import { redisTopologies, useRedisTopology } from './helpers/redis-topologies.js';

describe.each(redisTopologies)('RedisQuotaStore leaves no counter without an expiry, on $name', (topology) => {
  const shared = useRedisTopology(topology);

  it('a refused first charge leaves no key, or one that expires', async () => {
    const store = new RedisQuotaStore(shared.redis, 'qx');
    expect(await store.charge('acct:2026-11', 5, 3, 3600)).toBe(false);
    const ttl = await shared.redis.ttl('qx:{q:acct:2026-11}:quota');
    // -2: no key at all; otherwise it must expire (-1 means it would stay forever).
    expect(ttl === -2 || ttl > 0, `TTL ${ttl}`).toBe(true);
    expect(await store.used('acct:2026-11')).toBe(0);
  });

  it('an accepted charge expires after the given time, and refusals keep the count', async () => {
    const store = new RedisQuotaStore(shared.redis, 'qy');
    expect(await store.charge('acct:2026-11', 2, 3, 3600)).toBe(true);
    expect(await store.charge('acct:2026-11', 2, 3, 3600)).toBe(false);
    expect(await store.used('acct:2026-11')).toBe(2);
    const ttl = await shared.redis.ttl('qy:{q:acct:2026-11}:quota');
    expect(ttl).toBeGreaterThan(3500);
    expect(ttl).toBeLessThanOrEqual(3600);
  });
});
