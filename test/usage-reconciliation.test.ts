import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type Plans } from '../src/core/index.js';
import { PlanEnforcer } from '../src/core/limits/plan-enforcer.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';

const PLANS: Plans = { metered: { requestsPerMinute: 10_000, monthlyQuota: { unit: 'images', amount: 100 } } };
const quiet = { onStateChange: () => {} };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ready = (redis: Redis) =>
  redis.status === 'ready' ? Promise.resolve() : new Promise<void>((r) => redis.once('ready', () => r()));

/** Polls the shared (Redis) standing until `check` holds; resolves with the last standing. */
async function eventually(enforcer: PlanEnforcer, account: string, check: (s: Awaited<ReturnType<PlanEnforcer['standing']>>) => boolean) {
  let standing = await enforcer.standing(account, 'metered');
  for (let i = 0; i < 40 && !check(standing); i++) {
    await sleep(100);
    standing = await enforcer.standing(account, 'metered');
  }
  return standing;
}

describe('usage recorded while Redis is away reaches Redis when it is back', () => {
  let server: RedisServer;
  const clients: Redis[] = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await server?.stop();
  });
  const client = async () => {
    const redis = connectRedis(server.url, quiet);
    clients.push(redis);
    await ready(redis);
    return redis;
  };

  it('insurance mode: quota charges, refunds and metered usage made in memory are added to Redis', async () => {
    const redis = await client();
    const enforcer = new PlanEnforcer({ plans: PLANS, redis, redisFailureMode: 'insurance' });
    await server.stop();
    // Three cutouts while Redis is down: two succeed, one fails and is refunded.
    await enforcer.reserveQuota('acct_ins', 'metered', 2_000_000);
    await enforcer.reserveQuota('acct_ins', 'metered', 3_000_000);
    const refund = await enforcer.reserveQuota('acct_ins', 'metered', 1_000_000);
    await refund();
    // The handler reports a failed record to onInternalError and answers anyway.
    await enforcer.recordUsage('acct_ins', 2_000_000).catch(() => {});
    await enforcer.recordUsage('acct_ins', 3_000_000).catch(() => {});

    await server.restart(); // empty, as a Redis without persistence comes back
    await ready(redis);
    const standing = await eventually(enforcer, 'acct_ins', (s) => s.usage.images === 2 && s.quota?.used === 2);
    expect(standing.quota?.used).toBe(2);
    expect(standing.usage).toMatchObject({ images: 2, megapixels: 5 });
  });

  it('fail-closed mode: a refund and a usage record lost to a Redis blip are applied once it is back', async () => {
    const redis = await client();
    const enforcer = new PlanEnforcer({ plans: PLANS, redis });
    await enforcer.reserveQuota('acct_blip', 'metered', 1_000_000); // a cutout that succeeds
    const refund = await enforcer.reserveQuota('acct_blip', 'metered', 1_000_000); // one that fails
    expect((await enforcer.standing('acct_blip', 'metered')).quota?.used).toBe(2);
    const back = new Promise((r) => redis.once('ready', r));
    redis.disconnect(true); // the connection drops and comes back
    await refund();
    await enforcer.recordUsage('acct_blip', 1_000_000).catch(() => {});
    await back;
    const standing = await eventually(enforcer, 'acct_blip', (s) => s.quota?.used === 1 && s.usage.images === 1);
    expect(standing.quota?.used).toBe(1);
    expect(standing.usage).toMatchObject({ images: 1, megapixels: 1 });
  });
});
