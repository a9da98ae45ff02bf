import { randomUUID } from 'node:crypto';
import { checkKeyPrefix, tag, type RedisClient } from '../redis.js';

/**
 * Monthly quota counters, one per account and month. Checked and charged in one step, so
 * concurrent requests cannot overshoot. (rate-limiter-flexible is not used here: its memory
 * store expires keys with setTimeout, which cannot span a month.)
 *
 * Every write names its operation (`op`, a random token): a write that is sent again, or whose
 * outcome was unknown and is retried (its reply lost to a timeout or a dropped connection), is
 * applied at most once.
 */
export interface QuotaStore {
  /** Adds `cost` unless that would pass `limit`; resolves with whether it was charged. */
  charge(key: string, cost: number, limit: number, ttlSeconds: number, op?: string): Promise<boolean>;
  /**
   * Gives back the charge made as `op`, once however often it is called. A refund that arrives
   * before its charge (or for a charge that never happened) keeps that charge from applying later.
   */
  refund(key: string, cost: number, op: string): Promise<void>;
  /** Adds `delta` (negative for refunds) without a limit, never below 0: usage that already happened. */
  adjust(key: string, delta: number, ttlSeconds: number, op?: string): Promise<void>;
  used(key: string): Promise<number>;
}

/** One process's counters: a call here cannot be lost or repeated, so operations need no record. */
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

/**
 * How long Redis remembers an operation: a retry or a refund of it later than this is applied as
 * if it were new (a refund then gives nothing back). Refunds come while the request is still in
 * progress, and retries as soon as Redis answers again. One key of ~100 bytes per charge.
 */
export const OP_MEMORY_SECONDS = 3600;

// KEYS: counter, operation record. Checked before anything is written: a refusal leaves no key
// behind (an INCRBY then DECRBY would leave a counter of 0 with no expiry when the month's first
// charge is refused), and no record either (a repeat re-evaluates it, which is harmless).
// ARGV: cost, limit, counter ttl, op ttl.
const CHARGE = `
local state = redis.call('GET', KEYS[2])
if state then
  if state == 'charged' then return 1 end
  return 0
end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return 0 end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SET', KEYS[2], 'charged', 'EX', ARGV[4])
return 1
`;

// KEYS: counter, operation record. ARGV: cost, op ttl. Marks the operation refunded first, so a
// charge of it that arrives later does nothing.
const REFUND = `
local state = redis.call('GET', KEYS[2])
if state == 'refunded' then return 0 end
redis.call('SET', KEYS[2], 'refunded', 'EX', ARGV[2])
if state ~= 'charged' then return 0 end
local used = redis.call('DECRBY', KEYS[1], ARGV[1])
if used < 0 then redis.call('SET', KEYS[1], 0, 'KEEPTTL') end
return 1
`;

// KEYS: counter, operation record. ARGV: delta, counter ttl, op ttl.
const ADJUST = `
if not redis.call('SET', KEYS[2], 'adjusted', 'NX', 'EX', ARGV[3]) then return 0 end
local used = redis.call('INCRBY', KEYS[1], ARGV[1])
if used < 0 then redis.call('SET', KEYS[1], 0) end
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
`;

export class RedisQuotaStore implements QuotaStore {
  private readonly prefix: string;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.prefix = checkKeyPrefix(prefix);
  }

  async charge(key: string, cost: number, limit: number, ttlSeconds: number, op: string = randomUUID()): Promise<boolean> {
    return (await this.redis.eval(CHARGE, 2, this.k(key), this.opKey(key, op), cost, limit, ttlSeconds, OP_MEMORY_SECONDS)) === 1;
  }

  async refund(key: string, cost: number, op: string): Promise<void> {
    await this.redis.eval(REFUND, 2, this.k(key), this.opKey(key, op), cost, OP_MEMORY_SECONDS);
  }

  async adjust(key: string, delta: number, ttlSeconds: number, op: string = randomUUID()): Promise<void> {
    await this.redis.eval(ADJUST, 2, this.k(key), this.opKey(key, op), delta, ttlSeconds, OP_MEMORY_SECONDS);
  }

  async used(key: string): Promise<number> {
    return Number((await this.redis.get(this.k(key))) ?? 0);
  }

  // A counter and its operation records share the counter's hash tag (one Cluster slot per script).
  private k(key: string): string {
    return `${this.prefix}:${tag('q', key)}:quota`;
  }

  private opKey(key: string, op: string): string {
    return `${this.prefix}:${tag('q', key)}:op:${op}`;
  }
}
