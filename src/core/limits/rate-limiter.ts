import type { RedisClient } from '../redis.js';
import {
  BurstyRateLimiter,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { ApiError } from '../errors.js';
import { untilAborted } from '../../util/abortable.js';
import { unavailable, type Insurance } from './insurance.js';
import type { Plans } from './plans.js';

export interface RateState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/** The IETF RateLimit / RateLimit-Policy fields plus the common X-RateLimit-* ones. */
export function rateLimitHeaders(state: RateState): Record<string, string> {
  return {
    'ratelimit-policy': `"minute";q=${state.limit};w=60`,
    ratelimit: `"minute";r=${state.remaining};t=${state.resetSeconds}`,
    'x-ratelimit-limit': String(state.limit),
    'x-ratelimit-remaining': String(state.remaining),
    'x-ratelimit-reset': String(state.resetSeconds),
  };
}

interface PlanRate {
  requestsPerMinute: number;
  /** The minute limiter, backed by the burst limiter when the plan has a burst. */
  consume: RateLimiterAbstract | BurstyRateLimiter;
  /** The per-minute limiter alone, read for headers and GET /v1/account. */
  minute: RateLimiterAbstract;
}

/**
 * Each plan's request rate: `requestsPerMinute` per fixed 60 s window, and when that is used up,
 * `burst` more per fixed hour (rate-limiter-flexible's BurstyRateLimiter: a second fixed-window
 * limiter consulted only when the first refuses). Atomic Redis limiters (one Lua script per check)
 * when shared, with rate-limiter-flexible's own insurance limiter in `insurance` mode.
 */
export class PlanRates {
  private readonly rates = new Map<string, PlanRate>();

  constructor(plans: Plans, options: { redis?: RedisClient | undefined; prefix: string; insurance: Insurance }) {
    const { redis, prefix, insurance } = options;
    const limiter = (name: string, points: number, duration: number): RateLimiterAbstract => {
      if (!redis) return new RateLimiterMemory({ keyPrefix: `${prefix}:${name}`, points, duration });
      return new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: `${prefix}:${name}`,
        points,
        duration,
        // Fail at once while disconnected, instead of queueing until some timeout.
        rejectIfRedisNotReady: true,
        ...(insurance.enabled
          ? { insuranceLimiter: new RateLimiterMemory({ keyPrefix: `${prefix}:insurance:${name}`, points: insurance.share(points), duration }) }
          : {}),
      });
    };
    for (const [name, plan] of Object.entries(plans)) {
      const minute = limiter(`rate:${name}`, plan.requestsPerMinute, 60);
      const consume = plan.burst ? new BurstyRateLimiter(minute, limiter(`burst:${name}`, plan.burst, 3600)) : minute;
      this.rates.set(name, { requestsPerMinute: plan.requestsPerMinute, consume, minute });
    }
  }

  /** Takes one request from the account's allowance; 429 `rate_limited` when none is left, 503 when the store fails. */
  async consume(accountId: string, planName: string, signal?: AbortSignal): Promise<RateState> {
    const rate = this.rate(planName);
    try {
      const consumed = rate.consume.consume(accountId, 1);
      const res = await (signal ? untilAborted(consumed, signal) : consumed);
      return { limit: rate.requestsPerMinute, remaining: Math.max(0, res.remainingPoints), resetSeconds: Math.ceil(res.msBeforeNext / 1000) };
    } catch (rejection) {
      if (signal?.aborted) throw signal.reason;
      if (!(rejection instanceof RateLimiterRes)) throw unavailable('rate limiter', rejection);
      const resetSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError('rate_limited', {
        headers: { 'retry-after': String(resetSeconds), ...rateLimitHeaders({ limit: rate.requestsPerMinute, remaining: 0, resetSeconds }) },
      });
    }
  }

  /** The account's minute allowance, without consuming anything. */
  async peek(accountId: string, planName: string): Promise<RateState> {
    const rate = this.rate(planName);
    const res = await rate.minute.get(accountId);
    return {
      limit: rate.requestsPerMinute,
      remaining: res ? Math.max(0, res.remainingPoints) : rate.requestsPerMinute,
      resetSeconds: res ? Math.ceil(res.msBeforeNext / 1000) : 60,
    };
  }

  private rate(planName: string): PlanRate {
    const rate = this.rates.get(planName);
    if (!rate) throw new ApiError('internal_error', { detail: `The account's plan "${planName}" is not configured.` });
    return rate;
  }
}
