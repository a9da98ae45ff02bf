import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../redis.js';
import { untilAborted } from '../../util/abortable.js';

/** One account concurrency slot, held from admission until `release()`. */
export interface SlotLease {
  /** Gives the slot back. Never rejects; calling it again does nothing. */
  release(): Promise<void>;
}

export interface AcquireOptions {
  /** Aborting rejects the acquisition with the signal's reason; a slot granted meanwhile is given back. */
  signal?: AbortSignal | undefined;
}

/** Counts an account's requests in progress. */
export interface ConcurrencyStore {
  /** A lease on one of the account's `limit` slots, or undefined when all are taken. */
  acquire(accountId: string, limit: number, options?: AcquireOptions): Promise<SlotLease | undefined>;
  inUse(accountId: string): Promise<number>;
}

/** One process's slots: nothing can fail between taking and giving back, so no lease is needed. */
export class MemoryConcurrencyStore implements ConcurrencyStore {
  private readonly slots = new Map<string, Set<string>>();

  async acquire(accountId: string, limit: number, options: AcquireOptions = {}): Promise<SlotLease | undefined> {
    options.signal?.throwIfAborted();
    let held = this.slots.get(accountId);
    if (!held) this.slots.set(accountId, (held = new Set()));
    if (held.size >= limit) return undefined;
    const token = randomUUID();
    held.add(token);
    return {
      release: async () => {
        held.delete(token);
        if (held.size === 0 && this.slots.get(accountId) === held) this.slots.delete(accountId);
      },
    };
  }

  async inUse(accountId: string): Promise<number> {
    return this.slots.get(accountId)?.size ?? 0;
  }
}

// Slots are members of a sorted set scored by the time of their lease's last renewal, on Redis's
// own clock (so instances with skewed clocks cannot expire each other's slots). Expired members
// are dropped before each count, so a slot whose holder died or whose release was lost lapses
// after one lease time.
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
`;

/** ARGV: lease ms, limit, token. 1 when taken. */
const ACQUIRE = `${NOW}
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`;

/** ARGV: lease ms, token. 1 when renewed, 0 when the lease had already lapsed. */
const RENEW = `${NOW}
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`;

/** ARGV: lease ms. Live slots. */
const COUNT = `${NOW}
return redis.call('ZCARD', KEYS[1])
`;

export interface RedisConcurrencyOptions {
  /** How long a slot outlives its last renewal. Default 10 000 ms. */
  leaseMs?: number;
  /** How often a holder renews its lease. Default a third of `leaseMs`, so two renewals may fail. */
  renewMs?: number;
  /** Told when a holder's lease lapsed before it could renew it (Redis away longer than a lease). */
  onLeaseLost?: (accountId: string) => void;
}

/**
 * Slots shared by many instances through Redis, as short leases: the holder renews its lease
 * every `renewMs` while the request is in progress, and a release that fails (a Redis blip) is
 * retried until the lease would have lapsed anyway. So a slot is free again within one lease time
 * of its request ending, however the release went. (redis-semaphore does the same with the
 * clients' clocks, and its renewal timer rejects unhandled while Redis is down.)
 */
export class RedisConcurrencyStore implements ConcurrencyStore {
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly onLeaseLost: (accountId: string) => void;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    options: RedisConcurrencyOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 10_000;
    this.renewMs = options.renewMs ?? Math.max(100, Math.floor(this.leaseMs / 3));
    this.onLeaseLost = options.onLeaseLost ?? (() => {});
  }

  async acquire(accountId: string, limit: number, options: AcquireOptions = {}): Promise<SlotLease | undefined> {
    const { signal } = options;
    signal?.throwIfAborted();
    const key = this.key(accountId);
    const token = randomUUID();
    const taken = this.redis.eval(ACQUIRE, 1, key, this.leaseMs, limit, token).then(
      (result) => result === 1,
      (error: unknown) => {
        // Sent but unanswered (a timeout while Redis stalls): RedisClient may still grant the slot when
        // it wakes, to a request that was already answered 503. Taking the token back (ZREM,
        // retried like a release) undoes that; it runs after the acquire on the same connection.
        void this.giveBack(key, token);
        throw error;
      },
    );
    // After an abort the script may still run: a slot it grants then is given back.
    const granted = signal ? await untilAborted(taken, signal, (late) => late && this.lease(accountId, token).release()) : await taken;
    return granted ? this.lease(accountId, token) : undefined;
  }

  async inUse(accountId: string): Promise<number> {
    return Number(await this.redis.eval(COUNT, 1, this.key(accountId), this.leaseMs));
  }

  private lease(accountId: string, token: string): SlotLease {
    const key = this.key(accountId);
    const renewal = setInterval(() => {
      this.redis.eval(RENEW, 1, key, this.leaseMs, token).then(
        (renewed) => {
          if (renewed === 1) return;
          clearInterval(renewal);
          this.onLeaseLost(accountId);
        },
        () => {}, // Redis away: the next renewal tries again; the lease lapses if none succeeds
      );
    }, this.renewMs);
    renewal.unref();
    let released: Promise<void> | undefined;
    return {
      release: () => {
        clearInterval(renewal);
        released ??= this.giveBack(key, token);
        return released;
      },
    };
  }

  /**
   * ZREM once, and while Redis is away keep retrying in the background until the lease would
   * have lapsed by itself: the caller (a response being finished) never waits for an outage.
   */
  private async giveBack(key: string, token: string): Promise<void> {
    const until = Date.now() + this.leaseMs;
    const attempt = () => this.redis.zrem(key, token).then(() => true, () => false);
    if (await attempt()) return;
    void (async () => {
      for (let delay = 100; Date.now() + delay < until; delay = Math.min(delay * 2, 1000)) {
        await new Promise((r) => setTimeout(r, delay).unref());
        if (await attempt()) return;
      }
    })();
  }

  private key(accountId: string): string {
    return `${this.prefix}:concurrency:${accountId}`;
  }
}
