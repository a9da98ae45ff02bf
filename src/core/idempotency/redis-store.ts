import { tag, type RedisClient } from '../redis.js';
import type { Claim, IdempotencyStore, IdempotencyTimes, StoredResponse } from './store.js';

// KEYS: record (hash: state, fp, token, meta). ARGV: fingerprint, token, in-progress ttl ms.
// { 'claimed' } | { state, fingerprint, meta or '' }.
const CLAIM = `
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  redis.call('HSET', KEYS[1], 'state', 'in-progress', 'fp', ARGV[1], 'token', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return { 'claimed' }
end
return { state, redis.call('HGET', KEYS[1], 'fp'), redis.call('HGET', KEYS[1], 'meta') or '' }
`;

// Small: the answer's bytes were written before, by a plain SET (not inside a script, whose
// run blocks Redis and whose reply must come within the command timeout).
// KEYS: record. ARGV: token, meta JSON ('' for no result), key ttl ms.
const COMPLETE = `
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'meta', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

// KEYS: record. ARGV: token.
const ABANDON = `
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'in-progress' then
  redis.call('DEL', KEYS[1])
end
return 1
`;

export interface RedisIdempotencyStoreOptions {
  /** Prefix of every key. Default `bgcut`. */
  keyPrefix?: string;
  /**
   * Most bytes of answers this instance keeps in Redis at once (each counted until its
   * `resultTtlMs` runs out). An answer that does not fit is not stored and its key is released
   * (a retry runs, and is charged, again). All instances together keep at most
   * instances x this. Default 128 MiB.
   */
  maxBytes?: number;
  /** The clock, in ms (tests). Default Date.now. */
  now?: () => number;
}

/**
 * Keys shared by every instance: a small hash per key for `keyTtlMs` (24 h), and the response's
 * bytes under a second key for the shorter `resultTtlMs`, so Redis holds results only for as long
 * as retries are likely. Both keys share the Idempotency-Key's hash tag (one Cluster slot).
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  private readonly prefix: string;
  private readonly maxBytes: number;
  private readonly now: () => number;
  /** Answers this instance stored that may still be in Redis: when each lapses, and its size. */
  private readonly stored: { until: number; bytes: number }[] = [];
  private storedBytes = 0;

  constructor(
    private readonly redis: RedisClient,
    prefixOrOptions: string | RedisIdempotencyStoreOptions = {},
  ) {
    const options = typeof prefixOrOptions === 'string' ? { keyPrefix: prefixOrOptions } : prefixOrOptions;
    this.prefix = options.keyPrefix ?? 'bgcut';
    this.maxBytes = options.maxBytes ?? 128 * 1024 * 1024;
    this.now = options.now ?? (() => Date.now());
  }

  async claim(key: string, fingerprint: string, token: string, times: IdempotencyTimes): Promise<Claim> {
    const found = (await this.redis.eval(CLAIM, 1, this.record(key), fingerprint, token, times.inProgressTtlMs)) as string[];
    if (found[0] === 'claimed') return { state: 'claimed', token };
    if (found[0] === 'in-progress') return { state: 'in-progress', fingerprint: found[1]! };
    const meta = found[2] ? (JSON.parse(found[2]) as { status: number; headers: Record<string, string> }) : undefined;
    const body = meta ? await this.redis.getBuffer(this.result(key)) : null;
    return { state: 'done', fingerprint: found[1]!, result: meta && body ? { ...meta, body } : undefined };
  }

  /**
   * Stores the answer (a plain SET), then marks the key done. An answer over this instance's
   * budget, or whose write fails (Redis full under `noeviction`, a timeout), is not stored: the key
   * is released instead, so retries run afresh rather than wait on a claim.
   */
  async complete(key: string, token: string, result: StoredResponse | undefined, times: IdempotencyTimes): Promise<void> {
    if (result && !this.reserve(result.body.length, times.resultTtlMs)) return this.abandon(key, token);
    if (result) {
      try {
        await this.redis.set(this.result(key), result.body, 'PX', times.resultTtlMs);
      } catch (error) {
        await this.abandon(key, token);
        throw error;
      }
    }
    const meta = result ? JSON.stringify({ status: result.status, headers: result.headers }) : '';
    await this.redis.eval(COMPLETE, 1, this.record(key), token, meta, times.keyTtlMs);
  }

  async abandon(key: string, token: string): Promise<void> {
    await this.redis.eval(ABANDON, 1, this.record(key), token);
  }

  /** Counts `bytes` against the budget until `ttlMs` from now; false when they do not fit. */
  private reserve(bytes: number, ttlMs: number): boolean {
    const now = this.now();
    this.stored.sort((a, b) => a.until - b.until);
    while (this.stored.length > 0 && this.stored[0]!.until <= now) this.storedBytes -= this.stored.shift()!.bytes;
    if (this.storedBytes + bytes > this.maxBytes) return false;
    this.stored.push({ until: now + ttlMs, bytes });
    this.storedBytes += bytes;
    return true;
  }

  // The record and the result share the Idempotency-Key's hash tag (one Cluster slot).
  private record(key: string): string {
    return `${this.prefix}:${tag('i', key)}:idem`;
  }

  private result(key: string): string {
    return `${this.prefix}:${tag('i', key)}:idem-result`;
  }
}
