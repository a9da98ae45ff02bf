import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import { ApiError } from '../errors.js';
import { ConcurrencyLimiter } from './concurrency-limiter.js';
import { MemoryConcurrencyStore, RedisConcurrencyStore } from './concurrency.js';
import { validateEnforcerOptions, type PlanEnforcerOptions } from './enforcer-options.js';
import { Insurance } from './insurance.js';
import { neverSent, PendingUsage } from './pending-usage.js';
import type { Plan } from './plans.js';
import { nextMonth, QUOTA_TTL_SECONDS, QuotaLimiter } from './quota-limiter.js';
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from './quota-store.js';
import { PlanRates, rateLimitHeaders, type RateState } from './rate-limiter.js';
import { MemoryUsageMeter, monthOf, RedisUsageMeter, type Usage, type UsageMeter } from './usage-meter.js';

export type { PlanEnforcerOptions } from './enforcer-options.js';
export type { RedisFailureMode } from './insurance.js';
export { rateLimitHeaders, type RateState } from './rate-limiter.js';

export interface AdmitOptions {
  /** The request's signal: aborting rejects admission with its reason, holding nothing. */
  signal?: AbortSignal | undefined;
}

/**
 * Enforces each plan through one limiter per concern, each over a store interface with a memory
 * and a Redis implementation: request rate with burst (rate-limiter.ts), concurrent requests
 * (concurrency-limiter.ts), monthly quota (quota-limiter.ts) and usage metering (usage-meter.ts).
 * With Redis the limits hold exactly across instances; while Redis fails, `Insurance` decides
 * between 503 and this instance's memory stores, and `PendingUsage` carries what Redis missed to
 * it once it is back.
 */
export class PlanEnforcer {
  private readonly plans: PlanEnforcerOptions['plans'];
  private readonly rates: PlanRates;
  private readonly concurrency: ConcurrencyLimiter;
  private readonly quotas: QuotaStore;
  private readonly quota: QuotaLimiter;
  private readonly usageMeter: UsageMeter;
  private readonly insurance: Insurance;
  /** Usage the shared stores missed while Redis was away, added to them when it is back. */
  private readonly pending = new PendingUsage();
  private readonly detach: () => void = () => {};

  constructor(options: PlanEnforcerOptions) {
    validateEnforcerOptions(options);
    const prefix = options.keyPrefix ?? 'bgcut';
    const redis = options.redis;
    this.plans = options.plans;
    this.insurance = new Insurance(options.redisFailureMode ?? 'fail-closed', options.insuranceInstances ?? 1, Boolean(redis));
    this.rates = new PlanRates(options.plans, { redis, prefix, insurance: this.insurance });
    const memoryConcurrency = new MemoryConcurrencyStore();
    this.concurrency = new ConcurrencyLimiter(
      redis ? new RedisConcurrencyStore(redis, prefix, { leaseMs: options.concurrencyLeaseMs }) : memoryConcurrency,
      memoryConcurrency,
      this.insurance,
    );
    this.quotas = redis ? new RedisQuotaStore(redis, prefix) : (options.usageStore ?? new MemoryQuotaStore());
    this.quota = new QuotaLimiter(this.quotas, new MemoryQuotaStore(), this.insurance, this.pending, () => this.flushSoon());
    this.usageMeter = redis ? new RedisUsageMeter(redis, prefix) : (options.usageStore ?? new MemoryUsageMeter());
    if (redis) {
      const onReady = () => void this.flushPending();
      redis.on('ready', onReady);
      this.detach = () => redis.off('ready', onReady);
    }
  }

  plan(name: string): Plan {
    const plan = Object.hasOwn(this.plans, name) ? this.plans[name] : undefined;
    if (!plan) throw new ApiError('internal_error', { detail: `The account's plan "${name}" is not configured.` });
    return plan;
  }

