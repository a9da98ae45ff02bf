import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Plans } from '../src/core/index.js';
import type { ApiError } from '../src/core/errors.js';
import { PlanEnforcer } from '../src/core/limits/plan-enforcer.js';
import { useRedis } from './helpers/use-redis.js';

const PLANS: Plans = { tight: { requestsPerMinute: 3, maxConcurrent: 1 } };

const shared = useRedis();

const outcome = (enforcer: PlanEnforcer, account: string) =>
  enforcer.admit(account, 'tight').then(
    async ({ release }) => {
      await release();
      return 'admitted';
    },
    (error: ApiError) => error.code,
  );

describe.each([
  ['in memory', () => new PlanEnforcer({ plans: PLANS })],
  ['in Redis', () => new PlanEnforcer({ plans: PLANS, redis: shared.redis, keyPrefix: `order${Math.random()}` })],
])('a concurrency refusal costs no rate point (%s)', (_, make) => {
  it('five requests refused while the only slot is held leave the minute allowance as it was', async () => {
    const enforcer = make();
    const held = await enforcer.admit('acct', 'tight'); // 1 of 3 points
    const refused = await Promise.all(Array.from({ length: 5 }, () => outcome(enforcer, 'acct')));
    expect(refused).toEqual(Array(5).fill('concurrency_limited'));
    await held.release();
    // Two points are left: the refusals took none.
    expect(await outcome(enforcer, 'acct')).toBe('admitted');
    expect(await outcome(enforcer, 'acct')).toBe('admitted');
    expect(await outcome(enforcer, 'acct')).toBe('rate_limited');
    await enforcer.close();
  });

  it('a concurrency refusal still carries the account rate-limit headers', async () => {
    const enforcer = make();
    const held = await enforcer.admit('acct2', 'tight');
    const refusal = await enforcer.admit('acct2', 'tight').catch((error: ApiError) => error);
    expect((refusal as ApiError).code).toBe('concurrency_limited');
    expect((refusal as ApiError).headers).toMatchObject({ 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2', 'retry-after': '1' });
    await held.release();
    await enforcer.close();
  });
});
