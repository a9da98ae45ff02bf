import { LRUCache } from 'lru-cache';
import { checkKeyPrefix, isUnreachable, tag, type RedisClient } from '../redis.js';
import { hashesEqual } from './api-key.js';
import { KeyAlreadyReplacedError, newKey, NotFoundError, TooManyKeysError } from './key-records.js';
import type { Account, CreateKeyOptions, KeyAdmin, KeyLookup, KeyRecord } from './key-store.js';

export interface RedisKeyStoreOptions {
  redis: RedisClient;
  /** Prefix of every key. Default `bgcut`. */
  keyPrefix?: string;
  /**
   * How long a looked-up key is reused from memory, in ms: the backstop. Revocations, rotations,
   * suspensions and plan moves are published on a Redis channel and dropped from every instance's
   * cache as they happen (within a second); this bounds a change whose message was missed. Default
   * 5000; 0 turns the cache off.
   */
  cacheTtlMs?: number;
  /**
   * While Redis cannot be reached (connection lost, command timed out), a key confirmed within this
   * many ms keeps working from memory; any other lookup gets 503, and so does every lookup when
   * Redis answers with an error. So a key revoked while an instance was cut off from Redis is
   * refused there at most this long after its last confirmation. Default 60 000; 0 to fail every
   * lookup at once.
   */
  maxStaleMs?: number;
  /**
   * Subscribe to the change channel (`<prefix>:key-events`) on a second connection
   * (`redis.duplicate()`), opened at the first lookup. Default true; changes are published either way.
   */
  subscribe?: boolean;
  /** The clock, in ms (tests). Default Date.now. */
  now?: () => number;
  /** Most keys remembered; the least recently used is forgotten first. Default 100 000. */
  cacheMaxEntries?: number;
}

// Changes to a stored record are read-modify-writes done inside Redis (Lua, one step each), so two
// admins changing one key or account at once cannot undo each other (a revocation racing a
// rotation, a suspension racing a new key).

/** KEYS: key record. ARGV: ISO time. Revokes the key at that time unless it is revoked already; the record, nil if none. */
const REVOKE_KEY = `
local raw = redis.call('GET', KEYS[1])
if not raw then return nil end
local record = cjson.decode(raw)
if record.revokedAt == nil or record.revokedAt == cjson.null then record.revokedAt = ARGV[1] end
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
// writes nothing. Every key it touches is passed in KEYS (a Cluster routes by them): the caller
// reads the account's key ids first and passes their records; the script refuses ('changed') when
// the set moved meanwhile, and the caller reads again.
const SAME_KEY_IDS = `
local function sameKeyIds(set, first)
  if redis.call('SCARD', set) ~= #ARGV - first + 1 then return false end
  for i = first, #ARGV do
    if redis.call('SISMEMBER', set, ARGV[i]) == 0 then return false end
  end
  return true
end
`;

/**
 * KEYS: account, account-keys set, new key record, then the record of each id in ARGV[7..].
 * ARGV: account id, plan, record JSON, key id, now ISO, max active (0: none), revoke others ('1'),
 * then the account's key ids as the caller read them.
 * Errors 'too_many_keys' when the account already has `max active` keys, 'changed' when its ids moved.
 */
const CREATE_KEY = `${SAME_KEY_IDS}
if not sameKeyIds(KEYS[2], 8) then return redis.error_reply('changed') end
local raw = redis.call('GET', KEYS[1])
local account
if raw then
  account = cjson.decode(raw)
  account.plan = ARGV[2]
else
  account = { id = ARGV[1], plan = ARGV[2], status = 'active' }
