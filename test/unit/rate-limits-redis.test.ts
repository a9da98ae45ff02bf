import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { PlanEnforcer } from '../../src/core/limits/plan-enforcer.js';
import type { Plans } from '../../src/core/limits/plans.js';
import { useRedis } from '../helpers/use-redis.js';

// The request rate in Redis (one real redis-server): each plan's minute and burst allowances are
// counters of their own, under the enforcer's key prefix.

const PLANS: Plans = { small: { requestsPerMinute: 2, burst: 1 }, large: { requestsPerMinute: 5 } };
const shared = useRedis();
const codeOf = (promise: Promise<{ release: () => Promise<void> }>) =>
  promise.then(
    async ({ release }) => (await release(), 'admitted'),
    (error: unknown) => (error instanceof ApiError ? error.code : String(error)),
  );

describe('request rate in Redis', () => {
  it('each plan counts apart, the burst apart from the minute, every key under keyPrefix', async () => {
    const limits = new PlanEnforcer({ plans: PLANS, redis: shared.redis, keyPrefix: 'rl', validate: false });
    const outcomes: string[] = [];
    for (let i = 0; i < 4; i++) outcomes.push(await codeOf(limits.admit('acct', 'small')));
    // Two a minute, then the burst's one, then 429.
    expect(outcomes).toEqual(['admitted', 'admitted', 'admitted', 'rate_limited']);
    // The same account on another plan has that plan's whole allowance.
    expect((await limits.standing('acct', 'large')).rate).toMatchObject({ limit: 5, remaining: 5 });
    expect(await codeOf(limits.admit('acct', 'large'))).toBe('admitted');
    const { rate } = await limits.standing('acct', 'large');
    expect(rate).toMatchObject({ remaining: 4 });
    // Seconds left in the minute's window that admission started.
    expect(rate.resetSeconds).toBeGreaterThanOrEqual(1);
    expect(rate.resetSeconds).toBeLessThanOrEqual(60);
    const keys = (await shared.redis.keys('*')).sort();
    expect(keys).toEqual(['rl:burst:small:acct', 'rl:rate:large:acct', 'rl:rate:small:acct']);
    await limits.close();
  });

  it('an abort while the rate is being checked rejects with its reason, not a 503', async () => {
    const limits = new PlanEnforcer({ plans: PLANS, redis: shared.redis, keyPrefix: 'ab', validate: false });
    const controller = new AbortController();
    const reason = new Error('client went away');
    const admitting = limits.admit('acct', 'large', { signal: controller.signal });
    controller.abort(reason);
    await expect(admitting).rejects.toBe(reason);
    await limits.close();
  });
});
