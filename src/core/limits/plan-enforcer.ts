import type { Redis } from 'ioredis';
import {
  BurstyRateLimiter,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { ApiError } from '../errors.js';
import { MemoryConcurrencyStore, RedisConcurrencyStore, type ConcurrencyStore } from './concurrency.js';
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from './quota-store.js';
import { quotaCost, type Plan, type Plans } from './plans.js';
import { MemoryUsageMeter, monthOf, RedisUsageMeter, type Usage, type UsageMeter } from './usage-meter.js';

/**
 * What to do while Redis cannot be reached:
 * - `fail-closed`: answer 503 (never 401 or 429), so no limit is ever exceeded;
 * - `insurance`: keep serving under per-instance in-memory limits, each instance allowing
 *   `1 / insuranceInstances` of every plan's rate, burst, quota and concurrency.
 * Either way, the shared limits take over again by themselves once Redis is back.
 */
export type RedisFailureMode = 'fail-closed' | 'insurance';

export interface PlanEnforcerOptions {
  plans: Plans;
  /** Shared state for many API instances; absent for in-memory limits (one instance). */
  redis?: Redis;
  redisFailureMode?: RedisFailureMode;
  /** How many API instances share the limits, for sizing insurance limits. Default 1. */
  insuranceInstances?: number;
  /** Prefix of every Redis key. Default `bgcut`. */
  keyPrefix?: string;
  /** How long a concurrency slot may be held before it lapses (a crashed holder). Default 5 min. */
  concurrencySlotTtlMs?: number;
}

export interface RateState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

interface PlanLimiters {
  plan: Plan;
  rate: RateLimiterAbstract | BurstyRateLimiter;
  /** The per-minute limiter alone, read for headers and GET /v1/account. */
  minute: RateLimiterAbstract;
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

const unavailable = (what: string, cause: unknown) =>
  new ApiError('service_unavailable', { detail: `The ${what} cannot be reached.`, headers: { 'retry-after': '5' }, cause });

/**
 * Enforces each plan: request rate (with burst), concurrent requests and monthly quota, and
 * meters usage. In memory by default; with Redis, through rate-limiter-flexible's atomic Redis
 * limiters (one Lua script per check) and Lua scripts of our own for concurrency, so that the
 * limits hold exactly across instances.
 */
export class PlanEnforcer {
  private readonly limiters = new Map<string, PlanLimiters>();
  private readonly concurrency: ConcurrencyStore;
  private readonly fallbackConcurrency = new MemoryConcurrencyStore();
  private readonly quotas: QuotaStore;
  private readonly fallbackQuotas = new MemoryQuotaStore();
  private readonly usageMeter: UsageMeter;
  private readonly slotTtlMs: number;
  private readonly insurance: boolean;
  private readonly share: number;

  constructor(options: PlanEnforcerOptions) {
    const prefix = options.keyPrefix ?? 'bgcut';
    this.slotTtlMs = options.concurrencySlotTtlMs ?? 5 * 60_000;
    this.insurance = options.redisFailureMode === 'insurance';
    this.share = options.insuranceInstances ?? 1;
    const redis = options.redis;
    const limiter = (name: string, points: number, duration: number): RateLimiterAbstract => {
      if (!redis) return new RateLimiterMemory({ keyPrefix: `${prefix}:${name}`, points, duration });
      return new RateLimiterRedis({
        storeClient: redis,
        keyPrefix: `${prefix}:${name}`,
        points,
        duration,
        // Fail at once while disconnected, instead of queueing until some timeout.
        rejectIfRedisNotReady: true,
        ...(this.insurance
          ? { insuranceLimiter: new RateLimiterMemory({ keyPrefix: `${prefix}:insurance:${name}`, points: Math.max(1, Math.floor(points / this.share)), duration }) }
          : {}),
      });
    };
    for (const [name, plan] of Object.entries(options.plans)) {
      const minute = limiter(`rate:${name}`, plan.requestsPerMinute, 60);
      const rate = plan.burst ? new BurstyRateLimiter(minute, limiter(`burst:${name}`, plan.burst, 3600)) : minute;
      this.limiters.set(name, { plan, rate, minute });
    }
    this.concurrency = redis ? new RedisConcurrencyStore(redis, prefix) : new MemoryConcurrencyStore();
    this.quotas = redis ? new RedisQuotaStore(redis, prefix) : new MemoryQuotaStore();
    this.usageMeter = redis ? new RedisUsageMeter(redis, prefix) : new MemoryUsageMeter();
  }

  plan(name: string): Plan {
    const entry = this.limiters.get(name);
    if (!entry) throw new ApiError('internal_error', { detail: `The account's plan "${name}" is not configured.` });
    return entry.plan;
  }

  /**
   * Admits one request: takes one from the rate allowance (429 `rate_limited` when none is
   * left) and a concurrency slot (429 `concurrency_limited`). Resolves with the rate headers
   * and a release for the slot, to call when the response is done.
   */
  async admit(accountId: string, planName: string): Promise<{ headers: Record<string, string>; release: () => Promise<void> }> {
    const { plan, rate } = this.entry(planName);
    let state: RateState;
    try {
      const res = await rate.consume(accountId, 1);
      state = { limit: plan.requestsPerMinute, remaining: Math.max(0, res.remainingPoints), resetSeconds: Math.ceil(res.msBeforeNext / 1000) };
    } catch (rejection) {
      if (!(rejection instanceof RateLimiterRes)) throw unavailable('rate limiter', rejection);
      const resetSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError('rate_limited', {
        headers: { 'retry-after': String(resetSeconds), ...rateLimitHeaders({ limit: plan.requestsPerMinute, remaining: 0, resetSeconds }) },
      });
    }
    const headers = rateLimitHeaders(state);
    if (!plan.maxConcurrent) return { headers, release: async () => {} };

    let store = this.concurrency;
    let token: string | undefined;
    try {
      token = await store.acquire(accountId, plan.maxConcurrent, this.slotTtlMs);
    } catch (error) {
      if (!this.insurance || store === this.fallbackConcurrency) throw unavailable('concurrency store', error);
      store = this.fallbackConcurrency;
      token = await store.acquire(accountId, Math.max(1, Math.floor(plan.maxConcurrent / this.share)), this.slotTtlMs);
    }
    if (!token) {
      throw new ApiError('concurrency_limited', {
        detail: `The plan allows ${plan.maxConcurrent} request(s) in progress at once.`,
        headers: { 'retry-after': '1', ...headers },
      });
    }
    const held = token;
    return { headers, release: () => store.release(accountId, held).catch(() => {}) };
  }

  /**
   * Reserves the cutout's cost from the month's quota before the work is done (429
   * `quota_exceeded` when it does not fit). Resolves with a refund, to call if the cutout fails:
   * only successful cutouts are charged.
   */
  async reserveQuota(accountId: string, planName: string, pixels: number, now = new Date(), weight = 1): Promise<() => Promise<void>> {
    const { plan } = this.entry(planName);
    if (!plan.monthlyQuota) return async () => {};
    const cost = quotaCost(plan.monthlyQuota, pixels, weight);
    // The key carries the month, so each calendar month starts afresh; 32 days outlives any month.
    const key = `${accountId}:${monthOf(now)}`;
    const ttl = 32 * 86400;
    let store = this.quotas;
    let charged: boolean;
    try {
      charged = await store.charge(key, cost, plan.monthlyQuota.amount, ttl);
    } catch (error) {
      if (!this.insurance) throw unavailable('quota store', error);
      store = this.fallbackQuotas;
      charged = await store.charge(key, cost, Math.max(1, Math.floor(plan.monthlyQuota.amount / this.share)), ttl);
    }
    if (!charged) {
      throw new ApiError('quota_exceeded', {
        detail: `The plan's monthly quota of ${plan.monthlyQuota.amount} ${plan.monthlyQuota.unit} is used up.`,
        headers: { 'retry-after': String(secondsToNextMonth(now)) },
      });
    }
    return async () => {
      await store.refund(key, cost).catch(() => {});
    };
  }

  async recordUsage(accountId: string, pixels: number, now = new Date()): Promise<void> {
    await this.usageMeter.add(accountId, monthOf(now), pixels / 1e6);
  }

  /** The account's standing, without consuming anything: for GET /v1/account. */
  async standing(accountId: string, planName: string, now = new Date()) {
    const { plan, minute } = this.entry(planName);
    try {
      const [rate, quotaUsed, usage, inProgress] = await Promise.all([
        minute.get(accountId),
        plan.monthlyQuota ? this.quotas.used(`${accountId}:${monthOf(now)}`) : 0,
        this.usageMeter.get(accountId, monthOf(now)),
        this.concurrency.inUse(accountId),
      ]);
      const rateState: RateState = {
        limit: plan.requestsPerMinute,
        remaining: rate ? Math.max(0, rate.remainingPoints) : plan.requestsPerMinute,
        resetSeconds: rate ? Math.ceil(rate.msBeforeNext / 1000) : 60,
      };
      return {
        rate: rateState,
        usage: usage satisfies Usage,
        inProgress,
        quota: plan.monthlyQuota
          ? { ...plan.monthlyQuota, used: quotaUsed, remaining: Math.max(0, plan.monthlyQuota.amount - quotaUsed), resetsAt: nextMonth(now).toISOString() }
          : null,
      };
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw unavailable('usage store', error);
    }
  }

  private entry(planName: string): PlanLimiters {
    this.plan(planName);
    return this.limiters.get(planName)!;
  }
}

function nextMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

function secondsToNextMonth(now: Date): number {
  return Math.max(1, Math.ceil((nextMonth(now).getTime() - now.getTime()) / 1000));
}
