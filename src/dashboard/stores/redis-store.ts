import type { RedisClient } from '../../core/redis.js';
import { dayOf, type ActivityBatch } from '../../core/activity/recorder.js';
import type { Account } from '../../core/auth/key-store.js';
import { checkKeyPrefix, execAll } from '../../core/redis.js';
import { redisAccountKey } from '../../core/auth/redis-key-store.js';
import { redisDailyUsageKey } from '../../core/limits/usage-meter.js';
import { EmailTakenError, type AccountHolder, type DashboardStore, type SessionRecord } from '../store.js';

export interface RedisDashboardStoreOptions {
  /** The RedisKeyStore's client. */
  redis: RedisClient;
  /** The RedisKeyStore's prefix (and the handler's `limits.keyPrefix`). Default `bgcut`. */
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
 * Sets the holder in one step, so two instances cannot give one email to two accounts (no check
 * then write). KEYS: holder of the email, the account's email, the holder of the account's
 * previous email (the caller read it; '' in ARGV[3] when none). ARGV: account id, holder JSON,
 * previous email as read. Errors 'taken' (the email is another account's), 'changed' (the
 * account's email moved since it was read: read again).
 */
const SET_HOLDER = `
local current = redis.call('GET', KEYS[2]) or ''
if current ~= ARGV[3] then return redis.error_reply('changed') end
local existing = redis.call('GET', KEYS[1])
if existing and cjson.decode(existing).accountId ~= ARGV[1] then return redis.error_reply('taken') end
if current ~= '' and KEYS[3] ~= KEYS[1] then redis.call('DEL', KEYS[3]) end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], cjson.decode(ARGV[2]).email)
return 1
`;

/** Part of an activity batch was not written (the rest was): the recorder keeps only this part. */
export class ActivityWriteError extends Error {
  override readonly name = 'ActivityWriteError';
  constructor(
    readonly unwritten: ActivityBatch,
    override readonly cause: unknown,
  ) {
    super(`activity not written: ${(cause as Error)?.message ?? cause}`);
  }
}

/**
 * Account holders, sessions and activity beside the RedisKeyStore's keys, on one server or a
 * Cluster. Layout (default prefix): holders, whose emails must be unique across accounts, share one
 * hash tag: `bgcut:{holders}:email:<email>` holder (JSON), `bgcut:{holders}:of:<account>` its
 * email; `bgcut:session:<sha256>` session (JSON, expiring with it); under the account's tag
 * (`{a:<account>}`, as in RedisKeyStore): `…:account`, `…:sessions` set of session hashes,
 * `…:daily` hash day -> requests; `bgcut:key-last-used` hash key id -> time. The handler's
 * usage meter keeps charged cutouts per day under the same tag (`…:usage-days:<month>`), which
 * `dailyUsage` reads for the usage page's chart.
 */
export class RedisDashboardStore implements DashboardStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;

  constructor(options: RedisDashboardStoreOptions) {
    this.redis = options.redis;
    this.prefix = checkKeyPrefix(options.keyPrefix ?? 'bgcut');
  }

  async findAccount(accountId: string): Promise<Account | undefined> {
    const raw = await this.redis.get(redisAccountKey(this.prefix, accountId, 'account'));
    return raw ? (JSON.parse(raw) as Account) : undefined;
  }

  async findHolder(email: string): Promise<AccountHolder | undefined> {
    const raw = await this.redis.get(this.holderKey(email));
    return raw ? (JSON.parse(raw) as AccountHolder) : undefined;
  }

  async setHolder(holder: AccountHolder): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const previousEmail = (await this.redis.get(this.holderOfKey(holder.accountId))) ?? '';
      try {
        await this.redis.eval(
          SET_HOLDER,
          3,
          this.holderKey(holder.email),
          this.holderOfKey(holder.accountId),
          previousEmail ? this.holderKey(previousEmail) : this.holderKey(holder.email),
          holder.accountId,
          JSON.stringify(holder),
          previousEmail,
        );
        return;
      } catch (error) {
        const message = (error as Error).message;
        if (/\btaken$/.test(message)) throw new EmailTakenError(`${holder.email} already signs in to another account`);
        if (!/\bchanged$/.test(message) || attempt >= 20) throw error;
      }
    }
  }

  /**
   * Copies holders stored by releases before the `{holders}` layout (`<prefix>:holder:<email>`,
   * `<prefix>:holder-of:<account>`); sessions are not copied (holders sign in again). Safe to run again.
   */
  async migrateLegacyHolders(): Promise<number> {
    let copied = 0;
    for (const accountId of await this.redis.smembers(this.k('accounts'))) {
      const email = await this.redis.get(this.k('holder-of', accountId));
      const raw = email ? await this.redis.get(this.k('holder', email)) : null;
      if (!email || !raw) continue;
      if (await this.redis.set(this.holderKey(email), raw, 'NX')) {
        await this.redis.set(this.holderOfKey(accountId), email, 'NX');
        copied++;
      }
    }
    return copied;
  }

  async createSession(idHash: string, session: SessionRecord): Promise<void> {
    const ttlMs = Math.max(1, Date.parse(session.expiresAt) - Date.now());
    // Listed under its account before it exists (two slots, no MULTI across them): signing the
    // account out everywhere cannot miss a session; a listed id with no session is harmless.
    await this.redis.sadd(this.accountKey(session.accountId, 'sessions'), idHash);
    await this.redis.set(this.k('session', idHash), JSON.stringify(session), 'PX', ttlMs);
  }

  async findSession(idHash: string): Promise<SessionRecord | undefined> {
    const raw = await this.redis.get(this.k('session', idHash));
    return raw ? (JSON.parse(raw) as SessionRecord) : undefined;
  }

  async deleteSession(idHash: string): Promise<void> {
    const session = await this.findSession(idHash);
    await this.redis.del(this.k('session', idHash));
    if (session) await this.redis.srem(this.accountKey(session.accountId, 'sessions'), idHash);
  }

  async deleteSessionsOf(accountId: string, keepIdHash?: string): Promise<void> {
    const ids = (await this.redis.smembers(this.accountKey(accountId, 'sessions'))).filter((id) => id !== keepIdHash);
    if (ids.length === 0) return;
    // Each session is its own slot: deleted one by one, then unlisted (a failure leaves them listed).
    await Promise.all(ids.map((id) => this.redis.del(this.k('session', id))));
    await this.redis.srem(this.accountKey(accountId, 'sessions'), ...ids);
  }

  /**
   * One MULTI per account (its slot) and one script for the last-used times. A part that fails is
   * thrown back as ActivityWriteError.unwritten, so the recorder retries it alone and counts
   * nothing twice.
   */
  async addActivity(batch: ActivityBatch): Promise<void> {
    // The day that just left the kept window is dropped, so an active account's hash stays ~35 fields.
    const dropped = dayOf(new Date(Date.now() - (DAILY_TTL_SECONDS + 86400) * 1000));
    const byAccount = new Map<string, ActivityBatch['daily']>();
    for (const entry of batch.daily) byAccount.set(entry.accountId, [...(byAccount.get(entry.accountId) ?? []), entry]);
    const unwritten: ActivityBatch = { daily: [], lastUsed: [] };
    let firstError: unknown;
    const writes = [...byAccount].map(async ([accountId, entries]) => {
      const key = this.accountKey(accountId, 'daily');
      const multi = this.redis.multi();
      for (const { day, count } of entries) multi.hincrby(key, day, count);
      try {
        await execAll(multi.hdel(key, dropped).expire(key, DAILY_TTL_SECONDS));
      } catch (error) {
        firstError ??= error;
        unwritten.daily.push(...entries);
      }
    });
    if (batch.lastUsed.length > 0) {
      writes.push(
        (this.redis.eval(MAX_TIMES, 1, this.k('key-last-used'), ...batch.lastUsed.flatMap((u) => [u.keyId, u.at])) as Promise<unknown>).then(
          () => {},
          (error: unknown) => {
            firstError ??= error;
            unwritten.lastUsed.push(...batch.lastUsed);
          },
        ),
      );
    }
    await Promise.all(writes);
    if (firstError !== undefined) throw new ActivityWriteError(unwritten, firstError);
  }

  async dailyCounts(accountId: string, days: string[]): Promise<number[]> {
    if (days.length === 0) return [];
    const values = await this.redis.hmget(this.accountKey(accountId, 'daily'), ...days);
    return values.map((v) => Number(v ?? 0));
  }

  /**
   * Charged cutouts per day, as the handler's RedisUsageMeter records them with the month's
   * total (same script, same slot): the usage page charts them apart from refusals.
   */
  async dailyUsage(accountId: string, days: string[]): Promise<Array<{ images: number; megapixels: number }>> {
    const byMonth = new Map<string, string[]>();
    for (const day of days) byMonth.set(day.slice(0, 7), [...(byMonth.get(day.slice(0, 7)) ?? []), day]);
    const found = new Map<string, { images: number; megapixels: number }>();
    await Promise.all(
      [...byMonth].map(async ([month, monthDays]) => {
        const fields = monthDays.flatMap((day) => [`${day}:images`, `${day}:megapixels`]);
        const values = await this.redis.hmget(redisDailyUsageKey(this.prefix, accountId, month), ...fields);
        monthDays.forEach((day, i) => found.set(day, { images: Number(values[2 * i] ?? 0), megapixels: Number(values[2 * i + 1] ?? 0) }));
      }),
    );
    return days.map((day) => found.get(day) ?? { images: 0, megapixels: 0 });
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

  private accountKey(accountId: string, what: 'sessions' | 'daily'): string {
    return redisAccountKey(this.prefix, accountId, what);
  }

  private holderKey(email: string): string {
    return `${this.prefix}:{holders}:email:${email}`;
  }

  private holderOfKey(accountId: string): string {
    return `${this.prefix}:{holders}:of:${accountId}`;
  }
}
