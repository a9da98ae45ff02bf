import type { Redis } from 'ioredis';
import { hashesEqual } from './api-key.js';
import { expireBy, newKey, NotFoundError } from './key-records.js';
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
    const existing = await this.getAccount(options.accountId);
    const account: Account = { id: options.accountId, plan: options.plan, status: existing?.status ?? 'active' };
    const multi = this.redis.multi();
    if (options.revokeOthers) {
      for (const other of await this.listKeys(options.accountId)) {
        if (!other.revokedAt) multi.set(this.k('key', other.hash), JSON.stringify({ ...other, revokedAt: created.record.createdAt }));
      }
    }
    multi
      .set(this.k('key', created.record.hash), JSON.stringify(created.record))
      .set(this.k('keyid', created.record.id), created.record.hash)
      .set(this.k('account', account.id), JSON.stringify(account))
      .sadd(this.k('accounts'), account.id)
      .sadd(this.k('account-keys', account.id), created.record.id);
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
    const revoked = { ...record, revokedAt: record.revokedAt ?? new Date().toISOString() };
    await this.redis.set(this.k('key', record.hash), JSON.stringify(revoked));
    this.cache.delete(record.hash);
    return revoked;
  }

  async rotateKey(keyId: string, overlapMs: number): Promise<{ key: string; record: KeyRecord; old: KeyRecord }> {
    const old = await this.getKeyById(keyId);
    if (old.revokedAt) throw new Error(`key ${keyId} is revoked`);
    const account = await this.getAccount(old.accountId);
    if (!account) throw new NotFoundError(`no account ${old.accountId}`);
    const created = await this.createKey({
      accountId: old.accountId,
      plan: account.plan,
      expiresAt: old.expiresAt ? new Date(old.expiresAt) : null,
      allowedIps: old.allowedIps,
      allowedOrigins: old.allowedOrigins,
      label: old.label,
    });
    const ending = expireBy(old, new Date(Date.now() + overlapMs));
    await this.redis.set(this.k('key', old.hash), JSON.stringify(ending));
    this.cache.delete(old.hash);
    return { ...created, old: ending };
  }

  async listAccounts(): Promise<Account[]> {
    const ids = await this.redis.smembers(this.k('accounts'));
    const accounts = await Promise.all(ids.map((id) => this.getAccount(id)));
    return accounts.filter((a): a is Account => Boolean(a)).sort((a, b) => a.id.localeCompare(b.id));
  }

  async setAccountStatus(accountId: string, status: Account['status']): Promise<Account> {
    const account = await this.getAccount(accountId);
    if (!account) throw new NotFoundError(`no account ${accountId}`);
    const updated = { ...account, status };
    await this.redis.set(this.k('account', accountId), JSON.stringify(updated));
    this.cache.clear();
    return updated;
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