end
local active = {}
for i = 4, #KEYS do
  local recordRaw = redis.call('GET', KEYS[i])
  if recordRaw then
    local record = cjson.decode(recordRaw)
    local revoked = record.revokedAt ~= nil and record.revokedAt ~= cjson.null
    local expired = record.expiresAt ~= nil and record.expiresAt ~= cjson.null and record.expiresAt <= ARGV[5]
    if not revoked and not expired then active[#active + 1] = { key = KEYS[i], record = record } end
  end
end
if ARGV[7] ~= '1' and tonumber(ARGV[6]) > 0 and #active >= tonumber(ARGV[6]) then return redis.error_reply('too_many_keys') end
local revokedHashes = {}
if ARGV[7] == '1' then
  for _, other in ipairs(active) do
    other.record.revokedAt = ARGV[5]
    redis.call('SET', other.key, cjson.encode(other.record))
    revokedHashes[#revokedHashes + 1] = other.record.hash
  end
end
redis.call('SET', KEYS[1], cjson.encode(account))
redis.call('SET', KEYS[3], ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
return revokedHashes
`;

/**
 * Rotation is one script: the old key's end is brought forward and its successor stored in the
 * same step, so there is no moment (and no failure) that leaves the old key shortened with no
 * new one, and a revocation that came first makes the whole rotation fail.
 * KEYS: old key record, account, account-keys set, new key record.
 * ARGV: overlap end ISO, new record JSON (its expiresAt is set here to the old key's), new key id.
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
redis.call('SADD', KEYS[3], ARGV[3])
return { oldOut, createdOut }
`;

/**
 * Keys and accounts in Redis, for many API instances, on one server, Sentinel or a Cluster.
 * Layout (default prefix): an account's keys share its hash tag, so each script touches one slot:
 * `bgcut:{a:<account>}:account` account (JSON), `bgcut:{a:<account>}:keys` set of its key ids,
 * `bgcut:{a:<account>}:key:<id>` key record (JSON). Two indexes, written before the records they
 * point to (an index to nothing finds nothing): `bgcut:keyhash:<sha256>` -> `<account> <id>`,
 * `bgcut:keyid:<id>` -> account; and `bgcut:accounts`, the set of account ids.
 */
export class RedisKeyStore implements KeyAdmin {
  private readonly redis: RedisClient;
  private readonly prefix: string;
  private readonly cacheTtlMs: number;
  private readonly maxStaleMs: number;
  /** Keys looked up lately, least recently used forgotten first (unknown keys are never kept). */
  private readonly cache: LRUCache<string, { lookup: KeyLookup; at: number }>;
  private readonly now: () => number;
  private readonly channel: string;
  private readonly subscribe: boolean;
  private subscriber: RedisClient | undefined;
  private subscribed: Promise<void> | undefined;
  /** Bumped by every change heard: a lookup that started before one is not cached. */
  private generation = 0;

  constructor(options: RedisKeyStoreOptions) {
    this.redis = options.redis;
    this.prefix = checkKeyPrefix(options.keyPrefix ?? 'bgcut');
    this.cacheTtlMs = options.cacheTtlMs ?? 5000;
    this.maxStaleMs = options.maxStaleMs ?? 60_000;
    this.cache = new LRUCache({ max: options.cacheMaxEntries ?? 100_000 });
    this.now = options.now ?? (() => Date.now());
    this.channel = this.k('key-events');
    this.subscribe = options.subscribe ?? true;
  }

  async findByHash(hash: string): Promise<KeyLookup | undefined> {
    if (!this.subscriber && this.subscribe && (this.cacheTtlMs > 0 || this.maxStaleMs > 0)) this.listen();
    const cached = this.cache.get(hash);
    if (cached && this.now() - cached.at < this.cacheTtlMs) return cached.lookup;
    const generation = this.generation;
    try {
      const lookup = await this.fetch(hash);
      if (generation === this.generation) this.remember(hash, lookup);
      return lookup;
    } catch (error) {
      // Stale only while Redis cannot be reached at all, and only for a while.
      if (cached?.lookup && isUnreachable(error) && this.now() - cached.at < this.maxStaleMs) return cached.lookup;
      throw error;
    }
  }

  /**
   * Listens for changes made by any instance (the CLI, the dashboard, another API pod). Every
   * time the subscription (re)connects the whole cache is dropped: messages sent while it was away
   * are lost.
   */
  private listen(): void {
    const subscriber = this.redis.duplicate();
    this.subscriber = subscriber;
    subscriber.on('error', () => {}); // the main connection reports outages
    this.subscribed = new Promise((resolve) => {
      subscriber.on('ready', () => {
        this.forget();
        subscriber.subscribe(this.channel).then(() => resolve(), () => {});
      });
    });
    subscriber.on('message', (_channel: string, message: string) => this.apply(message));
    // A Cluster connects by itself; one server was duplicated with its own lazyConnect setting.
    if (subscriber.status === 'wait') subscriber.connect().catch(() => {});
  }

  /**
   * Resolves once this instance hears changes made elsewhere (it subscribes at its first lookup,
   * or here): for readiness checks and tests.
   */
  listening(): Promise<void> {
    if (!this.subscriber) this.listen();
    return this.subscribed!;
  }

  private apply(message: string): void {
    let event: { hash?: string; account?: string };
    try {
      event = JSON.parse(message) as typeof event;
    } catch {
      return this.forget();
    }
    this.generation++;
    if (event.hash) this.cache.delete(event.hash);
    if (event.account) for (const [hash, entry] of this.cache.entries()) if (entry.lookup.account.id === event.account) this.cache.delete(hash);
  }

  private forget(): void {
    this.generation++;
    this.cache.clear();
  }

  /** Tells every instance (this one first) that a key or an account changed. Best effort: the TTL is the backstop. */
  private async publish(event: { hash?: string; account?: string }): Promise<void> {
    const message = JSON.stringify(event);
    this.apply(message);
    await this.redis.publish(this.channel, message).catch(() => {});
  }

  async createKey(options: CreateKeyOptions): Promise<{ key: string; record: KeyRecord }> {
    const created = newKey(options);
    const { record } = created;
    const accountId = options.accountId;
    await this.writeIndexes(accountId, record);
    try {
      for (let attempt = 1; ; attempt++) {
        const ids = await this.redis.smembers(this.accountKey(accountId, 'keys'));
        try {
          await this.script(
            CREATE_KEY,
            [this.accountKey(accountId, 'account'), this.accountKey(accountId, 'keys'), this.recordKey(accountId, record.id), ...ids.map((id) => this.recordKey(accountId, id))],
            [accountId, options.plan, JSON.stringify(record), record.id, record.createdAt, options.maxActiveKeys ?? 0, options.revokeOthers ? '1' : '0', ...ids],
          );
          break;
        } catch (error) {
          // Another change to the account's keys came between the read and the script: read again.
          if (!isScriptError(error as Error, 'changed') || attempt >= 20) throw error;
        }
      }
    } catch (error) {
      await this.dropIndexes(record);
      if (isScriptError(error as Error, 'too_many_keys')) throw new TooManyKeysError(options.maxActiveKeys!);
      throw error;
    }
    // The account may have moved plan, and with revokeOthers its other keys were revoked.
    await this.publish({ account: accountId });
    return created;
  }

  async listKeys(accountId?: string): Promise<KeyRecord[]> {
    const accounts = accountId ? [accountId] : await this.redis.smembers(this.k('accounts'));
    const records: KeyRecord[] = [];
    for (const id of accounts) {
      const keyIds = await this.redis.smembers(this.accountKey(id, 'keys'));
      if (keyIds.length === 0) continue;
      // One slot per account: one MGET on a Cluster too.
      for (const raw of await this.redis.mget(...keyIds.map((keyId) => this.recordKey(id, keyId)))) {
        if (raw) records.push(JSON.parse(raw) as KeyRecord);
      }
    }
    return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    const record = await this.getKeyById(keyId);
    const revoked = await this.revokeRecord(record, new Date());
    await this.publish({ hash: record.hash });
    return revoked;
  }

  async rotateKey(keyId: string, overlapMs: number): Promise<{ key: string; record: KeyRecord; old: KeyRecord }> {
    const old = await this.getKeyById(keyId);
    // A revoked or replaced key is refused by the script (it reads the record again, in the same step).
    const created = newKey({ accountId: old.accountId, allowedIps: old.allowedIps, allowedOrigins: old.allowedOrigins, label: old.label });
    const { record } = created;
    await this.writeIndexes(old.accountId, record);
    const written = (await this.script(
      ROTATE_KEY,
      [this.recordKey(old.accountId, old.id), this.accountKey(old.accountId, 'account'), this.accountKey(old.accountId, 'keys'), this.recordKey(old.accountId, record.id)],
      [new Date(Date.now() + overlapMs).toISOString(), JSON.stringify(record), record.id],
    ).catch(async (error: Error) => {
      await this.dropIndexes(record);
      if (isScriptError(error, 'revoked')) throw new Error(`key ${keyId} is revoked`);
      const replaced = /replaced (\S+)/.exec(error.message);
      if (replaced) throw new KeyAlreadyReplacedError(keyId, replaced[1]!);
      throw error;
    })) as [string, string] | null;
    if (!written) {
      await this.dropIndexes(record);
      throw new NotFoundError(`no key ${keyId} or no account ${old.accountId}`);
    }
    await this.publish({ hash: old.hash });
    return { key: created.key, record: JSON.parse(written[1]) as KeyRecord, old: JSON.parse(written[0]) as KeyRecord };
  }

  async listAccounts(): Promise<Account[]> {
    const ids = await this.redis.smembers(this.k('accounts'));
    const accounts = await Promise.all(ids.map((id) => this.getAccount(id)));
    return accounts.filter((a): a is Account => Boolean(a)).sort((a, b) => a.id.localeCompare(b.id));
  }

  async setAccountStatus(accountId: string, status: Account['status']): Promise<Account> {
    const raw = (await this.redis.eval(SET_STATUS, 1, this.accountKey(accountId, 'account'), status)) as string | null;
    if (!raw) throw new NotFoundError(`no account ${accountId}`);
    await this.publish({ account: accountId });
    return JSON.parse(raw) as Account;
  }

  async close(): Promise<void> {
    this.cache.clear();
    this.subscriber?.disconnect();
  }

  /**
   * Copies keys and accounts stored by releases before the per-account layout (`<prefix>:key:<sha256>`,
   * `<prefix>:account:<id>`, `<prefix>:account-keys:<id>`, `<prefix>:keyid:<id>` -> hash) into it,
   * on the one server that held them. Safe to run again (what was copied is skipped), and while API
   * instances of this release run (they find a key once its records are copied). Leaves the old
   * keys in place. `bgcut-keys redis migrate` runs it.
   */
  async migrateLegacyLayout(): Promise<{ accounts: number; keys: number }> {
    let accounts = 0;
    let keys = 0;
    for (const accountId of await this.redis.smembers(this.k('accounts'))) {
      const legacyAccount = await this.redis.get(this.k('account', accountId));
      if (legacyAccount && (await this.redis.set(this.accountKey(accountId, 'account'), legacyAccount, 'NX'))) accounts++;
      for (const keyId of await this.redis.smembers(this.k('account-keys', accountId))) {
        const hash = await this.redis.get(this.k('keyid', keyId));
        // Already migrated: the id points to its account now, not to a hash, and no legacy record
        // is stored under an account id (nor under an id whose record was lost).
        if (!hash) continue;
        const raw = await this.redis.get(this.k('key', hash));
        if (!raw) continue;
        await this.redis.set(this.recordKey(accountId, keyId), raw, 'NX');
        await this.redis.sadd(this.accountKey(accountId, 'keys'), keyId);
        await this.redis.set(this.k('keyhash', hash), `${accountId} ${keyId}`);
        await this.redis.set(this.k('keyid', keyId), accountId);
        keys++;
      }
    }
    return { accounts, keys };
  }

  private async fetch(hash: string): Promise<KeyLookup | undefined> {
    const index = await this.redis.get(this.k('keyhash', hash));
    if (!index) return undefined;
    const [accountId, keyId] = splitIndex(index);
    const [raw, accountRaw] = await this.redis.mget(this.recordKey(accountId, keyId), this.accountKey(accountId, 'account'));
    if (!raw || !accountRaw) return undefined;
    const key = JSON.parse(raw) as KeyRecord;
    if (!hashesEqual(key.hash, hash)) return undefined;
    return { key, account: JSON.parse(accountRaw) as Account };
  }

  private remember(hash: string, lookup: KeyLookup | undefined): void {
    if (this.cacheTtlMs <= 0 && this.maxStaleMs <= 0) return;
    // Unknown keys are not cached, so guessing cannot fill it.
    if (!lookup) {
      this.cache.delete(hash);
      return;
    }
    this.cache.set(hash, { lookup, at: this.now() });
  }

  /** One script; its error reply (a check that failed) rejects with the reply's text as message. */
  private script(source: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    return this.redis.eval(source, keys.length, ...keys, ...args);
  }

  /**
   * The two indexes of a new key and its account's entry in the accounts set, each its own slot,
   * written before the script that stores the key: until then they point to nothing.
   */
  private async writeIndexes(accountId: string, record: KeyRecord): Promise<void> {
    await Promise.all([
      this.redis.set(this.k('keyhash', record.hash), `${accountId} ${record.id}`),
      this.redis.set(this.k('keyid', record.id), accountId),
      this.redis.sadd(this.k('accounts'), accountId),
    ]);
  }

  /** Indexes of a key that was not stored (best effort: left over, they still find nothing). */
  private async dropIndexes(record: KeyRecord): Promise<void> {
    await Promise.all([this.redis.del(this.k('keyhash', record.hash)), this.redis.del(this.k('keyid', record.id))]).catch(() => {});
  }

  private async revokeRecord(record: KeyRecord, at: Date): Promise<KeyRecord> {
    const raw = (await this.redis.eval(REVOKE_KEY, 1, this.recordKey(record.accountId, record.id), at.toISOString())) as string | null;
    if (!raw) throw new NotFoundError(`no key ${record.id}`);
    return JSON.parse(raw) as KeyRecord;
  }

  private async getAccount(id: string): Promise<Account | undefined> {
    const raw = await this.redis.get(this.accountKey(id, 'account'));
    return raw ? (JSON.parse(raw) as Account) : undefined;
  }

  private async getKeyById(keyId: string): Promise<KeyRecord> {
    const accountId = await this.redis.get(this.k('keyid', keyId));
    const raw = accountId ? await this.redis.get(this.recordKey(accountId, keyId)) : null;
    if (!raw) throw new NotFoundError(`no key ${keyId}`);
    return JSON.parse(raw) as KeyRecord;
  }

  private k(...parts: string[]): string {
    return [this.prefix, ...parts].join(':');
  }

  private accountKey(accountId: string, what: 'account' | 'keys'): string {
    return redisAccountKey(this.prefix, accountId, what);
  }

  private recordKey(accountId: string, keyId: string): string {
    return `${redisAccountKey(this.prefix, accountId, 'key')}:${keyId}`;
  }
}

/** A key of the account's own slot (the dashboard store reads the account beside its other keys). */
export function redisAccountKey(prefix: string, accountId: string, what: string): string {
  return `${prefix}:${tag('a', accountId)}:${what}`;
}

function splitIndex(index: string): [string, string] {
  const at = index.lastIndexOf(' ');
  return [index.slice(0, at), index.slice(at + 1)];
}

/** An error reply of one of the scripts above (Redis 7 prefixes it with `ERR `). */
function isScriptError(error: Error, code: string): boolean {
  return error.message === code || error.message === `ERR ${code}`;
}
