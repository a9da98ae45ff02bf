import type { Redis } from 'ioredis';
import { hashesEqual } from './api-key.js';
import { newKey, NotFoundError } from './key-records.js';
import type { Account, CreateKeyOptions, KeyAdmin, KeyLookup, KeyRecord } from './key-store.js';

export interface RedisKeyStoreOptions {
  redis: Redis;
  /** Prefix of every key. Default `bgcut`. */
  keyPrefix?: string;
  /**
   * How long a looked-up key is reused from memory, in ms. A revocation or suspension takes
   * effect on every instance within this time. Default 5000; 0 turns the cache off.
   */
  cacheTtlMs?: number;
  /**
   * While Redis cannot be reached, keys seen within this many ms keep working from memory;
   * others get 503. Default 10 minutes; 0 to fail every lookup at once.
   */
  maxStaleMs?: number;
}

// Changes to a stored record are read-modify-writes done inside Redis (Lua, one step each), so two
// admins changing one key or account at once cannot undo each other (a revocation racing a
// rotation, a suspension racing a new key).

/** KEYS: key record. ARGV: 'revoke' | 'expire-by', ISO time. The new record, nil if none, error 'revoked'. */
const PATCH_KEY = `
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local record = cjson.decode(raw)
local revoked = record.revokedAt ~= nil and record.revokedAt ~= cjson.null
if ARGV[1] == 'revoke' then
  if not revoked then record.revokedAt = ARGV[2] end
else
  if revoked then return redis.error_reply('revoked') end
  local current = record.expiresAt
  if current == nil or current == cjson.null or ARGV[2] < current then record.expiresAt = ARGV[2] end
end
local out = cjson.encode(record)
redis.call('SET', KEYS[1], out)
return out
`;

/** KEYS: account. ARGV: id, plan. Creates the account (active) or moves it to the plan, keeping its status. */
const UPSERT_ACCOUNT = `
local raw = redis.call('GET', KEYS[1])
local account
if raw then
  account = cjson.decode(raw)
  account.plan = ARGV[2]
else
  account = { id = ARGV[1], plan = ARGV[2], status = 'active' }
end
redis.call('SET', KEYS[1], cjson.encode(account))
return 1
`;

/** KEYS: account. ARGV: status. The new account, nil if none. */
const SET_STATUS = `
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local account = cjson.decode(raw)
account.status = ARGV[1]
local out = cjson.encode(account)
redis.call('SET', KEYS[1], out)
return out
`;

/**
 * Keys and accounts in Redis, for many API instances. Layout (with the default prefix):
 * `bgcut:key:<sha256>` key record (JSON), `bgcut:keyid:<id>` its hash, `bgcut:account:<id>`
 * account (JSON), `bgcut:accounts` set of account ids, `bgcut:account-keys:<id>` set of key ids.
 */
export class RedisKeyStore implements KeyAdmin {
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly cacheTtlMs: number;
  private readonly maxStaleMs: number;
  private readonly cache = new Map<string, { lookup: KeyLookup | undefined; at: number }>();

  constructor(options: RedisKeyStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.keyPrefix ?? 'bgcut';
    this.cacheTtlMs = options.cacheTtlMs ?? 5000;
    this.maxStaleMs = options.maxStaleMs ?? 10 * 60_000;
  }

  async findByHash(hash: string): Promise<KeyLookup | undefined> {
    const cached = this.cache.get(hash);
    if (cached && Date.now() - cached.at < this.cacheTtlMs) return cached.lookup;
    try {
      const lookup = await this.fetch(hash);
      this.remember(hash, lookup);
      return lookup;
    } catch (error) {
      if (cached?.lookup && Date.now() - cached.at < this.maxStaleMs) return cached.lookup;
      throw error;
    }
  }

  async createKey(options: CreateKeyOptions): Promise<{ key: string; record: KeyRecord }> {
    const created = newKey(options);
    const multi = this.redis.multi();
    if (options.revokeOthers) {
      for (const other of await this.listKeys(options.accountId)) {
        if (!other.revokedAt) multi.eval(PATCH_KEY, 1, this.k('key', other.hash), 'revoke', created.record.createdAt);
      }
    }
    multi
      .set(this.k('key', created.record.hash), JSON.stringify(created.record))
      .set(this.k('keyid', created.record.id), created.record.hash)
      .eval(UPSERT_ACCOUNT, 1, this.k('account', options.accountId), options.accountId, options.plan)
      .sadd(this.k('accounts'), options.accountId)
      .sadd(this.k('account-keys', options.accountId), created.record.id);
    await multi.exec();
    return created;
  }

