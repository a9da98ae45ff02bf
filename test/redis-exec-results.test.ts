import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectRedis } from '../src/core/index.js';
import { RedisDashboardStore } from '../src/dashboard/index.js';
import { useRedis } from './helpers/use-redis.js';

describe('a MULTI that Redis refuses part of is a failure, not a silent half-write', () => {
  const shared = useRedis();

  it('RedisDashboardStore.createSession rejects when the account\'s session set cannot be written', async () => {
    const store = new RedisDashboardStore({ redis: shared.redis, keyPrefix: 'ex' });
    await shared.redis.set('ex:{a:acct_x}:sessions', 'not a set'); // a value of the wrong type
    const session = { accountId: 'acct_x', email: 'a@example.com', csrfToken: 'c', createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 60_000).toISOString() };
    await expect(store.createSession('h'.repeat(64), session)).rejects.toThrow(/WRONGTYPE/);
  });

  it('RedisDashboardStore.addActivity rejects when a count cannot be written', async () => {
    const store = new RedisDashboardStore({ redis: shared.redis, keyPrefix: 'ey' });
    await shared.redis.set('ey:{a:acct_y}:daily', 'not a hash');
    await expect(store.addActivity({ daily: [{ accountId: 'acct_y', day: '2026-11-23', count: 1 }], lastUsed: [] })).rejects.toThrow(/WRONGTYPE/);
  });
});
