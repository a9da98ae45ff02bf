import type { Redis } from 'ioredis';
import { dayOf, type ActivityBatch } from '../../core/activity/recorder.js';
import type { Account } from '../../core/auth/key-store.js';
import { execAll } from '../../core/redis.js';
import { EmailTakenError, type AccountHolder, type DashboardStore, type SessionRecord } from '../store.js';

export interface RedisDashboardStoreOptions {
  /** The RedisKeyStore's client. */
  redis: Redis;
  /** The RedisKeyStore's prefix. Default `bgcut`. */
  keyPrefix?: string;
}

/** Per-day counts live a little longer than the 30 days shown. */
const DAILY_TTL_SECONDS = 35 * 86400;

/** Keeps the later of two ISO times for each key id: one round trip for the whole batch. */
const MAX_TIMES = `
for i = 1, #ARGV, 2 do
  local current = redis.call('HGET', KEYS[1], ARGV[i])
  if (not current) or current < ARGV[i + 1] then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 1
`;

/**
 * Account holders, sessions and activity beside the RedisKeyStore's keys. Layout (default
 * prefix): `bgcut:holder:<email>` holder (JSON), `bgcut:holder-of:<account>` its email,
 * `bgcut:session:<sha256>` session (JSON, expiring with it), `bgcut:sessions-of:<account>` set of
 * session hashes, `bgcut:daily:<account>` hash day -> requests, `bgcut:key-last-used` hash key id -> time.
 */
export class RedisDashboardStore implements DashboardStore {
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(options: RedisDashboardStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.keyPrefix ?? 'bgcut';
  }

  async findAccount(accountId: string): Promise<Account | undefined> {
    const raw = await this.redis.get(this.k('account', accountId));
    return raw ? (JSON.parse(raw) as Account) : undefined;
  }

  async findHolder(email: string): Promise<AccountHolder | undefined> {
    const raw = await this.redis.get(this.k('holder', email));
    return raw ? (JSON.parse(raw) as AccountHolder) : undefined;
  }

  async setHolder(holder: AccountHolder): Promise<void> {
    const existing = await this.findHolder(holder.email);
    if (existing && existing.accountId !== holder.accountId) throw new EmailTakenError(`${holder.email} already signs in to another account`);
    const previousEmail = await this.redis.get(this.k('holder-of', holder.accountId));
    const multi = this.redis.multi();
    if (previousEmail && previousEmail !== holder.email) multi.del(this.k('holder', previousEmail));
    await execAll(multi.set(this.k('holder', holder.email), JSON.stringify(holder)).set(this.k('holder-of', holder.accountId), holder.email));
  }

  async createSession(idHash: string, session: SessionRecord): Promise<void> {
    const ttlMs = Math.max(1, Date.parse(session.expiresAt) - Date.now());
    await execAll(
      this.redis
        .multi()
        .set(this.k('session', idHash), JSON.stringify(session), 'PX', ttlMs)
        .sadd(this.k('sessions-of', session.accountId), idHash),
    );
  }

  async findSession(idHash: string): Promise<SessionRecord | undefined> {
    const raw = await this.redis.get(this.k('session', idHash));
    return raw ? (JSON.parse(raw) as SessionRecord) : undefined;
  }

  async deleteSession(idHash: string): Promise<void> {
    const session = await this.findSession(idHash);
    const multi = this.redis.multi().del(this.k('session', idHash));
    if (session) multi.srem(this.k('sessions-of', session.accountId), idHash);
    await execAll(multi);
  }

  async deleteSessionsOf(accountId: string, keepIdHash?: string): Promise<void> {
    const ids = (await this.redis.smembers(this.k('sessions-of', accountId))).filter((id) => id !== keepIdHash);
    if (ids.length === 0) return;
    await execAll(
      this.redis
        .multi()
        .del(...ids.map((id) => this.k('session', id)))
        .srem(this.k('sessions-of', accountId), ...ids),
    );
  }

  async addActivity(batch: ActivityBatch): Promise<void> {
    const multi = this.redis.multi();
    // The day that just left the kept window is dropped, so an active account's hash stays ~35 fields.
    const dropped = dayOf(new Date(Date.now() - (DAILY_TTL_SECONDS + 86400) * 1000));
    for (const { accountId, day, count } of batch.daily) {
      const key = this.k('daily', accountId);
      multi.hincrby(key, day, count).hdel(key, dropped).expire(key, DAILY_TTL_SECONDS);
    }
    if (batch.lastUsed.length > 0) multi.eval(MAX_TIMES, 1, this.k('key-last-used'), ...batch.lastUsed.flatMap((u) => [u.keyId, u.at]));
    await execAll(multi);
  }

  async dailyCounts(accountId: string, days: string[]): Promise<number[]> {
    if (days.length === 0) return [];
    const values = await this.redis.hmget(this.k('daily', accountId), ...days);
    return values.map((v) => Number(v ?? 0));
  }

  async lastUsed(keyIds: string[]): Promise<Record<string, string>> {
    if (keyIds.length === 0) return {};
    const values = await this.redis.hmget(this.k('key-last-used'), ...keyIds);
    const found: Record<string, string> = {};
    keyIds.forEach((id, i) => {
      if (values[i]) found[id] = values[i]!;
    });
    return found;
  }

  private k(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }
}
