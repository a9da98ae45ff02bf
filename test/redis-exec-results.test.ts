import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../src/core/index.js';
import { RedisDashboardStore } from '../src/dashboard/index.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';

describe('a MULTI that Redis refuses part of is a failure, not a silent half-write', () => {
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

  it('RedisDashboardStore.createSession rejects when the account\'s session set cannot be written', async () => {
    const store = new RedisDashboardStore({ redis, keyPrefix: 'ex' });
    await redis.set('ex:sessions-of:acct_x', 'not a set'); // a value of the wrong type
    const session = { accountId: 'acct_x', email: 'a@example.com', csrfToken: 'c', createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 60_000).toISOString() };
    await expect(store.createSession('h'.repeat(64), session)).rejects.toThrow(/WRONGTYPE/);
  });

  it('RedisDashboardStore.addActivity rejects when a count cannot be written', async () => {
    const store = new RedisDashboardStore({ redis, keyPrefix: 'ey' });
    await redis.set('ey:daily:acct_y', 'not a hash');
    await expect(store.addActivity({ daily: [{ accountId: 'acct_y', day: '2026-11-23', count: 1 }], lastUsed: [] })).rejects.toThrow(/WRONGTYPE/);
  });
});
