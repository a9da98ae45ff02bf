import type { Redis } from 'ioredis';
import {
  BurstyRateLimiter,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
  type RateLimiterAbstract,
} from 'rate-limiter-flexible';
import { ApiError } from '../errors.js';
import { untilAborted } from '../../util/abortable.js';
import { MemoryConcurrencyStore, RedisConcurrencyStore, type ConcurrencyStore } from './concurrency.js';
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from './quota-store.js';
import { PendingUsage } from './pending-usage.js';
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
  /**
   * Lease of a concurrency slot in Redis: its holder renews it every third of this time, and a
   * slot whose release was lost (a Redis blip, a crashed instance) is free again after it.
   * Default 10 000 ms.
   */
  concurrencyLeaseMs?: number;
}

export interface AdmitOptions {
  /** The request's signal: aborting rejects admission with its reason, holding nothing. */
  signal?: AbortSignal | undefined;
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

/** Quota counters outlive any month (their key names the month). */
const QUOTA_TTL_SECONDS = 32 * 86400;

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
  private readonly fallbackQuotas: QuotaStore = new MemoryQuotaStore();
  private readonly usageMeter: UsageMeter;
  private readonly insurance: boolean;
  private readonly share: number;
  private readonly shared: boolean;
  /** Usage the shared stores missed while Redis was away, added to them when it is back. */
  private readonly pending = new PendingUsage();
  private readonly detach: () => void = () => {};

