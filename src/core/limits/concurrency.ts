import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Counts an account's requests in progress. A slot is held from admission to the response; a
 * slot whose holder died (crashed instance) lapses after `ttlMs`, so the count heals itself.
 */
export interface ConcurrencyStore {
  /** A token for the slot, or undefined when `limit` slots are taken. */
  acquire(accountId: string, limit: number, ttlMs: number): Promise<string | undefined>;
  release(accountId: string, token: string): Promise<void>;
  inUse(accountId: string): Promise<number>;
}

export class MemoryConcurrencyStore implements ConcurrencyStore {
  private readonly slots = new Map<string, Map<string, number>>();

  async acquire(accountId: string, limit: number, ttlMs: number): Promise<string | undefined> {
    const held = this.live(accountId, ttlMs);
    if (held.size >= limit) return undefined;
    const token = randomUUID();
    held.set(token, Date.now());
    return token;
  }

  async release(accountId: string, token: string): Promise<void> {
    const held = this.slots.get(accountId);
    held?.delete(token);
    if (held?.size === 0) this.slots.delete(accountId);
  }

  async inUse(accountId: string): Promise<number> {
    return this.slots.get(accountId)?.size ?? 0;
  }

  private live(accountId: string, ttlMs: number): Map<string, number> {
    let held = this.slots.get(accountId);
    if (!held) this.slots.set(accountId, (held = new Map()));
    const cutoff = Date.now() - ttlMs;
    for (const [token, since] of held) if (since < cutoff) held.delete(token);
    return held;
  }
}

/**
 * Slots as members of a sorted set scored by Redis's own clock, checked and taken in one Lua
 * script so that instances racing for the last slot cannot both get it.
 */
const ACQUIRE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`;

export class RedisConcurrencyStore implements ConcurrencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async acquire(accountId: string, limit: number, ttlMs: number): Promise<string | undefined> {
    const token = randomUUID();
    const taken = await this.redis.eval(ACQUIRE, 1, this.key(accountId), limit, ttlMs, token);
    return taken === 1 ? token : undefined;
  }

  async release(accountId: string, token: string): Promise<void> {
    await this.redis.zrem(this.key(accountId), token);
  }

  async inUse(accountId: string): Promise<number> {
    return this.redis.zcard(this.key(accountId));
  }

  private key(accountId: string): string {
    return `${this.prefix}:concurrency:${accountId}`;
  }
}
