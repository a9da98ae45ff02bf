import { RateLimiterMemory, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { ApiError } from '../errors.js';

export interface Plan {
  /** Requests an account on this plan may make per minute. */
  requestsPerMinute: number;
}

export type Plans = Record<string, Plan>;

/** Plans used when the handler is given none. */
export const DEFAULT_PLANS: Plans = {
  free: { requestsPerMinute: 10 },
  pro: { requestsPerMinute: 120 },
};

export interface RateLimitState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/** The IETF RateLimit / RateLimit-Policy fields plus the common X-RateLimit-* ones. */
export function rateLimitHeaders(state: RateLimitState): Record<string, string> {
  return {
    'ratelimit-policy': `"minute";q=${state.limit};w=60`,
    ratelimit: `"minute";r=${state.remaining};t=${state.resetSeconds}`,
    'x-ratelimit-limit': String(state.limit),
    'x-ratelimit-remaining': String(state.remaining),
    'x-ratelimit-reset': String(state.resetSeconds),
  };
}

/**
 * Per-account request rate limits, one fixed-window limiter per plan. The limiter is
 * rate-limiter-flexible's in-memory one: right for a single API instance; several instances
 * need a shared store (Redis) so that the limit holds across all of them.
 */
export class PlanLimiter {
  private readonly limiters = new Map<string, { plan: Plan; limiter: RateLimiterAbstract }>();

  constructor(plans: Plans, createLimiter: (name: string, plan: Plan) => RateLimiterAbstract = memoryLimiter) {
    for (const [name, plan] of Object.entries(plans)) {
      this.limiters.set(name, { plan, limiter: createLimiter(name, plan) });
    }
  }

  has(plan: string): boolean {
    return this.limiters.has(plan);
  }

  /** Takes one request from the account's allowance; throws a 429 ApiError when none is left. */
  async consume(accountId: string, planName: string): Promise<RateLimitState> {
    const entry = this.limiters.get(planName);
    if (!entry) throw new ApiError('internal_error', { detail: `The account's plan "${planName}" is not configured.` });
    const limit = entry.plan.requestsPerMinute;
    try {
      const res = await entry.limiter.consume(accountId, 1);
      return { limit, remaining: res.remainingPoints, resetSeconds: Math.ceil(res.msBeforeNext / 1000) };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) {
        throw new ApiError('service_unavailable', { detail: 'The rate limiter is unavailable.', headers: { 'retry-after': '5' }, cause: rejection });
      }
      const resetSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError('rate_limited', {
        headers: { 'retry-after': String(resetSeconds), ...rateLimitHeaders({ limit, remaining: 0, resetSeconds }) },
      });
    }
  }
}

function memoryLimiter(name: string, plan: Plan): RateLimiterAbstract {
  return new RateLimiterMemory({ keyPrefix: `plan:${name}`, points: plan.requestsPerMinute, duration: 60 });
}