  async listKeys(accountId?: string): Promise<KeyRecord[]> {
    const accounts = accountId ? [accountId] : await this.redis.smembers(this.k('accounts'));
    const records: KeyRecord[] = [];
    for (const id of accounts) {
      for (const keyId of await this.redis.smembers(this.k('account-keys', id))) {
        const record = await this.getKeyById(keyId).catch(() => undefined);
        if (record) records.push(record);
      }
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    const record = await this.getKeyById(keyId);
    const revoked = await this.patchKey(record, 'revoke', new Date());
    this.cache.delete(record.hash);
    return revoked;
  }

  async rotateKey(keyId: string, overlapMs: number): Promise<{ key: string; record: KeyRecord; old: KeyRecord }> {
    const old = await this.getKeyById(keyId);
    if (old.revokedAt) throw new Error(`key ${keyId} is revoked`);
    const account = await this.getAccount(old.accountId);
    if (!account) throw new NotFoundError(`no account ${old.accountId}`);
    // The old key's end is set first, in one step that fails if it was revoked meanwhile.
    const ending = await this.patchKey(old, 'expire-by', new Date(Date.now() + overlapMs));
    this.cache.delete(old.hash);
    const created = await this.createKey({
      accountId: old.accountId,
      plan: account.plan,
      expiresAt: old.expiresAt ? new Date(old.expiresAt) : null,
      allowedIps: old.allowedIps,
      allowedOrigins: old.allowedOrigins,
      label: old.label,
    });
    return { ...created, old: ending };
  }

  async listAccounts(): Promise<Account[]> {
    const ids = await this.redis.smembers(this.k('accounts'));
    const accounts = await Promise.all(ids.map((id) => this.getAccount(id)));
    return accounts.filter((a): a is Account => Boolean(a)).sort((a, b) => a.id.localeCompare(b.id));
  }

  async setAccountStatus(accountId: string, status: Account['status']): Promise<Account> {
    const raw = (await this.redis.eval(SET_STATUS, 1, this.k('account', accountId), status)) as string | null;
    if (!raw) throw new NotFoundError(`no account ${accountId}`);
    this.cache.clear();
    return JSON.parse(raw) as Account;
  }

  async close(): Promise<void> {
    this.cache.clear();
  }

  private async fetch(hash: string): Promise<KeyLookup | undefined> {
    const raw = await this.redis.get(this.k('key', hash));
    if (!raw) return undefined;
    const key = JSON.parse(raw) as KeyRecord;
    if (!hashesEqual(key.hash, hash)) return undefined;
    const account = await this.getAccount(key.accountId);
    return account ? { key, account } : undefined;
  }

  private remember(hash: string, lookup: KeyLookup | undefined): void {
    if (this.cacheTtlMs <= 0 && this.maxStaleMs <= 0) return;
    // Bounded: unknown keys are not cached, so guessing cannot grow it without limit.
    if (!lookup) {
      this.cache.delete(hash);
      return;
    }
    if (this.cache.size >= 100_000) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(hash, { lookup, at: Date.now() });
  }

  private async patchKey(record: KeyRecord, op: 'revoke' | 'expire-by', at: Date): Promise<KeyRecord> {
    const raw = await (this.redis.eval(PATCH_KEY, 1, this.k('key', record.hash), op, at.toISOString()) as Promise<string | null>).catch((error: Error) => {
      if (error.message === 'revoked') throw new Error(`key ${record.id} is revoked`);
      throw error;
    });
    if (!raw) throw new NotFoundError(`no key ${record.id}`);
    return JSON.parse(raw) as KeyRecord;
  }

  private async getAccount(id: string): Promise<Account | undefined> {
    const raw = await this.redis.get(this.k('account', id));
    return raw ? (JSON.parse(raw) as Account) : undefined;
  }

  private async getKeyById(keyId: string): Promise<KeyRecord> {
    const hash = await this.redis.get(this.k('keyid', keyId));
    const raw = hash ? await this.redis.get(this.k('key', hash)) : null;
    if (!raw) throw new NotFoundError(`no key ${keyId}`);
    return JSON.parse(raw) as KeyRecord;
  }

  private k(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }
}
