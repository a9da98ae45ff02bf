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

// KEYS: record, result. ARGV: token, meta JSON ('' for no result), key ttl ms, result ttl ms, body.
const COMPLETE = `
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'meta', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[4]) end
return 1
`;

// KEYS: record. ARGV: token.
const ABANDON = `
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HGET', KEYS[1], 'state') == 'in-progress' then
  redis.call('DEL', KEYS[1])
end
return 1
`;

/**
 * Keys shared by every instance: a small hash per key for `keyTtlMs` (24 h), and the response's
 * bytes under a second key for the shorter `resultTtlMs`, so Redis holds results only for as long
 * as retries are likely.
 */
export class RedisIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix = 'bgcut',
  ) {}

  async claim(key: string, fingerprint: string, token: string, times: IdempotencyTimes): Promise<Claim> {
    const found = (await this.redis.eval(CLAIM, 1, this.record(key), fingerprint, token, times.inProgressTtlMs)) as string[];
    if (found[0] === 'claimed') return { state: 'claimed', token };
    if (found[0] === 'in-progress') return { state: 'in-progress', fingerprint: found[1]! };
    const meta = found[2] ? (JSON.parse(found[2]) as { status: number; headers: Record<string, string> }) : undefined;
    const body = meta ? await this.redis.getBuffer(this.result(key)) : null;
    return { state: 'done', fingerprint: found[1]!, result: meta && body ? { ...meta, body } : undefined };
  }

  async complete(key: string, token: string, result: StoredResponse | undefined, times: IdempotencyTimes): Promise<void> {
    const meta = result ? JSON.stringify({ status: result.status, headers: result.headers }) : '';
    await this.redis.eval(COMPLETE, 2, this.record(key), this.result(key), token, meta, times.keyTtlMs, times.resultTtlMs, result?.body ?? '');
  }

  async abandon(key: string, token: string): Promise<void> {
    await this.redis.eval(ABANDON, 1, this.record(key), token);
  }

  // The record and the result share the Idempotency-Key's hash tag (one Cluster slot).
  private record(key: string): string {
    return `${this.prefix}:${tag('i', key)}:idem`;
  }

  private result(key: string): string {
    return `${this.prefix}:${tag('i', key)}:idem-result`;
  }
}
