import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { hashesEqual } from './api-key.js';
import { KeyAlreadyReplacedError, newKey, NotFoundError, TooManyKeysError } from './key-records.js';
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
  /** Most keys remembered; the least recently used is forgotten first. Default 100 000. */
  cacheMaxEntries?: number;
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

// A new key is one script: the account (created, or moved to the plan), the ceiling on its
// active keys, the revocation of its other keys (`revokeOthers`) and the key's records are read,
// checked and written in one step, reads and checks before any write (a script that fails
// half-way keeps what it wrote), so two creations cannot both pass the ceiling and a failed one
// writes nothing.
const ACTIVE_KEYS = `
local function activeKeys(prefix, accountKeys, now, except)
  local count = 0
  local records = {}
  for _, id in ipairs(redis.call('SMEMBERS', accountKeys)) do
    local hash = redis.call('GET', prefix .. ':keyid:' .. id)
    local raw = hash and redis.call('GET', prefix .. ':key:' .. hash)
    if raw then
      local record = cjson.decode(raw)
      local revoked = record.revokedAt ~= nil and record.revokedAt ~= cjson.null
      local expired = record.expiresAt ~= nil and record.expiresAt ~= cjson.null and record.expiresAt <= now
      if not revoked and not expired and record.id ~= except then
        count = count + 1
        records[#records + 1] = { key = prefix .. ':key:' .. hash, record = record }
      end
    end
  end
  return count, records
end
`;

/**
 * KEYS: account, accounts set, account-keys set, new key record, new key id.
 * ARGV: prefix, account id, plan, record JSON, hash, key id, now ISO, max active (0: none), revoke others ('1').
 * Error 'too_many_keys' when the account already has `max active` keys.
 */
const CREATE_KEY = `${ACTIVE_KEYS}
local raw = redis.call('GET', KEYS[1])
local account
if raw then
  account = cjson.decode(raw)
  account.plan = ARGV[3]
else
  account = { id = ARGV[2], plan = ARGV[3], status = 'active' }
end
local count, others = activeKeys(ARGV[1], KEYS[3], ARGV[7], nil)
if ARGV[9] ~= '1' and tonumber(ARGV[8]) > 0 and count >= tonumber(ARGV[8]) then return redis.error_reply('too_many_keys') end
if ARGV[9] == '1' then
  for _, other in ipairs(others) do
    other.record.revokedAt = ARGV[7]
    redis.call('SET', other.key, cjson.encode(other.record))
  end
end
redis.call('SET', KEYS[1], cjson.encode(account))
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('SET', KEYS[4], ARGV[4])
redis.call('SET', KEYS[5], ARGV[5])
redis.call('SADD', KEYS[3], ARGV[6])
return 1
`;

/**
 * Rotation is one script: the old key's end is brought forward and its successor stored in the
 * same step, so there is no moment (and no failure) that leaves the old key shortened with no
 * new one, and a revocation that came first makes the whole rotation fail.
 * KEYS: old key record, account, account-keys set, new key record, new key id.
 * ARGV: overlap end ISO, new record JSON (its expiresAt is set here to the old key's), hash, key id.
 * The old record as changed and the new one (JSON), or nil when either is missing; error 'revoked'.
 */
const ROTATE_KEY = `
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local old = cjson.decode(raw)
if old.revokedAt ~= nil and old.revokedAt ~= cjson.null then return redis.error_reply('revoked') end
if old.replacedBy ~= nil and old.replacedBy ~= cjson.null then return redis.error_reply('replaced ' .. old.replacedBy) end
if not redis.call('GET', KEYS[2]) then return nil end
local created = cjson.decode(ARGV[2])
old.replacedBy = created.id
created.expiresAt = old.expiresAt
if created.expiresAt == nil then created.expiresAt = cjson.null end
local current = old.expiresAt
if current == nil or current == cjson.null or ARGV[1] < current then old.expiresAt = ARGV[1] end
local oldOut = cjson.encode(old)
local createdOut = cjson.encode(created)
redis.call('SET', KEYS[1], oldOut)
redis.call('SET', KEYS[4], createdOut)
redis.call('SET', KEYS[5], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[4])
return { oldOut, createdOut }
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
  /** Keys looked up lately, least recently used forgotten first (unknown keys are never kept). */
  private readonly cache: LRUCache<string, { lookup: KeyLookup; at: number }>;

  constructor(options: RedisKeyStoreOptions) {
    this.redis = options.redis;
    this.prefix = options.keyPrefix ?? 'bgcut';
    this.cacheTtlMs = options.cacheTtlMs ?? 5000;
    this.maxStaleMs = options.maxStaleMs ?? 10 * 60_000;
    this.cache = new LRUCache({ max: options.cacheMaxEntries ?? 100_000 });
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
    const { record } = created;
    await this.script(
      CREATE_KEY,
      [this.k('account', options.accountId), this.k('accounts'), this.k('account-keys', options.accountId), this.k('key', record.hash), this.k('keyid', record.id)],
      [this.prefix, options.accountId, options.plan, JSON.stringify(record), record.hash, record.id, record.createdAt, options.maxActiveKeys ?? 0, options.revokeOthers ? '1' : '0'],
    ).catch((error: Error) => {
      if (isScriptError(error, 'too_many_keys')) throw new TooManyKeysError(options.maxActiveKeys!);
      throw error;
    });
    if (options.revokeOthers) this.cache.clear();
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
    if (old.replacedBy) throw new KeyAlreadyReplacedError(keyId, old.replacedBy);
    const created = newKey({ accountId: old.accountId, plan: '', allowedIps: old.allowedIps, allowedOrigins: old.allowedOrigins, label: old.label });
    const { record } = created;
    const written = (await this.script(
      ROTATE_KEY,
      [this.k('key', old.hash), this.k('account', old.accountId), this.k('account-keys', old.accountId), this.k('key', record.hash), this.k('keyid', record.id)],
      [new Date(Date.now() + overlapMs).toISOString(), JSON.stringify(record), record.hash, record.id],
    ).catch((error: Error) => {
      if (isScriptError(error, 'revoked')) throw new Error(`key ${keyId} is revoked`);
      const replaced = /replaced (\S+)/.exec(error.message);
      if (replaced) throw new KeyAlreadyReplacedError(keyId, replaced[1]!);
      throw error;
    })) as [string, string] | null;
    if (!written) throw new NotFoundError(`no key ${keyId} or no account ${old.accountId}`);
    this.cache.delete(old.hash);
    return { key: created.key, record: JSON.parse(written[1]) as KeyRecord, old: JSON.parse(written[0]) as KeyRecord };
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
    // Unknown keys are not cached, so guessing cannot fill it.
    if (!lookup) {
      this.cache.delete(hash);
      return;
    }
    this.cache.set(hash, { lookup, at: Date.now() });
  }

  /** One script; its error reply (a check that failed) rejects with the reply's text as message. */
  private script(source: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    return this.redis.eval(source, keys.length, ...keys, ...args);
  }

  private async patchKey(record: KeyRecord, op: 'revoke' | 'expire-by', at: Date): Promise<KeyRecord> {
    const raw = await (this.redis.eval(PATCH_KEY, 1, this.k('key', record.hash), op, at.toISOString()) as Promise<string | null>).catch((error: Error) => {
      if (isScriptError(error, 'revoked')) throw new Error(`key ${record.id} is revoked`);
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

/** An error reply of one of the scripts above (Redis 7 prefixes it with `ERR `). */
function isScriptError(error: Error, code: string): boolean {
  return error.message === code || error.message === `ERR ${code}`;
}
