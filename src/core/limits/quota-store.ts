import type { Redis } from 'ioredis';

/**
 * Monthly quota counters, one per account and month. Checked and charged in one step, so
 * concurrent requests cannot overshoot. (rate-limiter-flexible is not used here: its memory
 * store expires keys with setTimeout, which cannot span a month.)
 */
export interface QuotaStore {
  /** Adds `cost` unless that would pass `limit`; resolves with whether it was charged. */
  charge(key: string, cost: number, limit: number, ttlSeconds: number): Promise<boolean>;
  refund(key: string, cost: number): Promise<void>;
  /** Adds `delta` (negative for refunds) without a limit, never below 0: usage that already happened. */
  adjust(key: string, delta: number, ttlSeconds: number): Promise<void>;
  used(key: string): Promise<number>;
}

export class MemoryQuotaStore implements QuotaStore {
  private readonly counters = new Map<string, number>();

  async charge(key: string, cost: number, limit: number): Promise<boolean> {
    const used = this.counters.get(key) ?? 0;
    if (used + cost > limit) return false;
    this.counters.set(key, used + cost);
    return true;
  }

  async refund(key: string, cost: number): Promise<void> {
    await this.adjust(key, -cost);
  }

  async adjust(key: string, delta: number): Promise<void> {
    this.counters.set(key, Math.max(0, (this.counters.get(key) ?? 0) + delta));
  }

  async used(key: string): Promise<number> {
    return this.counters.get(key) ?? 0;
  }
}

// Checked before anything is written: a refusal leaves no key behind (an INCRBY then DECRBY
// would leave a counter of 0 with no expiry when the month's first charge is refused).
const CHARGE = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`;

const ADJUST = `
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used < 0 then redis.call('SET', KEYS[1], 0) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`;

const REFUND = `
local used = redis.call('DECRBY', KEYS[1], ARGV[1])
if used < 0 then redis.call('SET', KEYS[1], 0, 'KEEPTTL') end
return 1
`;

export class RedisQuotaStore implements QuotaStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async charge(key: string, cost: number, limit: number, ttlSeconds: number): Promise<boolean> {
    return (await this.redis.eval(CHARGE, 1, this.k(key), cost, limit, ttlSeconds)) === 1;
  }

  async refund(key: string, cost: number): Promise<void> {
    await this.redis.eval(REFUND, 1, this.k(key), cost);
  }

  async adjust(key: string, delta: number, ttlSeconds: number): Promise<void> {
    await this.redis.eval(ADJUST, 1, this.k(key), delta, ttlSeconds);
  }

  async used(key: string): Promise<number> {
    return Number((await this.redis.get(this.k(key))) ?? 0);
  }

  private k(key: string): string {
    return `${this.prefix}:quota:${key}`;
  }
}