  /**
   * Admits one request: a concurrency slot first (429 `concurrency_limited`, costing no rate
   * point), then one from the rate allowance (429 `rate_limited`, giving the slot back). Resolves
   * with the rate headers and a release for the slot, to call when the response is done. Rejects
   * with the signal's reason as soon as it aborts, holding nothing.
   */
  async admit(accountId: string, planName: string, options: AdmitOptions = {}): Promise<{ headers: Record<string, string>; release: () => Promise<void> }> {
    const { signal } = options;
    const plan = this.plan(planName);
    signal?.throwIfAborted();
    const maxConcurrent = plan.maxConcurrent;
    const lease = maxConcurrent ? await this.concurrency.acquire(accountId, maxConcurrent, signal) : undefined;
    if (maxConcurrent && !lease) {
      const rate = await this.rates.peek(accountId, planName).catch(() => undefined);
      throw new ApiError('concurrency_limited', {
        detail: `The plan allows ${maxConcurrent} request(s) in progress at once.`,
        headers: { 'retry-after': '1', ...(rate ? rateLimitHeaders(rate) : {}) },
      });
    }
    const release = lease ? () => lease.release() : async () => {};
    try {
      const state = await this.rates.consume(accountId, planName, signal);
      return { headers: rateLimitHeaders(state), release };
    } catch (error) {
      await release();
      throw error;
    }
  }

  /**
   * Reserves the cutout's cost from the month's quota before the work is done (429
   * `quota_exceeded` when it does not fit). Resolves with a refund, to call if the cutout fails:
   * only cutouts that are delivered are charged. `op` names the charge (default: a new one), so
   * the same charge sent again (a job's image run again after a crash) applies once.
   */
  async reserveQuota(accountId: string, planName: string, pixels: number, now = new Date(), weight = 1, op?: string): Promise<() => Promise<void>> {
    const quota = this.plan(planName).monthlyQuota;
    if (!quota) return async () => {};
    return this.quota.reserve(accountId, quota, pixels, now, weight, op);
  }

  /**
   * Meters one successful cutout, once (under `op`: a new one unless given). While Redis is away the record
   * is kept and added to Redis when it is back, so this does not reject for an outage.
   */
  async recordUsage(accountId: string, pixels: number, now = new Date(), op: string = randomUUID()): Promise<void> {
    const month = monthOf(now);
    try {
      await this.usageMeter.add(accountId, month, pixels / 1e6, 1, op);
      this.flushSoon();
    } catch (error) {
      if (!this.insurance.shared) throw error;
      if (neverSent(error)) this.pending.addUsage(accountId, month, pixels / 1e6);
      else this.pending.inDoubt(op, { kind: 'usage', accountId, month, megapixels: pixels / 1e6, images: 1 });
    }
  }

  /** Adds the usage Redis missed while away (quota charged in memory, failed refunds and records). */
  async flushPending(): Promise<void> {
    if (this.pending.empty) return;
    await this.pending.flush(this.quotas, this.usageMeter, QUOTA_TTL_SECONDS).catch(() => {}); // still away: next time
  }

  /** Whether usage is still waiting for Redis (for shutdown reports and tests). */
  get hasPendingUsage(): boolean {
    return !this.pending.empty;
  }

  /**
   * Stops listening to the Redis client (it is the caller's to close) after one last try to add
   * what is pending. Usage still pending after that (Redis away) is lost.
   */
  async close(): Promise<void> {
    this.detach();
    await this.flushPending();
  }

  private flushSoon(): void {
    if (!this.pending.empty) void this.flushPending();
  }

  /** The account's standing, without consuming anything: for GET /v1/account. */
  async standing(accountId: string, planName: string, now = new Date()) {
    const plan = this.plan(planName);
    try {
      const [rate, quotaUsed, usage, inProgress] = await Promise.all([
        this.rates.peek(accountId, planName),
        plan.monthlyQuota ? this.quota.used(accountId, now) : 0,
        this.usageMeter.get(accountId, monthOf(now)),
        this.concurrency.inUse(accountId),
      ]);
      return {
        rate: rate satisfies RateState,
        usage: usage satisfies Usage,
        inProgress,
        quota: plan.monthlyQuota
          ? { ...plan.monthlyQuota, used: quotaUsed, remaining: Math.max(0, plan.monthlyQuota.amount - quotaUsed), resetsAt: nextMonth(now).toISOString() }
          : null,
      };
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw new ApiError('service_unavailable', { detail: 'The usage store cannot be reached.', headers: { 'retry-after': '5' }, cause: error });
    }
  }
}