  constructor(options: PlanEnforcerOptions) {
    const prefix = options.keyPrefix ?? 'bgcut';
    this.insurance = options.redisFailureMode === 'insurance';
    this.share = options.insuranceInstances ?? 1;
    const redis = options.redis;
    this.shared = Boolean(redis);
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
          ? { insuranceLimiter: new RateLimiterMemory({ keyPrefix: `${prefix}:insurance:${name}`, points: this.insuranceShare(points), duration }) }
          : {}),
      });
    };
    for (const [name, plan] of Object.entries(options.plans)) {
      const minute = limiter(`rate:${name}`, plan.requestsPerMinute, 60);
      const rate = plan.burst ? new BurstyRateLimiter(minute, limiter(`burst:${name}`, plan.burst, 3600)) : minute;
      this.limiters.set(name, { plan, rate, minute });
    }
    this.concurrency = redis ? new RedisConcurrencyStore(redis, prefix, { leaseMs: options.concurrencyLeaseMs }) : new MemoryConcurrencyStore();
    this.quotas = redis ? new RedisQuotaStore(redis, prefix) : new MemoryQuotaStore();
    this.usageMeter = redis ? new RedisUsageMeter(redis, prefix) : new MemoryUsageMeter();
    if (redis) {
      const onReady = () => void this.flushPending();
      redis.on('ready', onReady);
      this.detach = () => redis.off('ready', onReady);
    }
  }

  plan(name: string): Plan {
    const entry = this.limiters.get(name);
    if (!entry) throw new ApiError('internal_error', { detail: `The account's plan "${name}" is not configured.` });
    return entry.plan;
  }

  /**
   * Admits one request: takes one from the rate allowance (429 `rate_limited` when none is
   * left) and a concurrency slot (429 `concurrency_limited`). Resolves with the rate headers
   * and a release for the slot, to call when the response is done. Rejects with the signal's
   * reason as soon as it aborts, holding nothing.
   */
  async admit(accountId: string, planName: string, options: AdmitOptions = {}): Promise<{ headers: Record<string, string>; release: () => Promise<void> }> {
    const { signal } = options;
    const { plan, rate } = this.entry(planName);
    signal?.throwIfAborted();
    let state: RateState;
    try {
      const consumed = rate.consume(accountId, 1);
      const res = await (signal ? untilAborted(consumed, signal) : consumed);
      state = { limit: plan.requestsPerMinute, remaining: Math.max(0, res.remainingPoints), resetSeconds: Math.ceil(res.msBeforeNext / 1000) };
    } catch (rejection) {
      if (signal?.aborted) throw signal.reason;
      if (!(rejection instanceof RateLimiterRes)) throw unavailable('rate limiter', rejection);
      const resetSeconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
      throw new ApiError('rate_limited', {
        headers: { 'retry-after': String(resetSeconds), ...rateLimitHeaders({ limit: plan.requestsPerMinute, remaining: 0, resetSeconds }) },
      });
    }
    const headers = rateLimitHeaders(state);
    const maxConcurrent = plan.maxConcurrent;
    if (!maxConcurrent) return { headers, release: async () => {} };

    const lease = await this.sharedOrInsurance(
      'concurrency store',
      signal,
      () => this.concurrency.acquire(accountId, maxConcurrent, { signal }),
      () => this.fallbackConcurrency.acquire(accountId, this.insuranceShare(maxConcurrent), { signal }),
    );
    if (!lease) {
      throw new ApiError('concurrency_limited', {
        detail: `The plan allows ${maxConcurrent} request(s) in progress at once.`,
        headers: { 'retry-after': '1', ...headers },
      });
    }
    return { headers, release: () => lease.release() };
  }

  /**
   * Reserves the cutout's cost from the month's quota before the work is done (429
   * `quota_exceeded` when it does not fit). Resolves with a refund, to call if the cutout fails:
   * only successful cutouts are charged.
   */
  async reserveQuota(accountId: string, planName: string, pixels: number, now = new Date(), weight = 1): Promise<() => Promise<void>> {
    const { plan } = this.entry(planName);
    const quota = plan.monthlyQuota;
    if (!quota) return async () => {};
    const cost = quotaCost(quota, pixels, weight);
    // The key carries the month, so each calendar month starts afresh.
    const key = `${accountId}:${monthOf(now)}`;
    let inMemory = false;
    const charged = await this.sharedOrInsurance(
      'quota store',
      undefined,
      () => this.quotas.charge(key, cost, quota.amount, QUOTA_TTL_SECONDS),
      async () => {
        inMemory = true;
        return this.fallbackQuotas.charge(key, cost, this.insuranceShare(quota.amount), QUOTA_TTL_SECONDS);
      },
    );
    if (!charged) {
      throw new ApiError('quota_exceeded', {
        detail: `The plan's monthly quota of ${quota.amount} ${quota.unit} is used up.`,
        headers: { 'retry-after': String(secondsToNextMonth(now)) },
      });
    }
    if (inMemory) {
      // Charged to this instance's insurance share: Redis hears of it when it is back.
      this.pending.addQuota(key, cost);
      return async () => {
        await this.fallbackQuotas.refund(key, cost);
        this.pending.addQuota(key, -cost);
      };
    }
    this.flushSoon();
    return async () => {
      // A refund Redis misses is made when it is back: only successful cutouts are charged.
      await this.quotas.refund(key, cost).catch(() => this.pending.addQuota(key, -cost));
    };
  }

  /**
   * Meters one successful cutout. While Redis is away the record is kept and added to Redis when
   * it is back, so this does not reject for an outage.
   */
  async recordUsage(accountId: string, pixels: number, now = new Date()): Promise<void> {
    try {
      await this.usageMeter.add(accountId, monthOf(now), pixels / 1e6);
      this.flushSoon();
    } catch (error) {
      if (!this.shared) throw error;
      this.pending.addUsage(accountId, monthOf(now), pixels / 1e6);
    }
  }

  /** Adds the usage Redis missed while away (quota charged in memory, failed refunds and records). */
  async flushPending(): Promise<void> {
    if (this.pending.empty) return;
    await this.pending.flush(this.quotas, this.usageMeter, QUOTA_TTL_SECONDS).catch(() => {}); // still away: next time
  }

  /** Stops listening to the Redis client (it is the caller's to close). Usage still pending is lost. */
  close(): void {
    this.detach();
  }

  private flushSoon(): void {
    if (!this.pending.empty) void this.flushPending();
  }

  /**
   * One step against the shared (Redis) store; when that fails, `insurance` mode does it against
   * this instance's memory store instead, and `fail-closed` answers 503. An abort is passed on.
   */
  private async sharedOrInsurance<T>(what: string, signal: AbortSignal | undefined, shared: () => Promise<T>, insurance: () => Promise<T>): Promise<T> {
    try {
      return await shared();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (!this.shared) throw error; // in-memory limits: not an outage
      if (!this.insurance) throw unavailable(what, error);
      return insurance();
    }
  }

  /** This instance's part of a plan limit while Redis is away (at least 1). */
  private insuranceShare(amount: number): number {
    return Math.max(1, Math.floor(amount / this.share));
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
